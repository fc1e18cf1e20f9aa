/* The elementwise and matrix ops of the transformer, each forward beside its
 * backward. N is the number of rows (B*T). Every backward says whether it
 * accumulates (+=) or overwrites.
 *
 * The hot ops exist once per instruction-set level (da_isa): ops_variant.c
 * is compiled for each level with that level's -march, and its table of
 * function pointers is what callers use:
 *     const da_ops *op = da_ops_of(x->isa);
 *     op->rmsnorm_forward(out, rstd, x, w, N, C, eps);
 * The matmuls (BLAS, or the bf16 GEMM when the context asks for it) and the
 * RoPE tables are ordinary functions. */
#ifndef DA_OPS_H
#define DA_OPS_H

#include <stddef.h>

#include "diffattn/core.h"
#include "diffattn/exec.h"
#include "ops/qblock.h"

typedef struct {
    da_isa isa; /* the level this table's code was compiled for */
    /* what the level's code is, for reports (da_kernel_paths) */
    const char *vector_path; /* the `omp simd` loops */
    const char *exp_path;    /* exp of flash attention and SwiGLU */
    const char *dot_path;    /* vec_dot */

    /* out: (N, C) = x * rstd * w; rstd: (N) = 1/sqrt(mean(x^2) + eps), saved for the backward. */
    void (*rmsnorm_forward)(float *out, float *rstd, const float *x, const float *w, int N, int C, float eps);
    /* One row of rmsnorm_forward, serial (the engine's decode calls it per
     * token, where an OpenMP region would wake the runtime's threads each
     * time); returns rstd. out: (C). */
    float (*rmsnorm_row)(float *out, const float *x, const float *w, int C, float eps);
    /* dx: (N, C) +=, dw: (C) +=. */
    void (*rmsnorm_backward)(float *dx, float *dw, const float *dout, const float *x, const float *w,
                             const float *rstd, int N, int C);

    /* Rotates, in place, every d-wide sub-head of x: (B, T, n_sub*d) by its
     * position (tables from da_rope_tables_theta), GPT-J interleaved pairs.
     * inverse=1 applies the transpose rotation, which is the backward. */
    void (*rope_apply)(float *x, const float *cos_tab, const float *sin_tab, int B, int T, int n_sub, int d,
                       int inverse);
    /* One position of rope_apply, serial: the n_sub sub-heads of row, by
     * that position's cos, sin: (d/2) each. */
    void (*rope_row)(float *row, const float *cos_row, const float *sin_row, int n_sub, int d, int inverse);

    /* gate: (N, F) = silu(h1) * h3 (gate may be h1); on the calling thread up to 32 K elements. */
    void (*swiglu_forward)(float *gate, const float *h1, const float *h3, size_t n);
    /* dh1, dh3: (N, F), overwritten. */
    void (*swiglu_backward)(float *dh1, float *dh3, const float *dgate, const float *h1, const float *h3,
                            size_t n);

    /* out: (N, C) = emb[tokens]. */
    void (*embedding_forward)(float *out, const int *tokens, const float *emb, int N, int C);
    /* demb: (V, C) += scatter of dout: (N, C). Serial, so the sum order is fixed. */
    void (*embedding_backward)(float *demb, const float *dout, const int *tokens, int N, int C);

    /* losses: (N) = logsumexp(logits) - logits[target]; 0 where target is -1
     * (masked). Returns their mean over the counted (target >= 0) positions, 0
     * when none counts. */
    float (*cross_entropy_forward)(float *losses, const float *logits, const int *targets, int N, int V);
    /* Overwrites logits: (N, V) in place with d(mean loss)/d logits =
     * (softmax - onehot) / n_counted; rows with target -1 become 0. */
    void (*cross_entropy_backward)(float *logits, const int *targets, int N, int V);

    /* One AdamW update of n parameters p, in place, with their gradients g
     * and moments m, v (updated in place); bc1, bc2: the bias corrections
     * 1 - beta^step; wd: decoupled weight decay (0 for undecayed tensors). */
    void (*adamw_update)(float *p, const float *g, float *m, float *v, long n, float lr, float beta1, float beta2,
                         float eps, float wd, float bc1, float bc2);

    /* C = alpha * A B + beta * C with bf16 inputs and fp32 accumulation
     * (AVX512-BF16). Element (i, k) of A is a[i*a_rs + k*a_cs], (k, j) of B
     * is b[k*b_rs + j*b_cs]; C is row-major with leading dimension ldc.
     * Returns 0, or -1 (C untouched) when its packing buffer cannot be
     * allocated. NULL below DA_ISA_AVX512_BF16. */
    int (*bf16_gemm)(int M, int N, int K, float alpha, const float *a, long a_rs, long a_cs, const float *b,
                     long b_rs, long b_cs, float beta, float *c, long ldc);

    /* Dot of one weight row of type (n weights; Q8_0, Q4_0, Q4_K or a read-only type of qblock.h) with the
     * int8 activation row x (the same n); NAN for other types. */
    float (*vec_dot)(int type, const void *wrow, const da_qact *x, int64_t n);
    /* x: (n) -> the int8 row a (its arrays the caller's), scales by mode (qblock.h). */
    void (*quantize_act)(da_qact *a, const float *x, int64_t n, da_act_scale_mode mode, float static_absmax);
    /* out[t * ldo + r] (=, or += when accumulate) = vec_dot of weight row r, r0 <= r < r1 (row r at
     * w + r * row_bytes, cols weights of type `type`), with x[t], t < n: a matmul's rows r0..r1-1
     * (qgemm.c). The same per-block integer dots as vec_dot; float sums in another order. */
    unsigned qgemm_tiled; /* bit t set: qgemm has a many-row kernel for type t (else it loops over vec_dot) */
    /* 1: qgemm reads Q8_0 in qblock.h's r16 layout (type DA_QT_Q8_0_R16) faster than in ggml's, so an engine
     * loaded for this level packs its Q8_0 matrices; every level's qgemm takes the layout. */
    int q8_0_r16;
    /* type DA_QT_Q8_0_R16: rows r0 .. r1 - 1 lie in packed 16-row groups of Q8_0 (qblock.h), row r's group at
     * w + (r / 16) 16 row_bytes. */
    void (*qgemm)(int type, const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols, const da_qact *x,
                  int n, float *out, long ldo, int accumulate);
    /* The same for F16, BF16 or F32 rows and float activations x: (n, ldx); float sums in the level's order. */
    void (*half_gemm)(int type, const unsigned char *w, size_t row_bytes, int r0, int r1, int64_t cols,
                      const float *x, long ldx, int n, float *out, long ldo, int accumulate);
    /* o: (cols) += sum over t < n of p[t] * F16, BF16 or F32 row t (at w + t * row_bytes): attention's value
     * mix over a KV cache (qgemm.c). */
    void (*half_axpy)(int type, const unsigned char *w, size_t row_bytes, int n, const float *p, int64_t cols,
                      float *o);
    /* dst: (n) F16 = x: (n), rounded to nearest even. */
    void (*half_from_f32)(const float *x, int64_t n, uint16_t *dst);
} da_ops;

/* qgemm's type for Q8_0 rows in packed 16-row groups: a memory layout, not a file type (no ggml number). */
#define DA_QT_Q8_0_R16 1024

/* The table of level isa, or of the best level below it that this CPU
 * runs (a level the CPU lacks is never executed). */
const da_ops *da_ops_of(da_isa isa);

/* out: (N, Cout) = inp: (N, Cin) @ W: (Cout, Cin)^T. Overwrites out (beta=0), or adds
 * to it when accumulate is 1. bf16 when x->bf16_matmul and the CPU has AVX512-BF16. */
void da_matmul_forward(const da_exec *x, float *out, const float *inp, const float *W, int N, int Cin, int Cout,
                    int accumulate);
/* dinp: (N, Cin) (+= when accumulate_dinp, else overwritten; skipped when NULL),
 * dW: (Cout, Cin) += dout^T @ inp (skipped when NULL). dout: (N, Cout). */
void da_matmul_backward(const da_exec *x, float *dinp, float *dW, const float *dout, const float *inp, const float *W,
                     int N, int Cin, int Cout, int accumulate_dinp);

/* RoPE tables: cos_tab, sin_tab: (T, d/2), angle = t * theta^(-j/(d/2-1)). */
void da_rope_tables_theta(float *cos_tab, float *sin_tab, int T, int d, float theta);

/* A RoPE frequency rule (the numbering of da_rope_freq and da_rope_scale). */
typedef struct {
    int rule;    /* 0: theta^(-j/(d/2-1)) (DIFF framework); 1: theta^(-2j/d) (Llama) */
    int scaling; /* 0 none; 1 linear: / factor; 2 llama3 (Hugging Face's _compute_llama3_parameters) */
    double theta, factor, low_freq_factor, high_freq_factor, original_max_pos;
} rope_freq_spec;
/* inv_freq: (d/2) angular frequency of each pair. */
void da_rope_inv_freq(double *inv_freq, int d, const rope_freq_spec *f);
/* cos_tab, sin_tab: (T, d/2), angle = t * inv_freq[j]. */
void da_rope_tables_freq(float *cos_tab, float *sin_tab, int T, int d, const double *inv_freq);

/* The PolyNorm gate (arXiv 2411.03884), the MLP activation of --mlp polynorm:
 *     gate = PolyNorm(h1) * h3,  PolyNorm(u) = w0 n(u^3) + w1 n(u^2) + w2 n(u) + b,
 *     n(z) = z / sqrt(mean(z^2) + DA_POLYNORM_EPS) over each F-wide row.
 * gate, h1, h3: (N, F); gate may be h1. w: (3), b: (1). */
#define DA_POLYNORM_EPS 1e-6
void da_polynorm_forward(float *gate, const float *h1, const float *h3, const float *w, const float *b, int N, int F);
/* dh1, dh3: (N, F) overwritten; dw: (3), db: (1) +=. dgate: (N, F). */
void da_polynorm_backward(float *dh1, float *dh3, float *dw, float *db, const float *dgate, const float *h1,
                          const float *h3, const float *w, const float *b, int N, int F);

#endif
