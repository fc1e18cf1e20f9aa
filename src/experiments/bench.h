/* Throughput measurements behind `diffattn bench`: a whole training step
 * and the attention kernel alone, against the sgemm peak of the same run. */
#ifndef DA_BENCH_H
#define DA_BENCH_H

#include "diffattn/train.h"
#include "diffattn/generate.h"

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

/* Model FLOPs per token of a training step (forward + backward = 3x the
 * forward): 2 x every matmul weight (incl. the LM head), plus attention with
 * causal halving: DIFF 3*C*T, softmax 2*C*T per layer in the forward. */
double da_train_flops_per_token(const da_config *c, int T);
/* Attention forward + backward alone, per token and layer. */
double da_attn_flops_per_token(const da_config *c, int T);
/* Best of 3 sgemm (or bf16 GEMM) runs at n = 2048, in GFLOP/s. */
double da_sgemm_peak_gflops(void);
double da_bf16_peak_gflops(da_isa isa); /* 0 below DA_ISA_AVX512_BF16 */

/* Times `steps` training steps (zero grads, forward, backward, AdamW) after
 * `warmup` untimed ones, on random tokens, in the context x (kernel level,
 * bf16 matmuls). When x->prof_s is set, the time per phase summed over the
 * timed steps is added to it. */
da_status da_bench_train(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                         const da_exec *x, da_bench_result *r);
/* Times the attention forward + backward of one layer on random q, k, v. */
da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        const da_exec *x, da_bench_result *r);

#endif
