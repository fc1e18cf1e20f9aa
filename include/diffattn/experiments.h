/* diffattn experiments: `compare` (DIFF against the softmax baseline, trained
 * and evaluated alike, with a report), throughput benchmarks, and the PNG
 * figures of reports. */
#ifndef DIFFATTN_EXPERIMENTS_H
#define DIFFATTN_EXPERIMENTS_H

#include "diffattn/eval.h"
#include "diffattn/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- compare */

/* DIFF and the softmax baseline trained at equal parameters, tokens, data and
 * seed, then the same evaluations on both, with a side-by-side report
 * (report.md, report.json, figures) in out_dir. */
#define DA_COMPARE_MAX_ARCHS 3

typedef struct {
    const char *out_dir;
    const char *data;  /* NULL: the built-in needle mix */
    /* trained and evaluated side by side, in this order (default diff, diff2, softmax); each DIFF
     * variant gets a verdict against softmax when softmax is among them */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int n_archs;
    long steps;
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides steps) */
    int dim, layers, heads, seq, batch;
    int seeds;
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int quiet;
    /* Continue an interrupted job in out_dir: finished runs are kept, an
     * interrupted one continues from its last checkpoint, and the steps are
     * those the first run was started with. */
    int resume;
    int force;       /* a new compare in an out_dir that holds one replaces it */
    int steps_given; /* on resume, steps was chosen now: the runs continue to it (else the first run's steps) */
    volatile int *stop; /* when it becomes non-zero: checkpoint the run in training and return DA_INTERRUPTED */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
/* A comma-separated list of architecture names ("diff,diff2,softmax") into c->archs; each at most once. */
da_status da_compare_parse_archs(da_compare_config *c, const char *list);
/* Writes the built-in training mix (filler text with needle sentences, each
 * document ending in a question and its answer) of about `bytes` bytes. */
da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed);
da_status da_compare(const da_compare_config *c);

/* ---------------------------------------------------------------- benchmarks */

typedef struct {
    double ms_min, ms_median, ms_mean; /* per step */
    double tok_per_s;         /* at ms_min: the best of the timed steps */
    double gflops;            /* model FLOPs per step / ms_min */
    double peak_gflops;       /* sgemm n=2048, best of 3, this run */
    double peak_bf16_gflops;  /* bf16 GEMM n=2048, best of 3, this run (bf16 mode only, else 0) */
    double mfu;               /* gflops / the peak of the arithmetic in use (bf16 peak in bf16 mode) */
    double flops_per_token;
    double peak_rss_mb;       /* the process's high-water resident memory (VmHWM) */
    size_t n_params;
    int steps;
} da_bench_result;

/* Times `steps` training steps (zero grads, forward, backward, AdamW) after
 * `warmup` untimed ones, on random tokens. With da_prof_on set, da_prof_s
 * holds the time per phase summed over the timed steps (the caller resets it). */
da_status da_bench_train(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                         da_bench_result *r);
/* Times the attention forward + backward of one layer on random q, k, v. */
da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        da_bench_result *r);

/* ---------------------------------------------------------------- figures */

/* PNG figures drawn with cairo, 800 x 500, one color per series (DIFF blue,
 * baseline orange). */
#define DA_PLOT_WIDTH 800
#define DA_PLOT_HEIGHT 500

typedef struct {
    const char *name;
    const double *x, *y; /* n points; NAN y values are skipped */
    int n;
} da_series;

da_status da_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                        const da_series *s, int n_series);

/* values[g][c]: group g (a series, e.g. an architecture), category c. */
da_status da_plot_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                       int n_cat, const char *const *groups, const double *const *values, int n_groups);

/* Attention of a few query rows over a long context, one band per model
 * (the paper's Figure 1): map (rows, cols), weights may be negative (DIFF),
 * with the asked needle [needle_begin, needle_end) and its answer
 * [span_begin, span_end) marked under the band. All bands share one scale. */
typedef struct {
    const char *name;
    const float *map;
    int rows, cols;
    int span_begin, span_end, needle_begin, needle_end;
} da_attention_band;

da_status da_plot_attention_bands(const char *path, const char *title, const da_attention_band *bands, int n_bands);


/* ---------------------------------------------------------------- bench generate */

/* `bench generate`: prompt and batch-1 decoding speed of several models,
 * timed interleaved so their ratios share the machine's conditions. */
typedef struct {
    int prompt, gen, reps; /* prompt tokens (one batch), greedy decoding steps, repetitions */
    const char *act;       /* activation mode for every model; NULL: each file's own (f32 for float weights) */
    int kv_int8;
} da_bench_generate_opts;

typedef struct {
    char weight_type[8], act[16];
    char dots[16];   /* the instruction set of the quantized dot products */
    int kv_int8;
    long file_bytes;
    double best_prompt, best_decode; /* tokens/s, the best repetition */
} da_bench_generate_result;

/* Times the n model files in paths; res: (n). */
da_status da_bench_generate(const char *const *paths, int n, const da_bench_generate_opts *o,
                            da_bench_generate_result *res);

#ifdef __cplusplus
}
#endif
#endif
