/* Finite-difference gradient checks of every op's backward and of the whole
 * model's da_backward.
 *
 * Each op test builds a scalar objective L = sum(out * R) for a fixed random R
 * (so dout = R), summed in double, and compares the analytic backward with
 * central differences. The numeric gradient is the Richardson combination
 * (4 D(h/2) - D(h)) / 3 of central differences D, each divided by the step
 * float actually took; h = 1e-2 for the ops, 2e-2 for the model. The error is
 *     worst |analytic - numeric| / max |numeric|
 * over the whole tensor (over a 20-entry sample of every tensor for the model,
 * with a floor, MODEL_GRAD_FLOOR, explained there). Every gradient a backward
 * produces is checked; a backward documented as "+=" is pre-filled with a
 * known value that is then subtracted, one documented as "overwritten" with
 * garbage.
 *
 * Tolerance 1e-2 (GC_TOL) for every gradient check; 1e-5 (EXACT_TOL) for the
 * identities only float rounding separates (rope transpose and norms, losses
 * against double, accumulation). Worst errors observed with the correct code
 * (Release -O2 -march=native and the ASan/UBSan Debug build alike, OpenBLAS,
 * OMP_NUM_THREADS=2), each printed on every run, one line per test:
 *     matmul dinp, dW, dinp(+=)          1.3e-5, 2.4e-5, 7.3e-6
 *     rmsnorm dx, dw                     3.2e-5, 5.5e-6
 *     rope dx                            1.1e-5
 *     swiglu dh1, dh3                    4.0e-5, 9.2e-6
 *     cross_entropy dlogits              5.4e-5
 *     embedding demb                     6.1e-8
 *     diff_attention dq, dk, dv, dsubln  <= 1.1e-4;  dlambda <= 1.3e-3
 *     softmax_attention dq, dk, dv       <= 9.7e-5
 *     model diff mha / diff gqa h2kv1 /
 *       softmax untied gqa h4kv2 / tied  2.6e-4 / 9.6e-4 / 2.7e-4 / 7.8e-4
 *                                        (worst tensor of each)
 * so at least 10x under the tolerance. Over 30 other seeds of the four model
 * tests the worst tensor reached 5.5e-3 (a lambda vector, near the floor).
 *
 * Each of these mutations of a scratch copy of the library fails the tests
 * in brackets (the model tests catch all but the last four):
 * rmsnorm dw without rstd, dx with mean over C+1 [rmsnorm_grad]; swiglu dh1
 * without (1 + h1(1-sig)), dh3 with sig for silu [swiglu_grad]; cross-entropy
 * without 1/N [cross_entropy_grad]; embedding backward "=" [embedding_grad];
 * matmul dinp ignoring accumulate_dinp [matmul_backward_accumulates_dinp];
 * rope inverse = forward [rope_backward_*]; dsubln without (1 - lambda_init),
 * dlambda sign, dv through A1 + lambda A2, head-norm dot / (2d+1)
 * [diff_attention_grad_*]; softmax backward without the row sum, dK without
 * 1/sqrt(d) [all attention tests]; in transformer.c: lambda_backward q2 sign,
 * k1 grad from k1, ffn_norm backward with rstd1, dxn overwritten by the wk
 * backward, dk rope not inverted [model_grad_*]. Caught by the op tests only:
 * matmul dW "=" [matmul_grad, model_backward_accumulates: the model writes
 * each dW once into zeroed grads] and the DIFF backward taking head h into
 * group h % n_kv [diff_attention_grad_gqa_h4kv2 only: with one KV group, or
 * with MHA, the two maps agree]. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn/attention.h"
#include "diffattn.h"
#include "harness.h"
#include "ops/ops.h"

/* The context the kernels run in: da_exec_default()'s (DIFFATTN_ISA lowers its level). */
static da_exec ex;
static const da_ops *op;
static const da_attn_ops *at;

#define GC_TOL 1e-2    /* finite differences against analytic gradients */
#define EXACT_TOL 1e-5 /* identities that only float rounding separates */

/* ---------------------------------------------------------------- helpers */

static void fill_normal(float *x, size_t n, float mean, float std, da_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = mean + std * da_rng_normal(r);
}

static void fill_const(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static double dot_d(const float *a, const float *b, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static float *xalloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

typedef double (*objective_fn)(void *ctx);

/* Central difference of f in x[i] with step h, dividing by the step float took. */
static double central_diff(float *x, size_t i, double h, objective_fn f, void *ctx) {
    float x0 = x[i];
    float xp = (float)(x0 + h), xm = (float)(x0 - h);
    x[i] = xp;
    double fp = f(ctx);
    x[i] = xm;
    double fm = f(ctx);
    x[i] = x0;
    return (fp - fm) / ((double)xp - (double)xm);
}

/* numeric[i] = dL/dx[i]: central differences at h and h/2 combined by
 * Richardson extrapolation, (4 D(h/2) - D(h)) / 3, which cancels the h^2
 * truncation term. That matters where a gradient is small next to the
 * curvature (dlambda when A1 and A2 nearly cancel: a plain central
 * difference at h = 1e-2 is off by 3%). x is restored afterwards. */
static float richardson_diff(float *x, size_t i, double h, objective_fn f, void *ctx) {
    double d1 = central_diff(x, i, h, f, ctx), d2 = central_diff(x, i, h / 2, f, ctx);
    return (float)((4.0 * d2 - d1) / 3.0);
}

static void fd_grad(float *numeric, float *x, size_t n, double h, objective_fn f, void *ctx) {
    for (size_t i = 0; i < n; i++) numeric[i] = richardson_diff(x, i, h, f, ctx);
}

/* One test's results: the line printed for it, and whether any check failed. */
typedef struct {
    char line[768];
    int fail;
} report;

static void report_start(report *r, const char *name) {
    snprintf(r->line, sizeof r->line, "  %-34s", name);
    r->fail = 0;
}

/* worst |a - b| / max(max|b|, floor) (b numeric); records it in r and
 * prints the worst element when it exceeds tol. */
static double compare_floor(report *r, const char *what, const float *a, const float *b, size_t n, double tol,
                            double floor) {
    size_t wi;
    double maxb, rel = rel_error_at(a, b, n, floor, &wi, &maxb);
    if (!(maxb > 0)) rel = INFINITY; /* an all-zero numeric gradient checks nothing */
    size_t len = strlen(r->line);
    snprintf(r->line + len, sizeof r->line - len, " %s %.1e", what, rel);
    if (!(rel <= tol)) {
        r->fail = 1;
        fprintf(stderr, "  %s: rel error %.3g > %.3g at [%zu]: analytic %.8g numeric %.8g (scale %.4g)\n", what,
                rel, tol, wi, (double)a[wi], (double)b[wi], maxb);
    }
    return rel;
}

static double compare(report *r, const char *what, const float *a, const float *b, size_t n, double tol) {
    return compare_floor(r, what, a, b, n, tol, 0.0);
}

static int report_end(report *r) {
    printf("%s\n", r->line);
    return r->fail;
}

/* ---------------------------------------------------------------- matmul */

typedef struct {
    float *out, *inp, *W, *R;
    int N, Cin, Cout;
} matmul_ctx;

static double matmul_obj(void *p) {
    matmul_ctx *c = p;
    da_matmul_forward(&ex, c->out, c->inp, c->W, c->N, c->Cin, c->Cout, 0);
    return dot_d(c->out, c->R, (size_t)c->N * c->Cout);
}

static void matmul_setup(matmul_ctx *c, da_rng *r) {
    c->N = 6, c->Cin = 5, c->Cout = 7;
    c->inp = xalloc((size_t)c->N * c->Cin);
    c->W = xalloc((size_t)c->Cout * c->Cin);
    c->out = xalloc((size_t)c->N * c->Cout);
    c->R = xalloc((size_t)c->N * c->Cout);
    fill_normal(c->inp, (size_t)c->N * c->Cin, 0, 1, r);
    fill_normal(c->W, (size_t)c->Cout * c->Cin, 0, 1, r);
    fill_normal(c->R, (size_t)c->N * c->Cout, 0, 1, r);
}

static void matmul_free(matmul_ctx *c) {
    free(c->inp), free(c->W), free(c->out), free(c->R);
}

/* dinp (overwritten, accumulate_dinp=0) and dW (+=) against finite differences. */
static int test_matmul_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 101);
    matmul_ctx c;
    matmul_setup(&c, &rng);
    size_t ni = (size_t)c.N * c.Cin, nw = (size_t)c.Cout * c.Cin;
    float *dinp = xalloc(ni), *dW = xalloc(nw), *num_i = xalloc(ni), *num_w = xalloc(nw);
    fill_const(dinp, ni, 99.0f); /* overwritten */
    fill_const(dW, nw, 0.5f);    /* += */
    da_matmul_backward(&ex, dinp, dW, c.R, c.inp, c.W, c.N, c.Cin, c.Cout, 0);
    for (size_t i = 0; i < nw; i++) dW[i] -= 0.5f;
    fd_grad(num_i, c.inp, ni, 1e-2, matmul_obj, &c);
    fd_grad(num_w, c.W, nw, 1e-2, matmul_obj, &c);
    report r;
    report_start(&r, "matmul");
    compare(&r, "dinp", dinp, num_i, ni, GC_TOL);
    compare(&r, "dW(+=)", dW, num_w, nw, GC_TOL);
    free(dinp), free(dW), free(num_i), free(num_w);
    matmul_free(&c);
    return report_end(&r);
}

/* accumulate_dinp=1 adds to dinp; dW=NULL is skipped. */
static int test_matmul_backward_accumulates_dinp(void) {
    da_rng rng;
    da_rng_seed(&rng, 102);
    matmul_ctx c;
    matmul_setup(&c, &rng);
    size_t ni = (size_t)c.N * c.Cin;
    float *dinp = xalloc(ni), *prior = xalloc(ni), *num = xalloc(ni);
    fill_normal(prior, ni, 0, 3, &rng);
    memcpy(dinp, prior, ni * sizeof(float));
    da_matmul_backward(&ex, dinp, NULL, c.R, c.inp, c.W, c.N, c.Cin, c.Cout, 1);
    for (size_t i = 0; i < ni; i++) dinp[i] -= prior[i];
    fd_grad(num, c.inp, ni, 1e-2, matmul_obj, &c);
    report r;
    report_start(&r, "matmul accumulate_dinp");
    compare(&r, "dinp(+=)", dinp, num, ni, GC_TOL);
    free(dinp), free(prior), free(num);
    matmul_free(&c);
    return report_end(&r);
}

/* da_matmul_forward with accumulate=1 adds inp @ W^T to what out held. */
static int test_matmul_forward_accumulates(void) {
    da_rng rng;
    da_rng_seed(&rng, 103);
    matmul_ctx c;
    matmul_setup(&c, &rng);
    size_t no = (size_t)c.N * c.Cout;
    float *prior = xalloc(no), *want = xalloc(no);
    fill_normal(prior, no, 0, 2, &rng);
    for (int n = 0; n < c.N; n++)
        for (int o = 0; o < c.Cout; o++) {
            double s = prior[(size_t)n * c.Cout + o];
            for (int i = 0; i < c.Cin; i++) s += (double)c.inp[(size_t)n * c.Cin + i] * c.W[(size_t)o * c.Cin + i];
            want[(size_t)n * c.Cout + o] = (float)s;
        }
    memcpy(c.out, prior, no * sizeof(float));
    da_matmul_forward(&ex, c.out, c.inp, c.W, c.N, c.Cin, c.Cout, 1);
    report r;
    report_start(&r, "da_matmul_forward accumulate");
    compare(&r, "out(+=)", c.out, want, no, EXACT_TOL);
    free(prior), free(want);
    matmul_free(&c);
    return report_end(&r);
}

/* ---------------------------------------------------------------- rmsnorm */

typedef struct {
    float *out, *rstd, *x, *w, *R;
    int N, C;
    float eps;
} rmsnorm_ctx;

static double rmsnorm_obj(void *p) {
    rmsnorm_ctx *c = p;
    op->rmsnorm_forward(c->out, c->rstd, c->x, c->w, c->N, c->C, c->eps);
    return dot_d(c->out, c->R, (size_t)c->N * c->C);
}

/* dx (+=) and dw (+=). */
static int test_rmsnorm_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 201);
    rmsnorm_ctx c = {.N = 5, .C = 12, .eps = 1e-5f};
    size_t n = (size_t)c.N * c.C;
    c.out = xalloc(n), c.rstd = xalloc(c.N), c.x = xalloc(n), c.w = xalloc(c.C), c.R = xalloc(n);
    fill_normal(c.x, n, 0, 1, &rng);
    fill_normal(c.w, c.C, 1, 0.3f, &rng);
    fill_normal(c.R, n, 0, 1, &rng);
    float *dx = xalloc(n), *dw = xalloc(c.C), *num_x = xalloc(n), *num_w = xalloc(c.C);
    fill_const(dx, n, 0.3f);
    fill_const(dw, c.C, -0.2f);
    rmsnorm_obj(&c);
    op->rmsnorm_backward(dx, dw, c.R, c.x, c.w, c.rstd, c.N, c.C);
    for (size_t i = 0; i < n; i++) dx[i] -= 0.3f;
    for (int i = 0; i < c.C; i++) dw[i] += 0.2f;
    fd_grad(num_x, c.x, n, 1e-2, rmsnorm_obj, &c);
    fd_grad(num_w, c.w, c.C, 1e-2, rmsnorm_obj, &c);
    report r;
    report_start(&r, "rmsnorm");
    compare(&r, "dx(+=)", dx, num_x, n, GC_TOL);
    compare(&r, "dw(+=)", dw, num_w, c.C, GC_TOL);
    free(c.out), free(c.rstd), free(c.x), free(c.w), free(c.R);
    free(dx), free(dw), free(num_x), free(num_w);
    return report_end(&r);
}

/* ---------------------------------------------------------------- rope */

enum { ROPE_B = 2, ROPE_T = 13, ROPE_SUB = 3, ROPE_D = 8 };
#define ROPE_N ((size_t)ROPE_B * ROPE_T * ROPE_SUB * ROPE_D)

typedef struct {
    float cos_tab[ROPE_T * ROPE_D / 2], sin_tab[ROPE_T * ROPE_D / 2];
    float x[ROPE_N], y[ROPE_N], tmp[ROPE_N];
} rope_ctx;

static void rope_setup(rope_ctx *c, uint64_t seed) {
    da_rng rng;
    da_rng_seed(&rng, seed);
    da_rope_tables_theta(c->cos_tab, c->sin_tab, ROPE_T, ROPE_D, 10000.0f);
    fill_normal(c->x, ROPE_N, 0, 1, &rng);
    fill_normal(c->y, ROPE_N, 0, 1, &rng);
}

static double rope_obj(void *p) {
    rope_ctx *c = p;
    memcpy(c->tmp, c->x, sizeof c->tmp);
    op->rope_apply(c->tmp, c->cos_tab, c->sin_tab, ROPE_B, ROPE_T, ROPE_SUB, ROPE_D, 0);
    return dot_d(c->tmp, c->y, ROPE_N);
}

/* The gradient of sum(rope(x) * y) is rope_apply(y, inverse=1). */
static int test_rope_backward_grad(void) {
    static rope_ctx c;
    rope_setup(&c, 301);
    static float analytic[ROPE_N], num[ROPE_N];
    memcpy(analytic, c.y, sizeof analytic);
    op->rope_apply(analytic, c.cos_tab, c.sin_tab, ROPE_B, ROPE_T, ROPE_SUB, ROPE_D, 1);
    fd_grad(num, c.x, ROPE_N, 1e-2, rope_obj, &c);
    report r;
    report_start(&r, "rope");
    compare(&r, "dx", analytic, num, ROPE_N, GC_TOL);
    return report_end(&r);
}

/* <rope(x), y> == <x, rope_inv(y)>. */
static int test_rope_backward_is_transpose(void) {
    static rope_ctx c;
    rope_setup(&c, 302);
    double lhs = rope_obj(&c);
    memcpy(c.tmp, c.y, sizeof c.tmp);
    op->rope_apply(c.tmp, c.cos_tab, c.sin_tab, ROPE_B, ROPE_T, ROPE_SUB, ROPE_D, 1);
    double rhs = dot_d(c.x, c.tmp, ROPE_N);
    double scale = sqrt(dot_d(c.x, c.x, ROPE_N) * dot_d(c.y, c.y, ROPE_N));
    double rel = fabs(lhs - rhs) / scale;
    printf("  %-34s <rope(x),y> vs <x,rope_inv(y)> %.1e\n", "rope transpose", rel);
    if (!(rel <= EXACT_TOL)) {
        fprintf(stderr, "  rope transpose: <rope(x),y>=%.9g <x,rope_inv(y)>=%.9g, rel %.3g > %.3g\n", lhs, rhs, rel,
                EXACT_TOL);
        return 1;
    }
    return 0;
}

/* rope (either direction) keeps the norm of every rotated pair, and so of
 * every sub-head; and it does rotate (not the identity) beyond position 0. */
static int test_rope_preserves_norms(void) {
    static rope_ctx c;
    rope_setup(&c, 303);
    report r;
    report_start(&r, "rope norms");
    for (int inverse = 0; inverse <= 1; inverse++) {
        memcpy(c.tmp, c.x, sizeof c.tmp);
        op->rope_apply(c.tmp, c.cos_tab, c.sin_tab, ROPE_B, ROPE_T, ROPE_SUB, ROPE_D, inverse);
        static float before[ROPE_N / 2], after[ROPE_N / 2];
        double moved = 0.0;
        for (size_t p = 0; p < ROPE_N / 2; p++) {
            before[p] = (float)hypot(c.x[2 * p], c.x[2 * p + 1]);
            after[p] = (float)hypot(c.tmp[2 * p], c.tmp[2 * p + 1]);
            moved = fmax(moved, fabs((double)c.tmp[2 * p] - c.x[2 * p]));
        }
        compare(&r, inverse ? "pair-norm(inv)" : "pair-norm", after, before, ROPE_N / 2, EXACT_TOL);
        if (!(moved > 0.1)) {
            fprintf(stderr, "  rope (inverse=%d) left x unchanged (max move %.3g)\n", inverse, moved);
            r.fail = 1;
        }
    }
    return report_end(&r);
}

/* ---------------------------------------------------------------- swiglu */

typedef struct {
    float *gate, *h1, *h3, *R;
    size_t n;
} swiglu_ctx;

static double swiglu_obj(void *p) {
    swiglu_ctx *c = p;
    op->swiglu_forward(c->gate, c->h1, c->h3, c->n);
    return dot_d(c->gate, c->R, c->n);
}

/* dh1, dh3 (both overwritten). */
static int test_swiglu_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 401);
    swiglu_ctx c = {.n = 53}; /* whole 16-lane vectors and a scalar tail */
    c.gate = xalloc(c.n), c.h1 = xalloc(c.n), c.h3 = xalloc(c.n), c.R = xalloc(c.n);
    fill_normal(c.h1, c.n, 0, 2.5f, &rng); /* into both tails of the sigmoid */
    fill_normal(c.h3, c.n, 0, 1, &rng);
    fill_normal(c.R, c.n, 0, 1, &rng);
    float *dh1 = xalloc(c.n), *dh3 = xalloc(c.n), *n1 = xalloc(c.n), *n3 = xalloc(c.n);
    fill_const(dh1, c.n, 77.0f);
    fill_const(dh3, c.n, -77.0f);
    op->swiglu_backward(dh1, dh3, c.R, c.h1, c.h3, c.n);
    fd_grad(n1, c.h1, c.n, 1e-2, swiglu_obj, &c);
    fd_grad(n3, c.h3, c.n, 1e-2, swiglu_obj, &c);
    report r;
    report_start(&r, "swiglu");
    compare(&r, "dh1", dh1, n1, c.n, GC_TOL);
    compare(&r, "dh3", dh3, n3, c.n, GC_TOL);
    free(c.gate), free(c.h1), free(c.h3), free(c.R), free(dh1), free(dh3), free(n1), free(n3);
    return report_end(&r);
}

/* ---------------------------------------------------------------- polynorm */

typedef struct {
    float *gate, *h1, *h3, *w, *b, *R;
    int N, F;
} polynorm_ctx;

static double polynorm_obj(void *p) {
    polynorm_ctx *c = p;
    da_polynorm_forward(c->gate, c->h1, c->h3, c->w, c->b, c->N, c->F);
    return dot_d(c->gate, c->R, (size_t)c->N * c->F);
}

/* dh1, dh3 overwritten; dw, db accumulated (they start at 77 and -77 and must end there plus the gradient). */
static int test_polynorm_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 451);
    polynorm_ctx c = {.N = 3, .F = 11};
    const size_t n = (size_t)c.N * c.F;
    c.gate = xalloc(n), c.h1 = xalloc(n), c.h3 = xalloc(n), c.R = xalloc(n), c.w = xalloc(3), c.b = xalloc(1);
    fill_normal(c.h1, n, 0.3f, 1.5f, &rng); /* off zero, so u^2's row mean is not all of its norm */
    fill_normal(c.h3, n, 0, 1, &rng);
    fill_normal(c.R, n, 0, 1, &rng);
    fill_normal(c.w, 3, 0.3f, 0.5f, &rng);
    c.b[0] = 0.4f;
    float *dh1 = xalloc(n), *dh3 = xalloc(n), *n1 = xalloc(n), *n3 = xalloc(n), dw[3], db[1], nw[3], nb[1];
    fill_const(dh1, n, 77.0f);
    fill_const(dh3, n, -77.0f);
    fill_const(dw, 3, 77.0f);
    db[0] = -77.0f;
    da_polynorm_backward(dh1, dh3, dw, db, c.R, c.h1, c.h3, c.w, c.b, c.N, c.F);
    for (int i = 0; i < 3; i++) dw[i] -= 77.0f;
    db[0] += 77.0f;
    fd_grad(n1, c.h1, n, 1e-3, polynorm_obj, &c);
    fd_grad(n3, c.h3, n, 1e-3, polynorm_obj, &c);
    fd_grad(nw, c.w, 3, 1e-3, polynorm_obj, &c);
    fd_grad(nb, c.b, 1, 1e-3, polynorm_obj, &c);
    report r;
    report_start(&r, "polynorm");
    compare(&r, "dh1", dh1, n1, n, GC_TOL);
    compare(&r, "dh3", dh3, n3, n, GC_TOL);
    compare(&r, "dw (+=)", dw, nw, 3, GC_TOL);
    compare(&r, "db (+=)", db, nb, 1, GC_TOL);
    free(c.gate), free(c.h1), free(c.h3), free(c.R), free(c.w), free(c.b), free(dh1), free(dh3), free(n1), free(n3);
    return report_end(&r);
}

/* gate may be h1: the in-place forward (the engine's) equals the out-of-place one. */
static int test_polynorm_in_place(void) {
    da_rng rng;
    da_rng_seed(&rng, 452);
    const int N = 2, F = 9;
    float h1[18], h3[18], gate[18], w[3] = {0.2f, -0.4f, 0.7f}, b[1] = {0.1f};
    fill_normal(h1, 18, 0, 1, &rng);
    fill_normal(h3, 18, 0, 1, &rng);
    da_polynorm_forward(gate, h1, h3, w, b, N, F);
    da_polynorm_forward(h1, h1, h3, w, b, N, F);
    report r;
    report_start(&r, "polynorm in place");
    compare(&r, "gate", h1, gate, 18, EXACT_TOL);
    return report_end(&r);
}

/* ---------------------------------------------------------------- cross-entropy */

enum { CE_N = 6, CE_V = 9 };
static const int ce_targets[CE_N] = {3, 0, 8, 3, 5, 1};

typedef struct {
    float logits[CE_N * CE_V], losses[CE_N];
} ce_ctx;

static double ce_obj(void *p) {
    ce_ctx *c = p;
    op->cross_entropy_forward(c->losses, c->logits, ce_targets, CE_N, CE_V);
    double s = 0.0;
    for (int n = 0; n < CE_N; n++) s += c->losses[n];
    return s / CE_N;
}

/* losses and their mean against logsumexp computed in double. */
static int test_cross_entropy_losses(void) {
    da_rng rng;
    da_rng_seed(&rng, 501);
    ce_ctx c;
    fill_normal(c.logits, CE_N * CE_V, 0, 3, &rng);
    c.logits[2 * CE_V + 4] = 40.0f; /* a large logit: needs the max shift */
    float mean = op->cross_entropy_forward(c.losses, c.logits, ce_targets, CE_N, CE_V);
    float want[CE_N];
    double total = 0.0;
    for (int n = 0; n < CE_N; n++) {
        const float *z = c.logits + n * CE_V;
        double s = 0.0;
        for (int i = 0; i < CE_V; i++) s += exp((double)z[i]);
        want[n] = (float)(log(s) - z[ce_targets[n]]);
        total += want[n];
    }
    float want_mean = (float)(total / CE_N);
    report r;
    report_start(&r, "cross_entropy losses");
    compare(&r, "losses", c.losses, want, CE_N, EXACT_TOL);
    compare(&r, "mean", &mean, &want_mean, 1, EXACT_TOL);
    return report_end(&r);
}

/* dlogits = d(mean loss)/d logits, written in place over the logits. */
static int test_cross_entropy_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 502);
    ce_ctx c;
    fill_normal(c.logits, CE_N * CE_V, 0, 2, &rng);
    float analytic[CE_N * CE_V], num[CE_N * CE_V];
    memcpy(analytic, c.logits, sizeof analytic);
    op->cross_entropy_backward(analytic, ce_targets, CE_N, CE_V);
    fd_grad(num, c.logits, CE_N * CE_V, 1e-2, ce_obj, &c);
    report r;
    report_start(&r, "cross_entropy");
    compare(&r, "dlogits", analytic, num, CE_N * CE_V, GC_TOL);
    return report_end(&r);
}

/* The loss mask: targets of -1 add no loss, the mean is over the counted
 * positions, and the gradient against finite differences of that mean is
 * exactly zero on the masked rows. */
static const int ce_masked_targets[CE_N] = {-1, 0, -1, 3, 5, -1};

static double ce_masked_obj(void *p) {
    ce_ctx *c = p;
    return op->cross_entropy_forward(c->losses, c->logits, ce_masked_targets, CE_N, CE_V);
}

static int test_cross_entropy_masked(void) {
    da_rng rng;
    da_rng_seed(&rng, 503);
    ce_ctx c;
    fill_normal(c.logits, CE_N * CE_V, 0, 2, &rng);
    const float mean = op->cross_entropy_forward(c.losses, c.logits, ce_masked_targets, CE_N, CE_V);
    double total = 0;
    for (int n = 0; n < CE_N; n++) {
        if (ce_masked_targets[n] < 0) continue;
        const float *z = c.logits + n * CE_V;
        double s = 0.0;
        for (int i = 0; i < CE_V; i++) s += exp((double)z[i]);
        total += log(s) - z[ce_masked_targets[n]];
    }
    float want_mean = (float)(total / 3); /* three counted positions */
    float analytic[CE_N * CE_V], num[CE_N * CE_V];
    memcpy(analytic, c.logits, sizeof analytic);
    op->cross_entropy_backward(analytic, ce_masked_targets, CE_N, CE_V);
    fd_grad(num, c.logits, CE_N * CE_V, 1e-2, ce_masked_obj, &c);
    report r;
    report_start(&r, "cross_entropy masked");
    compare(&r, "mean over counted", &mean, &want_mean, 1, EXACT_TOL);
    compare(&r, "dlogits", analytic, num, CE_N * CE_V, GC_TOL);
    for (int n = 0; n < CE_N; n++)
        for (int i = 0; i < CE_V && ce_masked_targets[n] < 0; i++)
            if (analytic[n * CE_V + i] != 0.0f) {
                fprintf(stderr, "  masked row %d has gradient %g at %d\n", n, analytic[n * CE_V + i], i);
                return 1;
            }
    return report_end(&r);
}

/* Every position masked: loss 0 and a zero gradient, not a division by zero. */
static int test_cross_entropy_all_masked(void) {
    const int t[3] = {-1, -1, -1};
    float logits[3 * 4] = {1, 2, 3, 4, 0, 0, 0, 0, -1, 5, 2, 0}, losses[3];
    CHECK(op->cross_entropy_forward(losses, logits, t, 3, 4) == 0.0f);
    op->cross_entropy_backward(logits, t, 3, 4);
    for (int i = 0; i < 12; i++) CHECK(logits[i] == 0.0f);
    return 0;
}

/* ---------------------------------------------------------------- embedding */

enum { EMB_V = 7, EMB_C = 5, EMB_N = 12 };
/* repeated tokens (3 four times), and 4, 5 never used */
static const int emb_tokens[EMB_N] = {3, 1, 3, 3, 0, 6, 1, 3, 2, 2, 6, 0};

typedef struct {
    float emb[EMB_V * EMB_C], out[EMB_N * EMB_C], R[EMB_N * EMB_C];
} emb_ctx;

static double emb_obj(void *p) {
    emb_ctx *c = p;
    op->embedding_forward(c->out, emb_tokens, c->emb, EMB_N, EMB_C);
    return dot_d(c->out, c->R, EMB_N * EMB_C);
}

/* demb (+=): a scatter-add over repeated tokens; unused rows stay as they were. */
static int test_embedding_grad(void) {
    da_rng rng;
    da_rng_seed(&rng, 601);
    emb_ctx c;
    fill_normal(c.emb, EMB_V * EMB_C, 0, 1, &rng);
    fill_normal(c.R, EMB_N * EMB_C, 0, 1, &rng);
    float demb[EMB_V * EMB_C], num[EMB_V * EMB_C];
    fill_const(demb, EMB_V * EMB_C, 0.125f);
    op->embedding_backward(demb, c.R, emb_tokens, EMB_N, EMB_C);
    for (int i = 0; i < EMB_V * EMB_C; i++) demb[i] -= 0.125f;
    fd_grad(num, c.emb, EMB_V * EMB_C, 1e-2, emb_obj, &c);
    report r;
    report_start(&r, "embedding");
    compare(&r, "demb(+=)", demb, num, EMB_V * EMB_C, GC_TOL);
    for (int i = 4 * EMB_C; i < 6 * EMB_C; i++) /* rows 4, 5: exactly untouched */
        if (demb[i] != 0.0f) {
            fprintf(stderr, "  embedding: unused token row %d changed by %g\n", i / EMB_C, (double)demb[i]);
            r.fail = 1;
        }
    return report_end(&r);
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    int diff;
    attn_shape s;
    float *q, *k, *v, *subln_w, *R;
    float lambda, lambda_init;
    float *out, *opre, *sub_rstd, *att, *scratch;
    size_t nq, nkv, nout, d2;
} attn_ctx;

static void attn_setup(attn_ctx *c, int diff, int B, int T, int H, int KV, int d, uint64_t seed) {
    memset(c, 0, sizeof *c);
    da_rng rng;
    da_rng_seed(&rng, seed);
    int per_head = diff ? 2 * d : d;
    c->diff = diff;
    /* two threads, whatever OMP_NUM_THREADS says, so the per-thread scratch
     * and the per-(batch, group) split are exercised */
    c->s = (attn_shape){.B = B, .T = T, .n_heads = H, .n_kv_heads = KV, .d = d, .C = H * per_head,
                        .Ckv = KV * per_head, .n_threads = 2};
    c->nq = (size_t)B * T * c->s.C;
    c->nkv = (size_t)B * T * c->s.Ckv;
    c->nout = c->nq;
    c->d2 = (size_t)2 * d;
    c->q = xalloc(c->nq), c->k = xalloc(c->nkv), c->v = xalloc(c->nkv), c->R = xalloc(c->nout);
    c->subln_w = xalloc(c->d2);
    c->out = xalloc(c->nout), c->opre = xalloc(c->nout), c->sub_rstd = xalloc((size_t)B * T * H);
    c->att = xalloc((size_t)B * H * (diff ? 2 : 1) * T * T);
    c->scratch = xalloc(da_attn_scratch_size(&c->s));
    fill_normal(c->q, c->nq, 0, 1, &rng);
    fill_normal(c->k, c->nkv, 0, 1, &rng);
    fill_normal(c->v, c->nkv, 0, 1, &rng);
    fill_normal(c->R, c->nout, 0, 1, &rng);
    fill_normal(c->subln_w, c->d2, 1, 0.3f, &rng);
    c->lambda = 0.6f;
    c->lambda_init = 0.35f;
}

static void attn_free(attn_ctx *c) {
    free(c->q), free(c->k), free(c->v), free(c->R), free(c->subln_w);
    free(c->out), free(c->opre), free(c->sub_rstd), free(c->att), free(c->scratch);
}

static double attn_obj(void *p) {
    attn_ctx *c = p;
    if (c->diff)
        at->diff_forward(c->out, c->opre, c->sub_rstd, c->att, c->q, c->k, c->v, c->subln_w, c->lambda,
                               c->lambda_init, &c->s, c->scratch);
    else
        at->softmax_forward(c->out, c->att, c->q, c->k, c->v, &c->s);
    return dot_d(c->out, c->R, c->nout);
}

/* The maps should not be near-uniform, or a dq/dk bug could hide: returns
 * the largest attention weight in rows 3.. (a uniform row t holds 1/(t+1)). */
static float attn_peak(const attn_ctx *c) {
    int T = c->s.T;
    size_t maps = (size_t)c->s.B * c->s.n_heads * (c->diff ? 2 : 1);
    float mx = 0.0f;
    for (size_t m = 0; m < maps; m++)
        for (int t = 3; t < T; t++)
            for (int j = 0; j <= t; j++) {
                float a = c->att[m * T * T + (size_t)t * T + j];
                if (a > mx) mx = a;
            }
    return mx;
}

/* dq, dk, dv (overwritten), dsubln (+=), dlambda (overwritten). */
static int check_diff_attention(const char *name, int B, int T, int H, int KV, int d, uint64_t seed) {
    attn_ctx c;
    attn_setup(&c, 1, B, T, H, KV, d, seed);
    float *dq = xalloc(c.nq), *dk = xalloc(c.nkv), *dv = xalloc(c.nkv), *dsub = xalloc(c.d2);
    float *nq = xalloc(c.nq), *nk = xalloc(c.nkv), *nv = xalloc(c.nkv), *nsub = xalloc(c.d2);
    fill_const(dq, c.nq, 5.0f);
    fill_const(dk, c.nkv, -5.0f);
    fill_const(dv, c.nkv, 5.0f);
    fill_const(dsub, c.d2, 0.75f);
    float dlambda = 123.0f, nlambda;
    attn_obj(&c);
    float peak = attn_peak(&c);
    at->diff_backward(dq, dk, dv, dsub, &dlambda, c.R, c.opre, c.sub_rstd, c.att, c.q, c.k, c.v, c.subln_w,
                            c.lambda, c.lambda_init, &c.s, c.scratch);
    for (size_t i = 0; i < c.d2; i++) dsub[i] -= 0.75f;
    fd_grad(nq, c.q, c.nq, 1e-2, attn_obj, &c);
    fd_grad(nk, c.k, c.nkv, 1e-2, attn_obj, &c);
    fd_grad(nv, c.v, c.nkv, 1e-2, attn_obj, &c);
    fd_grad(nsub, c.subln_w, c.d2, 1e-2, attn_obj, &c);
    fd_grad(&nlambda, &c.lambda, 1, 1e-2, attn_obj, &c);
    report r;
    report_start(&r, name);
    compare(&r, "dq", dq, nq, c.nq, GC_TOL);
    compare(&r, "dk", dk, nk, c.nkv, GC_TOL);
    compare(&r, "dv", dv, nv, c.nkv, GC_TOL);
    compare(&r, "dsubln(+=)", dsub, nsub, c.d2, GC_TOL);
    compare(&r, "dlambda", &dlambda, &nlambda, 1, GC_TOL);
    if (!(peak > 0.5f)) {
        fprintf(stderr, "  %s: attention maps too uniform (peak %.3f); the check would be weak\n", name, (double)peak);
        r.fail = 1;
    }
    free(dq), free(dk), free(dv), free(dsub), free(nq), free(nk), free(nv), free(nsub);
    attn_free(&c);
    return report_end(&r);
}

/* dq, dk, dv (all overwritten). */
static int check_softmax_attention(const char *name, int B, int T, int H, int KV, int d, uint64_t seed) {
    attn_ctx c;
    attn_setup(&c, 0, B, T, H, KV, d, seed);
    float *dq = xalloc(c.nq), *dk = xalloc(c.nkv), *dv = xalloc(c.nkv);
    float *nq = xalloc(c.nq), *nk = xalloc(c.nkv), *nv = xalloc(c.nkv);
    fill_const(dq, c.nq, 5.0f);
    fill_const(dk, c.nkv, -5.0f);
    fill_const(dv, c.nkv, 5.0f);
    attn_obj(&c);
    float peak = attn_peak(&c);
    at->softmax_backward(dq, dk, dv, c.R, c.att, c.q, c.k, c.v, &c.s, c.scratch);
    fd_grad(nq, c.q, c.nq, 1e-2, attn_obj, &c);
    fd_grad(nk, c.k, c.nkv, 1e-2, attn_obj, &c);
    fd_grad(nv, c.v, c.nkv, 1e-2, attn_obj, &c);
    report r;
    report_start(&r, name);
    compare(&r, "dq", dq, nq, c.nq, GC_TOL);
    compare(&r, "dk", dk, nk, c.nkv, GC_TOL);
    compare(&r, "dv", dv, nv, c.nkv, GC_TOL);
    if (!(peak > 0.5f)) {
        fprintf(stderr, "  %s: attention maps too uniform (peak %.3f); the check would be weak\n", name, (double)peak);
        r.fail = 1;
    }
    free(dq), free(dk), free(dv), free(nq), free(nk), free(nv);
    attn_free(&c);
    return report_end(&r);
}

/*                                                      B  T  H KV d */
static int test_diff_attention_grad_mha(void) { return check_diff_attention("diff_attention mha", 2, 9, 2, 2, 4, 701); }
static int test_diff_attention_grad_gqa(void) { return check_diff_attention("diff_attention gqa h2kv1", 2, 11, 2, 1, 8, 702); }
/* two KV groups, so a wrong head -> group map (h % n_kv instead of h / n_rep) shows */
static int test_diff_attention_grad_gqa_h4kv2(void) {
    return check_diff_attention("diff_attention gqa h4kv2", 2, 7, 4, 2, 4, 703);
}
static int test_softmax_attention_grad_mha(void) {
    return check_softmax_attention("softmax_attention mha", 2, 9, 2, 2, 8, 801);
}
static int test_softmax_attention_grad_gqa(void) {
    return check_softmax_attention("softmax_attention gqa h2kv1", 2, 11, 2, 1, 8, 802);
}
static int test_softmax_attention_grad_gqa_h4kv2(void) {
    return check_softmax_attention("softmax_attention gqa h4kv2", 2, 7, 4, 2, 4, 803);
}

/* DIFF2's reference kernel: q (B, T, 2C) of 2H query heads, one K and a
 * d-wide V per group, lam (B, T, H) per row. */
typedef struct {
    attn_shape s;
    float *q, *k, *v, *lam, *R, *out, *att, *scratch;
    size_t nq, nkv, nout, nlam;
} diff2_ctx;

static double diff2_obj(void *p) {
    diff2_ctx *c = p;
    at->diff2_forward(c->out, c->att, c->q, c->k, c->v, c->lam, &c->s, c->scratch);
    return dot_d(c->out, c->R, c->nout);
}

/* dq, dk, dv, dlam (all overwritten). */
static int check_diff2_attention(const char *name, int B, int T, int H, int KV, int d, uint64_t seed) {
    diff2_ctx c;
    da_rng rng;
    da_rng_seed(&rng, seed);
    c.s = (attn_shape){.B = B, .T = T, .n_heads = H, .n_kv_heads = KV, .d = d, .C = H * d, .Ckv = KV * d,
                       .n_threads = 2};
    c.nq = (size_t)B * T * 2 * H * d, c.nkv = (size_t)B * T * KV * d, c.nout = (size_t)B * T * H * d;
    c.nlam = (size_t)B * T * H;
    c.q = xalloc(c.nq), c.k = xalloc(c.nkv), c.v = xalloc(c.nkv), c.lam = xalloc(c.nlam), c.R = xalloc(c.nout);
    c.out = xalloc(c.nout), c.att = xalloc((size_t)B * H * 2 * T * T), c.scratch = xalloc(da_attn_scratch_size(&c.s));
    fill_normal(c.q, c.nq, 0, 1, &rng);
    fill_normal(c.k, c.nkv, 0, 1, &rng);
    fill_normal(c.v, c.nkv, 0, 1, &rng);
    fill_normal(c.R, c.nout, 0, 1, &rng);
    for (size_t i = 0; i < c.nlam; i++) c.lam[i] = 0.1f + 0.8f * da_rng_uniform(&rng); /* per row, in (0, 1) */
    float *dq = xalloc(c.nq), *dk = xalloc(c.nkv), *dv = xalloc(c.nkv), *dlam = xalloc(c.nlam);
    float *nq = xalloc(c.nq), *nk = xalloc(c.nkv), *nv = xalloc(c.nkv), *nlam = xalloc(c.nlam);
    fill_const(dq, c.nq, 5.0f);
    fill_const(dk, c.nkv, -5.0f);
    fill_const(dv, c.nkv, 5.0f);
    fill_const(dlam, c.nlam, 7.0f);
    diff2_obj(&c);
    float peak = 0.0f; /* largest weight in rows 3.. of any map: the maps are not near uniform */
    for (size_t m = 0; m < (size_t)B * H * 2; m++)
        for (int t = 3; t < T; t++)
            for (int j = 0; j <= t; j++) peak = fmaxf(peak, c.att[m * T * T + (size_t)t * T + j]);
    at->diff2_backward(dq, dk, dv, dlam, c.R, c.att, c.q, c.k, c.v, c.lam, &c.s, c.scratch);
    fd_grad(nq, c.q, c.nq, 1e-2, diff2_obj, &c);
    fd_grad(nk, c.k, c.nkv, 1e-2, diff2_obj, &c);
    fd_grad(nv, c.v, c.nkv, 1e-2, diff2_obj, &c);
    fd_grad(nlam, c.lam, c.nlam, 1e-2, diff2_obj, &c);
    report r;
    report_start(&r, name);
    compare(&r, "dq", dq, nq, c.nq, GC_TOL);
    compare(&r, "dk", dk, nk, c.nkv, GC_TOL);
    compare(&r, "dv", dv, nv, c.nkv, GC_TOL);
    compare(&r, "dlam", dlam, nlam, c.nlam, GC_TOL);
    if (!(peak > 0.5f)) {
        fprintf(stderr, "  %s: attention maps too uniform (peak %.3f); the check would be weak\n", name, (double)peak);
        r.fail = 1;
    }
    free(dq), free(dk), free(dv), free(dlam), free(nq), free(nk), free(nv), free(nlam);
    free(c.q), free(c.k), free(c.v), free(c.lam), free(c.R), free(c.out), free(c.att), free(c.scratch);
    return report_end(&r);
}

/*                                                        B  T  H KV d */
static int test_diff2_attention_grad_mha(void) { return check_diff2_attention("diff2_attention mha", 2, 9, 2, 2, 8, 711); }
static int test_diff2_attention_grad_gqa_rep2(void) {
    return check_diff2_attention("diff2_attention gqa h4kv2", 2, 7, 4, 2, 4, 712);
}
static int test_diff2_attention_grad_gqa_rep4(void) {
    return check_diff2_attention("diff2_attention gqa h4kv1", 1, 11, 4, 1, 8, 713);
}

/* ---------------------------------------------------------------- whole model */

enum { MODEL_B = 2, MODEL_T = 8, MODEL_SAMPLES = 20 };
/* Richardson steps 2e-2 and 1e-2. The forward is float, so the loss carries
 * rounding noise of ~1e-7, which puts a noise floor of ~2e-6 (h = 2e-2) to
 * ~1e-5 (h = 2e-3) under every numeric gradient; a smaller step only raises it. */
#define MODEL_H 2e-2
/* Gradients of the mean loss below this are compared against it rather than
 * against their own size: only the lambda vectors come near it (their
 * gradients run 2e-4..1e-2, through the head norm's scale invariance), and
 * there the noise floor above alone would be ~1%. A wrong sign or a 10%
 * factor on a 2e-4 gradient still fails. */
#define MODEL_GRAD_FLOOR 1e-3
/* Every tensor's sampled gradient must reach this, so none is checked
 * vacuously (a tensor the backward forgot reads 0 against a real numeric). */
#define MODEL_MIN_SCALE 1e-4

/* Mean cross-entropy of the last forward, in double, from its logits. */
static double model_loss(da_model *m, da_acts *a, const int *tokens, const int *targets) {
    da_forward(m, a, tokens, targets, MODEL_B, MODEL_T);
    const float *logits = da_acts_logits(a);
    const int V = m->cfg.vocab_size, N = MODEL_B * MODEL_T;
    double total = 0.0;
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        double mx = z[0], s = 0.0;
        for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        for (int i = 0; i < V; i++) s += exp((double)z[i] - mx);
        total += log(s) + mx - z[targets[n]];
    }
    return total / N;
}

typedef struct {
    da_model *m;
    da_acts *a;
    const int *tokens, *targets;
} model_ctx;

static double model_obj(void *p) {
    model_ctx *c = p;
    return model_loss(c->m, c->a, c->tokens, c->targets);
}

/* da_model_init, then every parameter moved well off its initial value so
 * that no gradient is trivially zero and every one stands above the float
 * noise: at init scale (matrices 0.02, +-0.05) the attention maps are near
 * uniform, the SwiGLU gate is ~0 and the FFN and lambda gradients sink to
 * ~1e-5, into the noise. Here: matrices and norms += N(0, 0.15^2) (q.k/sqrt(d)
 * then has std ~1), embeddings += N(0, 0.5^2), lambda vectors = N(0, 0.3^2). */
static void model_perturb(da_model *m, da_rng *rng) {
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        if (strstr(t->name, "lambda_")) {
            fill_normal(p, t->numel, 0, 0.3f, rng);
            continue;
        }
        float std = strstr(t->name, "tok_embeddings") ? 0.5f : 0.15f;
        for (size_t k = 0; k < t->numel; k++) p[k] += std * da_rng_normal(rng);
    }
}

static da_config model_config(da_arch arch, int n_heads, int n_kv_heads, int tie) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 16;
    c.n_layers = 2;
    c.n_heads = n_heads;
    c.n_kv_heads = n_kv_heads;
    c.vocab_size = 20;
    c.ffn_hidden = 32;
    c.max_seq_len = 16;
    c.tie_embeddings = tie;
    return c;
}

/* A model, its acts and a batch, ready for da_forward; 0 on success. */
static int model_setup_kernel(const char *name, da_model *m, da_acts **a, const da_config *cfg, uint64_t seed,
                              int *tokens, int *targets, da_attn_kernel kernel) {
    *a = NULL;
    da_status st = da_model_create(m, cfg);
    if (st.code) { fprintf(stderr, "  %s: %s\n", name, st.msg); return 1; }
    st = da_model_alloc_grads(m);
    if (!st.code) st = da_acts_create_ex(a, cfg, MODEL_B, MODEL_T, kernel, NULL);
    if (st.code) { fprintf(stderr, "  %s: %s\n", name, st.msg); da_model_free(m); return 1; }
    da_rng rng;
    da_rng_seed(&rng, seed);
    da_model_init(m, seed);
    model_perturb(m, &rng);
    for (int i = 0; i < MODEL_B * MODEL_T; i++) {
        tokens[i] = (int)(da_rng_next(&rng) % (uint64_t)cfg->vocab_size);
        targets[i] = (int)(da_rng_next(&rng) % (uint64_t)cfg->vocab_size);
    }
    tokens[3] = tokens[9] = tokens[14]; /* a token repeated, in both rows */
    return 0;
}

static int model_setup(const char *name, da_model *m, da_acts **a, const da_config *cfg, uint64_t seed,
                       int *tokens, int *targets) {
    return model_setup_kernel(name, m, a, cfg, seed, tokens, targets, DA_ATTN_FLASH);
}

/* ~20 random entries of every tensor: da_backward's gradient of the mean
 * loss against central differences of the loss. */
static int check_model_kernel(const char *name, da_config cfg, uint64_t seed, da_attn_kernel kernel) {
    da_model m;
    da_acts *a;
    int tokens[MODEL_B * MODEL_T], targets[MODEL_B * MODEL_T];
    if (model_setup_kernel(name, &m, &a, &cfg, seed, tokens, targets, kernel)) return 1;
    da_rng rng;
    da_rng_seed(&rng, seed ^ 0x5eed);

    da_model_zero_grads(&m);
    float loss = da_forward(&m, a, tokens, targets, MODEL_B, MODEL_T);
    double loss_d = model_loss(&m, a, tokens, targets);
    da_backward(&m, a);

    model_ctx mc = {&m, a, tokens, targets};
    report r;
    report_start(&r, name);
    if (!(fabs(loss - loss_d) <= 1e-5 * loss_d)) {
        fprintf(stderr, "  %s: da_forward loss %.8g, from its logits %.8g\n", name, (double)loss, loss_d);
        r.fail = 1;
    }
    double worst = 0.0, min_scale = INFINITY;
    const char *worst_name = "", *min_name = "";
    for (int ti = 0; ti < m.n_tensors; ti++) {
        const da_tensor *t = &m.tensors[ti];
        int ns = t->numel < MODEL_SAMPLES ? (int)t->numel : MODEL_SAMPLES;
        size_t idx[MODEL_SAMPLES];
        for (int s = 0; s < ns; s++) { /* distinct entries; all of a small tensor */
            int dup;
            do {
                idx[s] = ns == (int)t->numel ? (size_t)s : (size_t)(da_rng_next(&rng) % t->numel);
                dup = 0;
                for (int u = 0; u < s; u++) dup |= idx[u] == idx[s];
            } while (dup);
        }
        float analytic[MODEL_SAMPLES], numeric[MODEL_SAMPLES];
        double scale = 0.0;
        for (int s = 0; s < ns; s++) {
            numeric[s] = richardson_diff(m.params, t->offset + idx[s], MODEL_H, model_obj, &mc);
            analytic[s] = m.grads[t->offset + idx[s]];
            scale = fmax(scale, fabs(numeric[s]));
        }
        report tr; /* per-tensor detail goes to stderr, on failure only */
        report_start(&tr, "");
        char what[160];
        snprintf(what, sizeof what, "%s %s", name, t->name);
        /* NSA's cmp_pe_k moves every compressed logit of a query by one constant (docs/model.md):
         * its gradient is exactly zero, and must stay so; the float noise of its numeric one is not compared */
        const int zero_by_design = strstr(t->name, "cmp_pe_k") != NULL;
        double rel = zero_by_design ? 0.0 : compare_floor(&tr, what, analytic, numeric, (size_t)ns, GC_TOL, MODEL_GRAD_FLOOR);
        if (tr.fail) r.fail = 1;
        if (!(rel <= worst)) { worst = rel; worst_name = t->name; }

        if (zero_by_design) {
            for (int s = 0; s < ns; s++)
                if (!(fabsf(analytic[s]) <= 1e-6f && fabsf(numeric[s]) <= MODEL_MIN_SCALE)) {
                    fprintf(stderr, "  %s: %s[%zu] gradient %.3g (numeric %.3g), expected 0\n", name, t->name,
                            idx[s], (double)analytic[s], (double)numeric[s]);
                    r.fail = 1;
                }
        } else if (!(scale >= MODEL_MIN_SCALE)) {
            fprintf(stderr, "  %s: numeric gradient of %s at most %.3g < %.3g: too small to check\n", name,
                    t->name, scale, MODEL_MIN_SCALE);
            r.fail = 1;
        }
        if (scale < min_scale && !zero_by_design) { min_scale = scale; min_name = t->name; }
    }
    size_t len = strlen(r.line);
    snprintf(r.line + len, sizeof r.line - len, " worst of %d tensors %.1e (%s); smallest grad %.1e (%s)",
             m.n_tensors, worst, worst_name, min_scale, min_name);
    da_acts_free(a);
    da_model_free(&m);
    return report_end(&r);
}

static int check_model(const char *name, da_config cfg, uint64_t seed) {
    return check_model_kernel(name, cfg, seed, DA_ATTN_FLASH);
}

static int test_model_grad_diff_mha(void) {
    return check_model("model diff mha", model_config(DA_ARCH_DIFF, 2, 2, 0), 901);
}
static int test_model_grad_diff_gqa(void) {
    return check_model("model diff gqa h2kv1", model_config(DA_ARCH_DIFF, 2, 1, 0), 902);
}
static int test_model_grad_softmax_untied(void) {
    return check_model("model softmax untied gqa h4kv2", model_config(DA_ARCH_SOFTMAX, 4, 2, 0), 903);
}
static int test_model_grad_softmax_tied(void) {
    return check_model("model softmax tied mha", model_config(DA_ARCH_SOFTMAX, 2, 2, 1), 904);
}

/* DIFF2: 4 output heads of d = 4 (8 query heads); lambda_proj's gradient
 * runs through the sigmoid, and its share of dx through attention_norm. */
static int test_model_grad_diff2_mha(void) {
    return check_model("model diff2 mha", model_config(DA_ARCH_DIFF2, 4, 4, 0), 906);
}
static int test_model_grad_diff2_gqa(void) {
    return check_model("model diff2 gqa h4kv2", model_config(DA_ARCH_DIFF2, 4, 2, 0), 907);
}
static int test_model_grad_diff2_tied_rep4(void) {
    return check_model("model diff2 tied gqa h4kv1", model_config(DA_ARCH_DIFF2, 4, 1, 1), 908);
}

/* An explicit head size (convert's preserve recipe): the attention is n_heads * d
 * wide, not dim; q, k, v and out_proj take that width, the head norm its 2d. */
static int test_model_grad_diff_head_dim(void) {
    da_config c = model_config(DA_ARCH_DIFF, 2, 1, 0);
    c.head_dim = 6; /* 2 heads x 2 x 6 = 24 != dim 16 */
    return check_model("model diff head_dim 6 gqa h2kv1", c, 913);
}
static int test_model_grad_softmax_head_dim(void) {
    da_config c = model_config(DA_ARCH_SOFTMAX, 4, 2, 0);
    c.head_dim = 6, c.head_norm = DA_HEAD_NORM_ON;
    return check_model("model softmax head_dim 6 gqa h4kv2 head_norm", c, 914);
}
static int test_model_grad_diff2_head_dim(void) {
    da_config c = model_config(DA_ARCH_DIFF2, 2, 1, 0);
    c.head_dim = 10;
    return check_model("model diff2 head_dim 10 gqa h2kv1", c, 915);
}

/* Mid-ramp (--lambda-ramp): the second map weighs (1 - lambda_hold) lambda;
 * the lambda parameters' gradients carry the factor. */
static int test_model_grad_diff_mid_ramp(void) {
    da_config c = model_config(DA_ARCH_DIFF, 2, 2, 0);
    c.lambda_hold = 0.6f;
    return check_model("model diff lambda_hold 0.6", c, 916);
}
static int test_model_grad_diff2_mid_ramp(void) {
    da_config c = model_config(DA_ARCH_DIFF2, 4, 2, 0);
    c.lambda_hold = 0.3f;
    return check_model("model diff2 lambda_hold 0.3", c, 917);
}
static int test_model_grad_diff_head_dim_off_ramp(void) {
    da_config c = model_config(DA_ARCH_DIFF, 2, 2, 0);
    c.head_dim = 4, c.head_norm = DA_HEAD_NORM_OFF, c.lambda_hold = 0.5f;
    return check_model("model diff head_dim 4 head_norm off lambda_hold 0.5", c, 918);
}

/* NSA: small blocks on the 8-token batch (l 4, s 2, l' 4, n 3, w 3), so that
 * every branch has keys: 3 compressed blocks, both selection blocks chosen
 * (a choice FD cannot flip), a window shorter than T. The flash kernel is the
 * model's; the gate's bias and sigmoid are the variant's own. */
static da_config nsa_config(int n_heads, int n_kv_heads, int tie) {
    da_config c = model_config(DA_ARCH_NSA, n_heads, n_kv_heads, tie);
    c.nsa_block = 4, c.nsa_stride = 2, c.nsa_select = 4, c.nsa_topn = 3, c.nsa_window = 3;
    return c;
}
static int test_model_grad_nsa_mha(void) { return check_model("model nsa mha", nsa_config(2, 2, 0), 911); }
static int test_model_grad_nsa_gqa(void) { return check_model("model nsa gqa h4kv2", nsa_config(2, 1, 0), 912); }
static int test_model_grad_nsa_tied_rep4(void) {
    return check_model("model nsa tied gqa h4kv1", nsa_config(4, 1, 1), 923);
}
/* One K/V projection read by the three branches: its gradient sums theirs. */
static int test_model_grad_nsa_shared_kv(void) {
    da_config c = nsa_config(2, 1, 0);
    c.nsa_shared_kv = 1;
    return check_model("model nsa shared kv gqa h4kv2", c, 924);
}

/* Grouped differential attention: S signal heads in G groups over P K/V pairs. The noise
 * head's gradient sums its group's signal heads'; d = 4 (head_dim) so that 4 signal heads fit dim 16. */
static da_config gda_config(int signal, int noise, int pairs, int tie) {
    da_config c = model_config(DA_ARCH_GDA, signal, pairs, tie);
    c.gda_noise_heads = noise;
    c.head_dim = 4;
    return c;
}
static int test_model_grad_gda_groups2_kv1(void) {
    return check_model("model gda S4 G2 P1", gda_config(4, 2, 1, 0), 931);
}
static int test_model_grad_gda_groups2_kv2_tied(void) {
    return check_model("model gda S4 G2 P2 tied", gda_config(4, 2, 2, 1), 932);
}
static int test_model_grad_gda_one_group(void) {
    return check_model("model gda S4 G1 P1", gda_config(4, 1, 1, 0), 933);
}
/* G = S: Motif-2.6B's DIFF V1 (q already in DIFF's layout), Motif's lambda_init schedule */
static int test_model_grad_gda_v1(void) {
    return check_model("model gda V1 S2 G2 P1", gda_config(2, 0, 1, 0), 934);
}
/* --mlp polynorm: PolyNorm's weights and bias, and through it w1 and w3, under a DIFF and a GDA model */
static int test_model_grad_diff_polynorm(void) {
    da_config c = model_config(DA_ARCH_DIFF, 2, 1, 0);
    c.mlp = DA_MLP_POLYNORM;
    return check_model("model diff polynorm h2kv1", c, 937);
}
static int test_model_grad_gda_polynorm(void) {
    da_config c = gda_config(4, 2, 1, 0);
    c.mlp = DA_MLP_POLYNORM;
    return check_model("model gda S4 G2 P1 polynorm", c, 938);
}
static int test_model_grad_gda_reference_kernel(void) {
    return check_model_kernel("model gda S4 G2 P1 reference kernel", gda_config(4, 2, 1, 0), 935,
                              DA_ATTN_REFERENCE);
}
/* da_backward accumulates (+=) into m->grads: two backwards of the same
 * batch give twice the gradient of one. */
static int test_model_backward_accumulates(void) {
    da_config cfg = model_config(DA_ARCH_DIFF, 2, 1, 0);
    da_model m;
    da_acts *a;
    int tokens[MODEL_B * MODEL_T], targets[MODEL_B * MODEL_T];
    if (model_setup("accumulate", &m, &a, &cfg, 905, tokens, targets)) return 1;
    float *once = xalloc(m.n_params), *half = xalloc(m.n_params);
    da_model_zero_grads(&m);
    da_forward(&m, a, tokens, targets, MODEL_B, MODEL_T);
    da_backward(&m, a);
    memcpy(once, m.grads, m.n_params * sizeof(float));
    da_forward(&m, a, tokens, targets, MODEL_B, MODEL_T);
    da_backward(&m, a);
    for (size_t i = 0; i < m.n_params; i++) half[i] = 0.5f * m.grads[i];
    report r;
    report_start(&r, "model backward accumulates");
    compare(&r, "grads/2 after two", half, once, m.n_params, EXACT_TOL);
    free(once), free(half);
    da_acts_free(a);
    da_model_free(&m);
    return report_end(&r);
}

int main(void) {
    ex = da_exec_default();
    op = da_ops_of(ex.isa);
    at = da_attn_ops_of(ex.isa);
    printf("kernels: %s\n", da_isa_name(op->isa));
    RUN(test_matmul_grad);
    RUN(test_matmul_backward_accumulates_dinp);
    RUN(test_matmul_forward_accumulates);
    RUN(test_rmsnorm_grad);
    RUN(test_rope_backward_grad);
    RUN(test_rope_backward_is_transpose);
    RUN(test_rope_preserves_norms);
    RUN(test_swiglu_grad);
    RUN(test_polynorm_grad);
    RUN(test_polynorm_in_place);
    RUN(test_cross_entropy_losses);
    RUN(test_cross_entropy_grad);
    RUN(test_cross_entropy_masked);
    RUN(test_cross_entropy_all_masked);
    RUN(test_embedding_grad);
    RUN(test_diff_attention_grad_mha);
    RUN(test_diff_attention_grad_gqa);
    RUN(test_diff_attention_grad_gqa_h4kv2);
    RUN(test_softmax_attention_grad_mha);
    RUN(test_softmax_attention_grad_gqa);
    RUN(test_softmax_attention_grad_gqa_h4kv2);
    RUN(test_diff2_attention_grad_mha);
    RUN(test_diff2_attention_grad_gqa_rep2);
    RUN(test_diff2_attention_grad_gqa_rep4);
    RUN(test_model_grad_diff_mha);
    RUN(test_model_grad_diff_gqa);
    RUN(test_model_grad_softmax_untied);
    RUN(test_model_grad_softmax_tied);
    RUN(test_model_grad_diff2_mha);
    RUN(test_model_grad_diff2_gqa);
    RUN(test_model_grad_diff2_tied_rep4);
    RUN(test_model_grad_diff_head_dim);
    RUN(test_model_grad_softmax_head_dim);
    RUN(test_model_grad_diff2_head_dim);
    RUN(test_model_grad_diff_mid_ramp);
    RUN(test_model_grad_diff2_mid_ramp);
    RUN(test_model_grad_diff_head_dim_off_ramp);
    RUN(test_model_grad_nsa_mha);
    RUN(test_model_grad_nsa_gqa);
    RUN(test_model_grad_nsa_tied_rep4);
    RUN(test_model_grad_nsa_shared_kv);
    RUN(test_model_grad_gda_groups2_kv1);
    RUN(test_model_grad_gda_groups2_kv2_tied);
    RUN(test_model_grad_gda_one_group);
    RUN(test_model_grad_gda_v1);
    RUN(test_model_grad_gda_reference_kernel);
    RUN(test_model_grad_diff_polynorm);
    RUN(test_model_grad_gda_polynorm);
    RUN(test_model_backward_accumulates);
    TH_SUMMARY();
}
