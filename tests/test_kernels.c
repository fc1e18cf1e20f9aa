/* Every kernel level this CPU runs against the scalar level, op by op, on
 * the same random inputs (sizes with vector tails): within 1e-5 relative
 * where the levels sum in other orders or use the vector exp, and bit for
 * bit where the arithmetic is the same in every lane (AdamW, embedding,
 * RoPE, the int8 activation rows). The levels' own correctness is
 * test_gradcheck's and test_flash's; this shows they agree. */
#include "attn/attention.h"
#include "diffattn.h"
#include "harness.h"
#include "ops/ops.h"

enum { N = 37, C = 200, V = 133, D = 40, NSUB = 5 };

static float *randn(size_t n, uint64_t seed, float std) {
    da_rng r;
    da_rng_seed(&r, seed);
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = std * da_rng_normal(&r);
    return x;
}

static float *copy(const float *x, size_t n) {
    float *y = malloc(n * sizeof(float));
    memcpy(y, x, n * sizeof(float));
    return y;
}

/* a (level) against b (scalar), n floats: rel <= tol, or identical when tol is 0. */
static int agree(const char *what, const da_ops *op, const float *a, const float *b, size_t n, double tol) {
    if (tol == 0) {
        if (!memcmp(a, b, n * sizeof(float))) return 0;
        fprintf(stderr, "  %s at %s: not bit-identical to scalar\n", what, da_isa_name(op->isa));
        return 1;
    }
    double e = max_rel_error(a, b, n, 1e-6);
    if (e <= tol) return 0;
    fprintf(stderr, "  %s at %s: rel err %.2e vs scalar (tol %.0e)\n", what, da_isa_name(op->isa), e, tol);
    return 1;
}

static int ops_at(const da_ops *op, const da_ops *sc) {
    int fail = 0;
    const size_t nc = (size_t)N * C;
    float *x = randn(nc, 1, 1.0f), *w = randn(C, 2, 0.5f), *dy = randn(nc, 3, 1.0f);
    /* rmsnorm */
    float *o1 = calloc(nc, 4), *o2 = calloc(nc, 4), *r1 = calloc(N, 4), *r2 = calloc(N, 4);
    op->rmsnorm_forward(o1, r1, x, w, N, C, 1e-5f);
    sc->rmsnorm_forward(o2, r2, x, w, N, C, 1e-5f);
    fail |= agree("rmsnorm_forward", op, o1, o2, nc, 1e-5) | agree("rmsnorm rstd", op, r1, r2, N, 1e-5);
    float *dx1 = copy(dy, nc), *dx2 = copy(dy, nc), *dw1 = calloc(C, 4), *dw2 = calloc(C, 4);
    op->rmsnorm_backward(dx1, dw1, dy, x, w, r2, N, C);
    sc->rmsnorm_backward(dx2, dw2, dy, x, w, r2, N, C);
    fail |= agree("rmsnorm_backward dx", op, dx1, dx2, nc, 1e-5) | agree("rmsnorm_backward dw", op, dw1, dw2, C, 1e-5);
    /* swiglu: the vector exp against libm's */
    float *h3 = randn(nc, 4, 1.0f);
    op->swiglu_forward(o1, x, h3, nc);
    sc->swiglu_forward(o2, x, h3, nc);
    fail |= agree("swiglu_forward", op, o1, o2, nc, 1e-5);
    op->swiglu_backward(dx1, o1, dy, x, h3, nc);
    sc->swiglu_backward(dx2, o2, dy, x, h3, nc);
    fail |= agree("swiglu_backward dh1", op, dx1, dx2, nc, 1e-5) | agree("swiglu_backward dh3", op, o1, o2, nc, 1e-5);
    /* rope, both directions */
    const size_t nr = (size_t)N * NSUB * D;
    float *cs = malloc((size_t)N * D / 2 * 4), *sn = malloc((size_t)N * D / 2 * 4);
    da_rope_tables_theta(cs, sn, N, D, 10000.0f);
    float *q = randn(nr, 5, 1.0f), *q1 = copy(q, nr), *q2 = copy(q, nr);
    for (int inverse = 0; inverse < 2; inverse++) {
        op->rope_apply(q1, cs, sn, 1, N, NSUB, D, inverse);
        sc->rope_apply(q2, cs, sn, 1, N, NSUB, D, inverse);
        fail |= agree(inverse ? "rope_apply inverse" : "rope_apply", op, q1, q2, nr, 0);
    }
    /* embedding */
    int tok[N];
    for (int i = 0; i < N; i++) tok[i] = (i * 7) % 11;
    float *emb = randn((size_t)11 * C, 6, 1.0f), *de1 = calloc((size_t)11 * C, 4), *de2 = calloc((size_t)11 * C, 4);
    op->embedding_forward(o1, tok, emb, N, C);
    sc->embedding_forward(o2, tok, emb, N, C);
    op->embedding_backward(de1, dy, tok, N, C);
    sc->embedding_backward(de2, dy, tok, N, C);
    fail |= agree("embedding_forward", op, o1, o2, nc, 0) | agree("embedding_backward", op, de1, de2, 11 * C, 0);
    /* cross-entropy */
    const size_t nv = (size_t)N * V;
    float *z = randn(nv, 7, 2.0f), *z1 = copy(z, nv), *z2 = copy(z, nv), l1[N], l2[N];
    int tgt[N];
    for (int i = 0; i < N; i++) tgt[i] = (i * 13) % V;
    float m1 = op->cross_entropy_forward(l1, z, tgt, N, V), m2 = sc->cross_entropy_forward(l2, z, tgt, N, V);
    fail |= agree("cross_entropy_forward", op, l1, l2, N, 1e-5) | agree("cross_entropy mean", op, &m1, &m2, 1, 1e-5);
    op->cross_entropy_backward(z1, tgt, N, V);
    sc->cross_entropy_backward(z2, tgt, N, V);
    fail |= agree("cross_entropy_backward", op, z1, z2, nv, 1e-5);
    /* AdamW: the same arithmetic per lane */
    float *p1 = copy(x, nc), *p2 = copy(x, nc), *m_1 = calloc(nc, 4), *m_2 = calloc(nc, 4), *v1 = calloc(nc, 4),
          *v2 = calloc(nc, 4);
    for (int step = 1; step <= 3; step++) {
        float bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.95f, (float)step);
        op->adamw_update(p1, dy, m_1, v1, (long)nc, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2);
        sc->adamw_update(p2, dy, m_2, v2, (long)nc, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2);
    }
    fail |= agree("adamw_update", op, p1, p2, nc, 0) | agree("adamw m", op, m_1, m_2, nc, 0) |
            agree("adamw v", op, v1, v2, nc, 0);
    /* int8 activation rows, every scale mode */
    enum { NQ = 320 };
    int8_t aq1[NQ], aq2[NQ];
    float ad1[NQ / 32], ad2[NQ / 32];
    int32_t as1[NQ / 32], as2[NQ / 32];
    for (int mode = DA_ACT_BLOCK; mode <= DA_ACT_STATIC; mode++) {
        da_qact a1 = {NQ, aq1, ad1, as1}, a2 = {NQ, aq2, ad2, as2};
        op->quantize_act(&a1, x, NQ, (da_act_scale_mode)mode, 1.5f);
        sc->quantize_act(&a2, x, NQ, (da_act_scale_mode)mode, 1.5f);
        if (memcmp(aq1, aq2, NQ) || memcmp(ad1, ad2, sizeof ad1) || memcmp(as1, as2, sizeof as1)) {
            fprintf(stderr, "  quantize_act mode %d at %s: not identical to scalar\n", mode, da_isa_name(op->isa));
            fail = 1;
        }
    }
    /* rounding ties (a static scale of 1: x * id is x), the edges of the int8 range, NaN and infinities */
    float e[NQ];
    for (int i = 0; i < NQ; i++) e[i] = -131.0f + 0.5f * (float)i; /* -131 .. 28.5 in halves */
    e[1] = NAN, e[3] = INFINITY, e[5] = -INFINITY, e[7] = 0.49999997f, e[9] = -0.49999997f, e[11] = 1e30f;
    e[13] = 8388609.0f, e[15] = -2.5f, e[17] = 126.5f, e[19] = -126.5f, e[21] = 127.49f;
    for (int mode = DA_ACT_BLOCK; mode <= DA_ACT_STATIC; mode++) {
        da_qact a1 = {NQ, aq1, ad1, as1}, a2 = {NQ, aq2, ad2, as2};
        op->quantize_act(&a1, e, NQ, (da_act_scale_mode)mode, 127.0f);
        sc->quantize_act(&a2, e, NQ, (da_act_scale_mode)mode, 127.0f);
        if (memcmp(aq1, aq2, NQ) || memcmp(ad1, ad2, sizeof ad1) || memcmp(as1, as2, sizeof as1)) {
            fprintf(stderr, "  quantize_act mode %d at %s, ties and edges: not identical to scalar\n", mode,
                    da_isa_name(op->isa));
            fail = 1;
        }
    }
    float *all[] = {x, w, dy, o1, o2, r1, r2, dx1, dx2, dw1, dw2, h3, cs, sn, q, q1, q2, emb, de1, de2, z, z1, z2,
                    p1, p2, m_1, m_2, v1, v2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return fail;
}

static int test_every_level_against_scalar(void) {
    const da_ops *sc = da_ops_of(DA_ISA_SCALAR);
    int fail = 0, checked = 0;
    for (int isa = DA_ISA_SCALAR + 1; isa < DA_ISA_N; isa++) {
        if (!da_isa_supported((da_isa)isa)) continue;
        const da_ops *op = da_ops_of((da_isa)isa);
        CHECK(op->isa == (da_isa)isa);
        fail |= ops_at(op, sc);
        printf("     %s agrees with scalar\n", da_isa_name((da_isa)isa));
        checked++;
    }
    if (!checked) printf("     this CPU runs only the scalar level\n");
    return fail;
}

/* A level the CPU lacks is never handed out: the table is the best below it. */
static int test_unsupported_level_falls_back(void) {
    for (int isa = 0; isa < DA_ISA_N; isa++) {
        const da_ops *op = da_ops_of((da_isa)isa);
        CHECK(da_isa_supported(op->isa));
        CHECK(op->isa <= (da_isa)isa);
        CHECK(da_isa_supported((da_isa)isa) == (op->isa == (da_isa)isa));
        CHECK(da_attn_ops_of((da_isa)isa)->isa == op->isa);
    }
    for (int isa = 0; isa < DA_ISA_N; isa++) {
        const da_ops *op = da_ops_of((da_isa)isa);
        CHECK((op->bf16_gemm != NULL) == (op->isa >= DA_ISA_AVX512_BF16));
    }
    return 0;
}

/* DIFFATTN_EXPECT_ISA (set by the emulated-CPU run) names the level the
 * detection must find there. */
static int test_detected_level(void) {
    const char *want = getenv("DIFFATTN_EXPECT_ISA");
    da_isa isa;
    if (!want) return 0;
    CHECK(!da_isa_parse(want, &isa));
    if (da_isa_detect() != isa) {
        fprintf(stderr, "  detected %s, expected %s\n", da_isa_name(da_isa_detect()), want);
        return 1;
    }
    return 0;
}

int main(void) {
    printf("this CPU: %s\n", da_isa_name(da_isa_detect()));
    RUN(test_detected_level);
    RUN(test_every_level_against_scalar);
    RUN(test_unsupported_level_falls_back);
    TH_SUMMARY();
}
