/* Throughput measurements behind `diffattn bench`: a whole training step
 * and the attention kernel alone, against the sgemm peak of the same run. */
#ifndef DA_BENCH_H
#define DA_BENCH_H

#include "diffattn/generate.h"
#include "diffattn/train.h"

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
 * `warmup` untimed ones, on random tokens, in the context x (kernel level,
 * bf16 matmuls). When x->prof_s is set, the time per phase summed over the
 * timed steps is added to it. */
da_status da_bench_train(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                         const da_exec *x, da_bench_result *r);
/* Times the attention forward + backward of one layer on random q, k, v. */
da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        const da_exec *x, da_bench_result *r);
/* A bench train or attn result as a JSON line: the model's shape, the context x (with its
 * profile per step when x->prof_s is set) and the timings. malloc'd; NULL when out of memory. */
char *da_bench_json(const char *bench, const char *kernel, const da_config *c, int batch, int seq, const da_exec *x,
                    const da_bench_result *r);

/* `bench generate`: prompt and batch-1 decoding speed of several models,
 * timed interleaved so their ratios share the machine's conditions. */
typedef struct {
    int prompt, gen, reps; /* prompt tokens (one batch), greedy decoding steps, repetitions */
    const char *act;       /* activation mode for every model; NULL: each file's own (f32 for float weights) */
    int kv_int8;
    da_load_opts load; /* how the model files are read */
    int kv_f16; /* 1: an f16 KV cache (llama.cpp's default; not with kv_int8); both 0: f32 */
} da_bench_generate_opts;

typedef struct {
    char weight_type[8], act[16];
    char dots[16];   /* the instruction set of the quantized dot products */
    int kv_int8, kv_f16;
    long file_bytes;
    double best_prompt, best_decode; /* tokens/s, the best repetition */
    double decode_bytes;             /* read per decoded token, at the run's mean decoding context */
} da_bench_generate_result;

/* The machine's copy bandwidth in GB/s (bytes read + bytes written, as
 * STREAM counts them) with the current OpenMP threads: memcpy between two
 * buffers of `bytes` (far above the caches), the best of 5; 0 when the
 * buffers cannot be allocated. */
double da_copy_bandwidth_gbs(size_t bytes);

/* Times the n model files in paths; res: (n). */
da_status da_bench_generate(const char *const *paths, int n, const da_bench_generate_opts *o,
                            da_bench_generate_result *res);
/* One model's result as a JSON line (bench generate --json): speeds against the first model's, the
 * machine's load and copy bandwidth (0: not measured). malloc'd; NULL when out of memory. */
char *da_bench_generate_json(const char *path, const da_bench_generate_opts *o, const da_bench_generate_result *r,
                             const da_bench_generate_result *first, double loadavg, double bandwidth_gbs);

/* Model FLOPs per token of a training step (forward + backward = 3x the
 * forward): 2 x every matmul weight (incl. the LM head), plus attention with
 * causal halving: DIFF 3*C*T, softmax 2*C*T per layer in the forward. */
double da_train_flops_per_token(const da_config *c, int T);
/* Attention forward + backward alone, per token and layer. */
double da_attn_flops_per_token(const da_config *c, int T);
/* Best of 3 sgemm (or bf16 GEMM) runs at n = 2048, in GFLOP/s. */
double da_sgemm_peak_gflops(void);
double da_bf16_peak_gflops(da_isa isa); /* 0 below DA_ISA_AVX512_BF16 */

#endif
