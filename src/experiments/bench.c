/* Benchmarks of a training step and of the attention kernel. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "experiments/bench.h"
#include "ops/ops.h"
#include "core/profile.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double da_attn_flops_per_token(const da_config *c, int T) {
    /* Each query sees (T+1)/2 keys on average, or with a window W < T the
     * mean of min(t, W) over t = 1..T. QK^T: 2 flops per key per
     * q-dimension (C for DIFF and softmax, 2C for DIFF2's 2H query heads);
     * PV: 2 per key per value column (DIFF: 2 maps x H x 2d = 2C; DIFF2: 2
     * maps x H x d = 2C; softmax: C). Backward = 2x forward. So DIFF2's
     * attention costs twice softmax's at the same heads. */
    double keys = (T + 1) / 2.0, C = c->dim, W = c->window;
    if (W > 0 && W < T) keys = (W * (W + 1) / 2.0 + (T - W) * W) / T;
    double fwd = 2.0 * keys * da_q_dim(c) + 2.0 * keys * (c->arch == DA_ARCH_SOFTMAX ? C : 2.0 * C);
    return 3.0 * fwd;
}

double da_train_flops_per_token(const da_config *c, int T) {
    double C = c->dim, F = c->ffn_hidden, V = c->vocab_size, Ckv = C / (c->n_heads / c->n_kv_heads);
    /* q (Cq x C), out (C x C), k and v (Ckv x C), SwiGLU, DIFF2's lambda_proj (H x C) */
    double Cq = da_q_dim(c), lam = c->arch == DA_ARCH_DIFF2 ? c->n_heads * C : 0.0;
    double per_layer = 2.0 * (C * Cq + C * C + C * Ckv * 2 + 3.0 * C * F + lam);
    double matmul = c->n_layers * per_layer + 2.0 * C * V;
    return 3.0 * matmul + c->n_layers * da_attn_flops_per_token(c, T);
}

double da_sgemm_peak_gflops(void) {
    const int n = 2048;
    float *a = malloc((size_t)n * n * 4), *b = malloc((size_t)n * n * 4), *cc = malloc((size_t)n * n * 4);
    if (!a || !b || !cc) {
        free(a), free(b), free(cc);
        return 0;
    }
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = 1e-3f * (float)(i % 97);
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) { /* the first warms up */
        double t = da_now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, cc, n);
        t = da_now_s() - t;
        if (rep && t < best) best = t;
    }
    free(a), free(b), free(cc);
    return 2.0 * n * n * (double)n / best / 1e9;
}

/* VmHWM from /proc/self/status, in MB; 0 where unavailable. */
static double peak_rss_mb(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    if (!fp) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1) break;
    fclose(fp);
    return kb / 1024.0;
}

double da_bf16_peak_gflops(da_isa isa) {
    const da_ops *op = da_ops_of(isa);
    if (!op->bf16_gemm) return 0;
    const int n = 2048;
    float *a = malloc((size_t)n * n * 4), *b = malloc((size_t)n * n * 4), *cc = malloc((size_t)n * n * 4);
    double best = 1e30;
    if (a && b && cc) {
        for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = 1e-3f * (float)(i % 97);
        for (int rep = 0; rep < 4; rep++) {
            double t = da_now_s();
            op->bf16_gemm(n, n, n, 1.0f, a, n, 1, b, n, 1, 0.0f, cc, n);
            t = da_now_s() - t;
            if (rep && t < best) best = t;
        }
    }
    free(a), free(b), free(cc);
    return best < 1e30 ? 2.0 * n * n * (double)n / best / 1e9 : 0;
}

static void summarise(double *times, int steps, double flops_per_step, int tokens, const da_exec *x,
                      da_bench_result *r) {
    double sum = 0;
    for (int i = 0; i < steps; i++) sum += times[i];
    r->ms_mean = sum / steps * 1e3;
    qsort(times, (size_t)steps, sizeof *times, cmp_d);
    r->steps = steps;
    r->ms_min = times[0] * 1e3;
    r->ms_median = (steps % 2 ? times[steps / 2] : 0.5 * (times[steps / 2 - 1] + times[steps / 2])) * 1e3;
    r->tok_per_s = tokens / times[0];
    r->gflops = flops_per_step / times[0] / 1e9;
    r->peak_rss_mb = peak_rss_mb(); /* before the sgemm peak's own 48 MB */
    r->peak_gflops = da_sgemm_peak_gflops();
    r->peak_bf16_gflops = x->bf16_matmul ? da_bf16_peak_gflops(x->isa) : 0;
    double peak = x->bf16_matmul ? r->peak_bf16_gflops : r->peak_gflops;
    r->mfu = peak > 0 ? r->gflops / peak : 0;
}

da_status da_bench_train(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                         const da_exec *x, da_bench_result *r) {
    memset(r, 0, sizeof *r);
    if (steps < 1 || warmup < 0) return da_errorf("--steps must be >= 1 and --warmup-steps >= 0");
    da_model m;
    da_status st = da_model_create(&m, c);
    if (st.code) return st;
    da_model_init(&m, 1);
    da_adamw opt = {0};
    da_acts *a = NULL;
    int *tok = malloc((size_t)B * T * sizeof(int)), *tgt = malloc((size_t)B * T * sizeof(int));
    double *times = malloc((size_t)steps * sizeof(double));
    if (!tok || !tgt || !times) st = da_errorf("out of memory");
    if (!st.code) st = da_model_alloc_grads(&m);
    if (!st.code) st = da_adamw_create(&opt, m.n_params);
    /* the steps are profiled into prof, cleared when the timed ones begin */
    double prof[DA_PROF_N] = {0};
    da_exec ex = *x;
    ex.prof_s = x->prof_s ? prof : NULL;
    opt.isa = ex.isa;
    if (!st.code) st = da_acts_create_ex(&a, c, B, T, kernel, &ex);
    if (!st.code) {
        da_rng rng;
        da_rng_seed(&rng, 3);
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int)(da_rng_next(&rng) % (uint64_t)c->vocab_size);
            tgt[i] = (int)(da_rng_next(&rng) % (uint64_t)c->vocab_size);
        }
        da_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f};
        for (int s = 0; s < warmup + steps; s++) {
            if (s == warmup) memset(prof, 0, sizeof prof);
            double t = da_now_s();
            DA_PROF(ex.prof_s, DA_PROF_ZERO_GRADS, da_model_zero_grads(&m));
            da_forward(&m, a, tok, tgt, B, T);
            da_backward(&m, a);
            DA_PROF(ex.prof_s, DA_PROF_ADAMW, da_adamw_step(&opt, &m, &ac, 1e-4f));
            if (s >= warmup) times[s - warmup] = da_now_s() - t;
        }
        if (x->prof_s)
            for (int p = 0; p < DA_PROF_N; p++) x->prof_s[p] += prof[p];
        r->n_params = m.n_params;
        r->flops_per_token = da_train_flops_per_token(c, T);
        summarise(times, steps, r->flops_per_token * B * T, B * T, x, r);
    }
    free(tok), free(tgt), free(times);
    da_acts_free(a);
    da_adamw_free(&opt);
    da_model_free(&m);
    return st;
}

da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        const da_exec *x, da_bench_result *r) {
    memset(r, 0, sizeof *r);
    if (steps < 1 || warmup < 0) return da_errorf("--steps must be >= 1 and --warmup-steps >= 0");
    da_status st = da_config_validate(c);
    if (st.code) return st;
    const int diff = c->arch == DA_ARCH_DIFF, diff2 = c->arch == DA_ARCH_DIFF2, H = c->n_heads, C = c->dim;
    const int Ckv = C / (H / c->n_kv_heads);
    const int d = da_head_dim(c), maps = da_arch_maps(c->arch), d2 = diff ? 2 * d : d;
    const int kind = diff ? ATTN_DIFF : diff2 ? ATTN_DIFF2 : ATTN_SOFTMAX;
    attn_shape s = {B, T, H, c->n_kv_heads, d, C, Ckv, omp_get_max_threads(), 0, c->window};
    const size_t n = (size_t)B * T * C, nq = (size_t)B * T * da_q_dim(c), nkv = (size_t)B * T * Ckv;
    const size_t nl = (size_t)B * T * H;
    const int flash = kernel == DA_ATTN_FLASH;
    size_t scr = flash ? flash_scratch_size(&s, kind) : attn_scratch_size(&s);
    size_t att = flash ? (size_t)B * H * maps * T : (size_t)B * H * maps * T * T;
    size_t total = 10 * n + 2 * nq + 6 * nkv + scr + att + 3 * nl + 2 * (size_t)d2;
    float *pool = calloc(total, sizeof(float));
    double *times = malloc((size_t)steps * sizeof(double));
    if (!pool || !times) {
        free(pool), free(times);
        return da_errorf("out of memory (%.1f MB)", (double)total * 4 / 1e6);
    }
    float *p = pool;
    float *q = p; p += nq;
    float *k = p; p += nkv;
    float *v = p; p += nkv;
    float *out = p; p += n;
    float *opre = p; p += n;
    float *o1 = p; p += n;
    float *o2 = p; p += n;
    float *dout = p; p += n;
    float *dopre = p; p += n;
    float *dq = p; p += nq;
    float *lam = p; p += nl;   /* DIFF2: sigmoid(lambda) per row */
    float *dlam = p; p += nl;
    float *dk = p; p += nkv;
    float *dv = p; p += nkv;
    float *rstd = p; p += (size_t)B * T * H;
    float *w = p; p += d2;
    float *dw = p; p += d2;
    float *maps_or_lse = p; p += att;
    float *scratch = p;
    da_rng rng;
    da_rng_seed(&rng, 5);
    for (size_t i = 0; i < nq; i++) q[i] = 0.5f * da_rng_normal(&rng);
    for (size_t i = 0; i < n; i++) dout[i] = da_rng_normal(&rng);
    for (size_t i = 0; i < nl; i++) lam[i] = da_rng_uniform(&rng);
    for (size_t i = 0; i < nkv; i++) k[i] = 0.5f * da_rng_normal(&rng), v[i] = da_rng_normal(&rng);
    for (int i = 0; i < d2; i++) w[i] = 1.0f;
    const da_attn_ops *at = da_attn_ops_of(x->isa);
    float dl;
    for (int it = 0; it < warmup + steps; it++) {
        double t = da_now_s();
        if (flash) {
            at->flash_forward(diff ? opre : out, o1, o2, maps_or_lse, q, k, v, 0.5f, lam, kind, &s, scratch);
            if (diff) {
                at->head_norm_forward(out, rstd, opre, w, 0.8f, B * T * H, d2);
                at->head_norm_backward(dopre, dw, dout, opre, rstd, w, 0.8f, B * T * H, d2);
            }
            at->flash_backward(dq, dk, dv, &dl, diff2 ? dlam : NULL, diff ? dopre : dout, diff ? opre : out, o1, o2,
                               maps_or_lse, q, k, v, 0.5f, lam, kind, &s, scratch);
        } else if (diff) {
            at->diff_forward(out, opre, rstd, maps_or_lse, q, k, v, w, 0.5f, 0.2f, &s, scratch);
            at->diff_backward(dq, dk, dv, dw, &dl, dout, opre, rstd, maps_or_lse, q, k, v, w, 0.5f, 0.2f, &s, scratch);
        } else if (diff2) {
            at->diff2_forward(out, maps_or_lse, q, k, v, lam, &s, scratch);
            at->diff2_backward(dq, dk, dv, dlam, dout, maps_or_lse, q, k, v, lam, &s, scratch);
        } else {
            at->softmax_forward(out, maps_or_lse, q, k, v, &s);
            at->softmax_backward(dq, dk, dv, dout, maps_or_lse, q, k, v, &s, scratch);
        }
        if (it >= warmup) times[it - warmup] = da_now_s() - t;
    }
    r->flops_per_token = da_attn_flops_per_token(c, T);
    summarise(times, steps, r->flops_per_token * B * T, B * T, x, r);
    free(pool);
    free(times);
    return da_ok();
}
