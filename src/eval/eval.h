/* diffattn evaluations: multi-needle retrieval, where attention goes on
 * needle prompts, and activation outliers. Validation loss (da_eval_loss) is
 * in diffattn/train.h, beside the training loop that reports it.
 * Implemented in src/eval/needle.c, src/eval/needle_attention.c, src/eval/outliers.c, src/eval/quant_logits.c,
 * src/eval/ppl.c, src/eval/reference_outputs.c, src/eval/eval_data.c, src/eval/results_json.c,
 * src/eval/loss_position.c. */
#ifndef DIFFATTN_EVAL_H
#define DIFFATTN_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/data.h"
#include "diffattn/generate.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Validation loss over fixed windows: the result of diffattn/train.h's
 * da_eval_loss, which the functions below also fill. */
typedef struct da_eval_loss_result da_eval_loss_result;

/* ---------------------------------------------------------------- loss by position */

/* The next-token loss by position (1 = the first prediction, from one token
 * of context) in bins at powers of two: 1, 2-3, 4-7, ..., the last one ending
 * at the window's length. Over windows of the validation split, optionally
 * with distractors (only target tokens are scored). */
#define DA_LOSS_MAX_BINS 32

typedef struct {
    long windows;                /* evenly spaced over the validation split */
    int seq, batch;              /* window length; windows per forward pass */
    const da_distract *distract; /* NULL: the plain windows of da_eval_loss */
} da_loss_position_config;

typedef struct {
    int first, last;       /* positions, 1-based, inclusive */
    long tokens;           /* scored positions in the bin, over every window */
    double loss;           /* their mean */
    double lo, hi;         /* 95% interval: loss -+ 1.96 x the standard error of the windows' bin means */
} da_loss_bin;

typedef struct {
    double loss;           /* the mean over every scored position */
    long target_tokens, windows;
    int seq;
    int n_bins;
    da_loss_bin bins[DA_LOSS_MAX_BINS];
    double *per_position;  /* da_eval_loss_ids: (seq) the loss at each position; NULL otherwise */
} da_loss_position_result;

/* The training forward over c's windows of d (the model's and data's vocabularies agree). */
da_status da_eval_loss_by_position(da_model *m, const da_text_data *d, const da_loss_position_config *c,
                                   da_loss_position_result *r);
/* One sequence of n ids: the loss of predicting ids[t + 1] at every position t < n - 1. */
da_status da_eval_loss_ids(da_model *m, const int *ids, int n, da_loss_position_result *r);
void da_loss_position_free(da_loss_position_result *r);
/* One JSON line: loss, target_tokens, then loss_by_position (ids) or bins (with_bins). */
char *da_loss_position_json(const char *model, da_arch arch, const da_loss_position_result *r, int with_bins);

/* ---------------------------------------------------------------- needle retrieval */

/* Multi-needle retrieval (the paper's protocol): N sentences "The special
 * magic {key} number is: {value}." hidden in filler text; R of them are asked
 * for at the end, each as "The special magic {key} number is:", and the
 * answer is the exact match of the value generated greedily. The R asked
 * needles sit at the given depth; the others at random depths. */
#define DA_NEEDLE_MAX_CONTEXTS 16
#define DA_NEEDLE_MAX_DEPTHS 16

typedef struct {
    int needles, queries, samples;
    int n_contexts, contexts[DA_NEEDLE_MAX_CONTEXTS]; /* prompt length in bytes of filler + needles */
    int n_depths, depths[DA_NEEDLE_MAX_DEPTHS];       /* percent */
    uint64_t seed;
} da_needle_config;

typedef struct {
    double acc[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS]; /* per (context, depth) */
    double overall;
    long asked;
} da_needle_result;

void da_needle_config_default(da_needle_config *c);
/* Needle retrieval of a model through the inference engine (10 new tokens
 * per answer), the attention logits quantized to logit_bits (0: exact). */
da_status da_needle_eval_engine(const da_engine *e, const da_needle_config *c, int logit_bits, da_needle_result *r);
da_status da_needle_eval_model(const da_model *m, const da_needle_config *c, int logit_bits, da_needle_result *r);


/* ---------------------------------------------------------------- attention on needle prompts */

/* From the positions that generate the answer (teacher-forced), per layer and
 * head, the share of the attention row on the answer span and on the context
 * outside the asked needle (src/eval/needle_attention.h has the details). */
#define DA_ATTN_MAX_LAYERS 64

typedef struct {
    double answer[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS]; /* per (context, depth) */
    double noise[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS];
    double answer_by_layer[DA_ATTN_MAX_LAYERS], noise_by_layer[DA_ATTN_MAX_LAYERS];
    double digits[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS]; /* answer digit accuracy */
    double answer_all, noise_all, digits_all;
    long prompts;
} da_needle_attention_result;

/* The answer-position rows of one prompt, averaged over layers and heads:
 * map (rows, cols) with rows = 7 answer-generating positions and cols = every
 * position before the question; span_begin/span_end bound the answer span. */
typedef struct {
    float *map; /* malloc'd, rows * cols */
    int rows, cols;
    int span_begin, span_end; /* [begin, end) */
    int needle_begin, needle_end;
    int first_row; /* the sequence position of map row 0 */
} da_needle_attention_map;

/* The byte-level model m on nc's prompts (every context, depth and sample). */
da_status da_eval_needle_attention(da_model *m, const da_needle_config *nc, da_needle_attention_result *r);
/* Runs m on one sequence of T tokens and calls visit(ctx, layer, head, t,
 * row) with the attention row P over positions 0..t (as defined above:
 * DIFF's combined map) for every layer and head at each position t with
 * want[t] != 0. */
typedef void (*da_attention_row_fn)(void *ctx, int layer, int head, int t, const float *row);
da_status da_eval_attention_rows(da_model *m, const int *tokens, int T, const unsigned char *want,
                                 da_attention_row_fn visit, void *ctx);
/* One prompt's map (context ci, depth di, sample s). Free map->map. */
da_status da_needle_attention_map_of(da_model *m, const da_needle_config *nc, int ci, int di, int s,
                                     da_needle_attention_map *map);


/* ---------------------------------------------------------------- reference outputs */

/* The model at model_path on one sequence of token ids (a file of
 * whitespace-separated ids, at most max_seq_len of them), for comparison with
 * a reference implementation. Logits: .npy float32 [T, vocab]. */
da_status da_eval_write_logits(const char *model_path, const char *ids_path, const char *out_path,
                               const da_load_opts *load);
/* The gradient of the mean cross-entropy of predicting ids[1..T-1] from
 * ids[0..T-2] (T >= 2), as safetensors: each parameter's gradient under its
 * name, plus the scalar "loss" (also returned in *loss). */
da_status da_eval_write_grads(const char *model_path, const char *ids_path, const char *out_path, float *loss,
                              const da_load_opts *load);

/* ---------------------------------------------------------------- outliers */

/* Top-1, 2, 3, 10, 100 and the median of |x| over a set of values. */
typedef struct {
    double top[5]; /* the 1st, 2nd, 3rd, 10th and 100th largest |x| (0 when fewer values) */
    double median; /* of |x| */
    size_t count;
} da_outlier_stats;

typedef struct {
    da_outlier_stats logits; /* q.k / sqrt(d) over every causal pair, sub-head and layer */
    da_outlier_stats hidden; /* every layer's output */
    long tokens;
    /* lambda per layer (the first DA_ATTN_MAX_LAYERS; n_lambda of them, 0 for softmax): DIFF's one
     * value per layer (std 0), or a per-token lambda's sigmoid(x . lambda_proj) over every token and head */
    int n_lambda;
    double lambda_mean[DA_ATTN_MAX_LAYERS], lambda_std[DA_ATTN_MAX_LAYERS];
    double lambda_min[DA_ATTN_MAX_LAYERS], lambda_max[DA_ATTN_MAX_LAYERS];
} da_outliers_result;

/* Runs `windows` validation windows of T tokens through the model. */
da_status da_eval_outliers(da_model *m, const da_text_data *data, int T, long windows, da_outliers_result *r);
/* The same over n given sequences of T tokens (tokens: (n, T)). */
da_status da_eval_outliers_of(da_model *m, const int *tokens, long n, int T, da_outliers_result *r);


/* ---------------------------------------------------------------- quantized attention logits */

/* The paper's Figure 8: validation loss and needle retrieval with the
 * attention logits fake-quantized (symmetric, one absmax scale per query row
 * of each map) before every softmax, through the inference engine. */
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
    /* NULL, or called before each of the steps (a loss or a needle pass per width) */
    void (*on_progress)(void *ctx, const char *step, int done, int total);
    void *progress_ctx;
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

/* ---------------------------------------------------------------- perplexity against a base model */

/* Perplexity of a quantized model against its full-precision base, in
 * llama.cpp's protocol: the validation split cut into non-overlapping chunks
 * of n_ctx tokens, each run from an empty cache, and only the second half of
 * each chunk scored (positions n_ctx/2 .. n_ctx-2 predicting the next token),
 * so every scored token has at least n_ctx/2 tokens of context. */
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
    da_act_mode act;  /* the activations the quantized model ran */
} da_ppl_result;

da_status da_eval_ppl(const da_engine *q, const da_engine *base, const da_text_data *data, const da_ppl_config *c,
                      da_ppl_result *r);

/* ---------------------------------------------------------------- validation data */

/* The validation split of data for a model: text through the tokenizer tok
 * the model carries (bytes when NULL); token shards must hold the same
 * tokenizer's ids (da_tokenizer_match); a vocabulary other than vocab_size is
 * an error naming both sizes. model names the model in messages. Free d with
 * da_text_data_free. */
da_status da_eval_data_load(da_text_data *d, const char *data, float val_fraction, int seq, const char *model,
                            const da_tokenizer *tok, int vocab_size);

/* ---------------------------------------------------------------- results as JSON */

/* Each evaluation's result as one line of JSON (diffattn eval --json): the
 * model's path and arch, then the result's fields, numbers at fixed
 * decimals. malloc'd text the caller frees; NULL when out of memory. */
char *da_eval_loss_json(const char *model, da_arch arch, int seq, const da_eval_loss_result *r);
char *da_outliers_json(const char *model, da_arch arch, const da_outliers_result *r);
char *da_quant_logits_json(const char *model, da_arch arch, const da_quant_logits_config *c,
                           const da_quant_logits_result *r);
char *da_needle_json(const char *model, da_arch arch, const da_needle_config *c, const da_needle_result *r);
char *da_needle_attention_json(const char *model, const da_config *cfg, const da_needle_config *c,
                               const da_needle_attention_result *r);
/* q: the quantized model's engine (its arch and weight type). */
char *da_ppl_json(const char *model, const char *base, const da_engine *q, const da_ppl_config *c,
                  const da_ppl_result *r);

#ifdef __cplusplus
}
#endif
#endif
