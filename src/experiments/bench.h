/* Throughput measurements behind `diffattn bench`: a whole training step
 * and the attention kernel alone, against the sgemm peak of the same run. */
#ifndef DA_BENCH_H
#define DA_BENCH_H

#include "diffattn/experiments.h"

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
