/* diffattn evaluations: multi-needle retrieval, where attention goes on
 * needle prompts, and activation outliers. Validation loss (da_eval_loss) is
 * in diffattn/train.h, beside the training loop that reports it. */
#ifndef DIFFATTN_EVAL_H
#define DIFFATTN_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/data.h"
#include "diffattn/generate.h"
#include "diffattn/train.h"

#ifdef __cplusplus
extern "C" {
#endif

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
/* da_needle_eval of model m (10 new tokens per answer) with the attention
 * logits quantized to logit_bits (0: exact); m->attn_logit_bits is restored
 * afterwards. */
da_status da_needle_eval_model(da_model *m, const da_needle_config *c, int logit_bits, da_needle_result *r);


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
/* One prompt's map (context ci, depth di, sample s). Free map->map. */
da_status da_needle_attention_map_of(da_model *m, const da_needle_config *nc, int ci, int di, int s,
                                     da_needle_attention_map *map);


/* ---------------------------------------------------------------- reference outputs */

/* The model at model_path on one sequence of token ids (a file of
 * whitespace-separated ids, at most max_seq_len of them), for comparison with
 * a reference implementation. Logits: .npy float32 [T, vocab]. */
da_status da_eval_write_logits(const char *model_path, const char *ids_path, const char *out_path);
/* The gradient of the mean cross-entropy of predicting ids[1..T-1] from
 * ids[0..T-2] (T >= 2), as safetensors: each parameter's gradient under its
 * name, plus the scalar "loss" (also returned in *loss). */
da_status da_eval_write_grads(const char *model_path, const char *ids_path, const char *out_path, float *loss);

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
} da_outliers_result;

/* Runs `windows` validation windows of T tokens through the model. */
da_status da_eval_outliers(da_model *m, const da_text_data *data, int T, long windows, da_outliers_result *r);


#ifdef __cplusplus
}
#endif
#endif
