/* Perplexity of a quantized model against its full-precision base, in
 * llama.cpp's protocol: the validation split cut into non-overlapping chunks
 * of n_ctx tokens, each run from an empty cache, and only the second half of
 * each chunk scored (positions n_ctx/2 .. n_ctx-2 predicting the next token),
 * so every scored token has at least n_ctx/2 tokens of context. */
#ifndef DA_EVAL_PPL_H
#define DA_EVAL_PPL_H

#include "data/text_data.h"
#include "infer/engine.h"

typedef struct {
    int n_ctx;       /* chunk length (0 = the model's max_seq_len) */
    long max_chunks; /* 0 = every whole chunk of the validation split */
    da_session_opts run; /* the quantized model's session options (act, kv_int8) */
    /* NULL, or a file caching the base model's scored logits: read when it
     * matches (same n_ctx, chunks, vocabulary and base file size), else
     * computed and written. Saves the base forward when many quantized
     * variants are compared against one base. */
    const char *base_cache;
    long base_file_bytes;
} da_ppl_config;

typedef struct {
    double ppl, base_ppl, delta_ppl_pct; /* 100 * (ppl / base_ppl - 1) */
    double kld;       /* mean over scored tokens of KL(base || quantized), nats */
    double same_top1; /* share of scored tokens where both models' argmax agree */
    long chunks, scored;
} da_ppl_result;

da_status da_eval_ppl(const da_engine *q, const da_engine *base, const da_text_data *data, const da_ppl_config *c,
                      da_ppl_result *r);

#endif
