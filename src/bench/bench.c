/* Benchmarks of a training step and of the attention kernel. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "attn/variant.h"
#include "bench/bench.h"
#include "ops/ops.h"
#include "core/profile.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double da_attn_flops_per_token(const da_config *c, int T) {
    return da_attn_variant_of(c->arch)->attn_flops_per_token(c, T);
}

double da_train_flops_per_token(const da_config *c, int T) {
    double C = c->dim, F = c->ffn_hidden, V = c->vocab_size;
    /* the attention's matrices (its input and output projections), SwiGLU */
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = da_attn_tensors(c, t);
    double attn = 0.0;
    for (int j = 0; j < n; j++)
        if (t[j].role != ATTN_PARAM) attn += (double)t[j].rows * t[j].cols;
    double per_layer = 2.0 * (attn + 3.0 * C * F);
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
    da_train_stepper *step = NULL;
    da_acts *a = NULL;
    int *tok = malloc((size_t)B * T * sizeof(int)), *tgt = malloc((size_t)B * T * sizeof(int));
    double *times = malloc((size_t)steps * sizeof(double));
    if (!tok || !tgt || !times) st = da_errorf("out of memory");
    /* the steps are profiled into prof, cleared when the timed ones begin */
    double prof[DA_PROF_N] = {0};
    da_exec ex = *x;
    ex.prof_s = x->prof_s ? prof : NULL;
    /* a constant lr and no clipping: the step is forward, backward and AdamW only */
    da_train_config tc;
    da_train_config_default(&tc);
    tc.lr = tc.min_lr = 1e-4f, tc.warmup = 0, tc.clip = 0;
    if (!st.code) st = da_train_stepper_create(&step, &m, &tc, &ex);
    if (!st.code) st = da_acts_create_ex(&a, c, B, T, kernel, &ex);
    if (!st.code) {
        da_rng rng;
        da_rng_seed(&rng, 3);
        for (int i = 0; i < B * T; i++) {
            tok[i] = (int)(da_rng_next(&rng) % (uint64_t)c->vocab_size);
            tgt[i] = (int)(da_rng_next(&rng) % (uint64_t)c->vocab_size);
        }
        for (int s = 0; s < warmup + steps; s++) {
            if (s == warmup) memset(prof, 0, sizeof prof);
            double t = da_now_s();
            da_train_step(step, a, tok, tgt, B, T);
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
    da_train_stepper_free(step);
    da_model_free(&m);
    return st;
}

da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        const da_exec *x, da_bench_result *r) {
    memset(r, 0, sizeof *r);
    if (steps < 1 || warmup < 0) return da_errorf("--steps must be >= 1 and --warmup-steps >= 0");
    da_status st = da_config_validate(c);
    if (st.code) return st;
    const attn_variant *var = da_attn_variant_of(c->arch);
    attn_tensor spec[ATTN_MAX_TENSORS];
    const int n_t = da_attn_tensors(c, spec), flash = kernel == DA_ATTN_FLASH;
    const attn_shape s = da_attn_shape_of(c, B, T, omp_get_max_threads());
    const size_t BT = (size_t)B * T, n = BT * c->dim;
    /* per tensor: its product and gradient (ATTN_IN), or the parameter and its gradient */
    size_t total = 2 * n + var->train_floats(&s, flash) + da_attn_scratch_floats(var, &s, flash);
    for (int j = 0; j < n_t; j++)
        if (spec[j].role != ATTN_OUT) total += 2 * (spec[j].role == ATTN_IN ? BT * spec[j].rows
                                                                            : (size_t)spec[j].rows * (spec[j].cols ? spec[j].cols : 1));
    float *pool = calloc(total, sizeof(float));
    double *times = malloc((size_t)steps * sizeof(double));
    if (!pool || !times) {
        free(pool), free(times);
        return da_errorf("out of memory (%.1f MB)", (double)total * 4 / 1e6);
    }
    da_rng rng;
    da_rng_seed(&rng, 5);
    float *p = pool, *w[ATTN_MAX_TENSORS] = {0}, *g[ATTN_MAX_TENSORS] = {0}, *proj[ATTN_MAX_TENSORS] = {0},
          *dproj[ATTN_MAX_TENSORS] = {0};
    for (int j = 0; j < n_t; j++) {
        if (spec[j].role == ATTN_OUT) continue;
        const size_t m = spec[j].role == ATTN_IN ? BT * spec[j].rows : (size_t)spec[j].rows * (spec[j].cols ? spec[j].cols : 1);
        float *v = p, *dv = p + m;
        p += 2 * m;
        if (spec[j].role == ATTN_IN) proj[j] = v, dproj[j] = dv;
        else w[j] = v, g[j] = dv;
        /* inputs of the sizes a trained model sees: q, k N(0, 0.25), v N(0, 1), a sigmoid's output U(0, 1) */
        if (spec[j].init == ATTN_INIT_VARIANT) { /* the variant's own start, no draw */
            da_attn_init_tensor(c, &spec[j], v);
            continue;
        }
        for (size_t i = 0; i < m; i++)
            v[i] = spec[j].role == ATTN_PARAM ? (spec[j].init == ATTN_INIT_ONES ? 1.0f : spec[j].std * da_rng_normal(&rng))
                   : spec[j].act == ATTN_ACT_SIGMOID ? da_rng_uniform(&rng)
                   : spec[j].view == ATTN_VIEW_V     ? da_rng_normal(&rng)
                                                     : 0.5f * da_rng_normal(&rng);
    }
    float *out = p; p += n;
    float *dout = p; p += n;
    for (size_t i = 0; i < n; i++) dout[i] = da_rng_normal(&rng);
    float *saved = p; p += var->train_floats(&s, flash);
    float consts[ATTN_LAYER_CONSTS];
    attn_train_ctx ctx = {c, x, 0, flash, s, B, T, w, g, proj, dproj, saved, p, consts, out, dout};
    for (int it = 0; it < warmup + steps; it++) {
        double t = da_now_s();
        var->forward(&ctx);
        var->backward(&ctx);
        if (it >= warmup) times[it - warmup] = da_now_s() - t;
    }
    r->flops_per_token = da_attn_flops_per_token(c, T);
    summarise(times, steps, r->flops_per_token * B * T, B * T, x, r);
    free(pool);
    free(times);
    return da_ok();
}
