/* The paper's Figure 8: validation loss with the attention logits
 * fake-quantized (symmetric, one absmax scale per query row of each map)
 * before every softmax, through the inference engine. */
#ifndef DA_EVAL_QUANT_LOGITS_H
#define DA_EVAL_QUANT_LOGITS_H

#include "data/text_data.h"
#include "diffattn/generate.h"
#include "eval/needle.h"
#include "train/eval_loss.h"

/* The mean next-token loss over the same n_windows windows of T tokens as
 * da_eval_loss, each run through e from an empty KV cache with the logits
 * quantized to logit_bits (0: exact). */
da_status da_eval_loss_logit_bits(const da_engine *e, const da_text_data *data, int T, long n_windows, int logit_bits,
                                  da_eval_loss_result *r);

#define DA_QL_MAX_BITS 16

typedef struct {
    int seq;                       /* window length; 0: the model's max_seq_len */
    long windows;                  /* validation windows */
    int bits[DA_QL_MAX_BITS], n_bits;
    int needle;                    /* 1: needle retrieval at every width too */
    da_needle_config needles;      /* contexts[0] = 0: fitted to the model (below) */
    int needles_given;             /* needles.needles was chosen by the caller: keep it */
} da_quant_logits_config;

typedef struct {
    double exact_loss, loss[DA_QL_MAX_BITS];
    double needle_exact, needle[DA_QL_MAX_BITS];
    da_needle_config needles;      /* the needle configuration used */
    int seq;
} da_quant_logits_result;

/* The needle prompt length that fits a model of max_seq_len (64 positions
 * left for the question and answer, at most 1024 bytes), and unless
 * needles_given, as many needles as fit it (a sentence is about 46 bytes: 3
 * for a 256-token model). An error when the model is too short for a prompt. */
da_status da_needle_fit(da_needle_config *c, int max_seq_len, int needles_given);

/* Loss and (optionally) needle accuracy of e with exact logits and at each width. */
da_status da_eval_quant_logits(const da_engine *e, const da_text_data *data, const da_quant_logits_config *c,
                               da_quant_logits_result *r);

#endif
