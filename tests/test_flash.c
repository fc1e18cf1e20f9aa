/* The fused flash-attention kernel against the reference attention, forward
 * and backward, within 1e-5 relative (max|err| / max|ref| per tensor): both
 * archs and DIFF2, GQA, head sizes 32/64/128, T not a multiple of the tile, and the
 * flash kernel of every level this CPU runs against the scalar reference. */
#include <omp.h>

#include "attn/attention.h"
#include "attn/flash_attention.h"
#include "attn/variant.h"
#include "diffattn.h"
#include "harness.h"

/* The flash kernel's level in the comparisons: the default context's
 * (DIFFATTN_ISA lowers it), or each level in turn (test_every_level_*). The
 * reference is always the scalar level's. */
static da_isa level;

/* The kernels' layout of a variant. */
static const attn_layout *lay(da_arch a) { return &da_attn_variant_of(a)->layout; }
#define LAY_OF(diff) lay((diff) ? DA_ARCH_DIFF : DA_ARCH_SOFTMAX)

static float *randn(size_t n, da_rng *r, float std) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = std * da_rng_normal(r);
    return x;
}

/* Runs both kernels on the same random inputs and compares every output. */
static int compare_w(int diff, int B, int T, int H, int n_kv, int d, int window) {
    const da_attn_ops *ref = da_attn_ops_of(DA_ISA_SCALAR), *at = da_attn_ops_of(level);
    const int C = diff ? 2 * H * d : H * d, Ckv = C / (H / n_kv), d2 = diff ? 2 * d : d;
    const int threads = omp_get_max_threads();
    attn_shape s = {B, T, H, n_kv, d, C, Ckv, threads, 0, window, 0, NULL};
    da_rng r;
    da_rng_seed(&r, (uint64_t)(T * 131 + d * 7 + H + diff));
    /* std 1 / d^0.25 per side gives logits of std ~1 * 1.5: peaked, non-uniform maps */
    const float qk_std = 1.5f / powf((float)d, 0.25f);
    float *q = randn((size_t)B * T * C, &r, qk_std), *k = randn((size_t)B * T * Ckv, &r, qk_std);
    float *v = randn((size_t)B * T * Ckv, &r, 1.0f), *dout = randn((size_t)B * T * C, &r, 1.0f);
    float *w = randn((size_t)d2, &r, 0.3f);
    for (int i = 0; i < d2; i++) w[i] += 1.0f;
    const float lambda = 0.45f, lambda_init = 0.3f;
    const size_t n = (size_t)B * T * C, nkv = (size_t)B * T * Ckv, maps = diff ? 2 : 1;

    /* reference */
    float *ref_out = calloc(n, 4), *ref_opre = calloc(n, 4), *ref_rstd = calloc((size_t)B * T * H, 4);
    float *att = calloc((size_t)B * H * maps * T * T, 4), *scr = calloc(da_attn_scratch_size(&s), 4);
    float *rdq = calloc(n, 4), *rdk = calloc(nkv, 4), *rdv = calloc(nkv, 4), *rdw = calloc(d2, 4);
    float rdl = 0;
    /* flash */
    float *f_out = calloc(n, 4), *f_opre = calloc(n, 4), *f_rstd = calloc((size_t)B * T * H, 4);
    float *o1 = calloc(n, 4), *o2 = calloc(n, 4), *lse = calloc((size_t)B * H * maps * T, 4);
    float *fscr = calloc(da_flash_scratch_size(&s, LAY_OF(diff)), 4), *dopre = calloc(n, 4);
    float *fdq = calloc(n, 4), *fdk = calloc(nkv, 4), *fdv = calloc(nkv, 4), *fdw = calloc(d2, 4);
    float fdl = 0;

    if (diff) {
        ref->diff_forward(ref_out, ref_opre, ref_rstd, att, q, k, v, w, lambda, lambda_init, &s, scr);
        ref->diff_backward(rdq, rdk, rdv, rdw, &rdl, dout, ref_opre, ref_rstd, att, q, k, v, w, lambda,
                                lambda_init, &s, scr);
        at->flash_forward(f_opre, o1, o2, lse, q, k, v, lambda, NULL, LAY_OF(1), &s, fscr);
        at->head_norm_forward(f_out, f_rstd, f_opre, w, 1.0f - lambda_init, B * T * H, d2);
        at->head_norm_backward(dopre, fdw, dout, f_opre, f_rstd, w, 1.0f - lambda_init, B * T * H, d2);
        at->flash_backward(fdq, fdk, fdv, &fdl, NULL, dopre, f_opre, o1, o2, lse, q, k, v, lambda, NULL, LAY_OF(1), &s, fscr);
    } else {
        ref->softmax_forward(ref_out, att, q, k, v, &s);
        ref->softmax_backward(rdq, rdk, rdv, dout, att, q, k, v, &s, scr);
        at->flash_forward(f_out, NULL, NULL, lse, q, k, v, 0.0f, NULL, LAY_OF(0), &s, fscr);
        at->flash_backward(fdq, fdk, fdv, NULL, NULL, dout, f_out, NULL, NULL, lse, q, k, v, 0.0f, NULL, LAY_OF(0), &s, fscr);
    }
    const double tol = 1e-5;
    double e_out = max_rel_error(f_out, ref_out, n, 0), e_dq = max_rel_error(fdq, rdq, n, 0);
    double e_dk = max_rel_error(fdk, rdk, nkv, 0), e_dv = max_rel_error(fdv, rdv, nkv, 0);
    /* d lambda = -sum over rows of dO . (A2 V): a sum with cancellation, so
     * its error is measured against the sum of the terms' magnitudes. */
    double terms = 0;
    if (diff)
        for (size_t row = 0; row < (size_t)B * T * H; row++) {
            double t = 0;
            for (int c = 0; c < d2; c++) t += (double)dopre[row * d2 + c] * o2[row * d2 + c];
            terms += fabs(t);
        }
    double e_dw = diff ? max_rel_error(fdw, rdw, d2, 0) : 0, e_dl = diff ? fabs(fdl - rdl) / terms : 0;
    printf("     %-7s B%d T%-4d H%d kv%d d%-3d W%-3d %s: out %.1e dq %.1e dk %.1e dv %.1e", diff ? "diff" : "softmax", B,
           T, H, n_kv, d, window, da_isa_name(at->isa), e_out, e_dq, e_dk, e_dv);
    if (diff) printf(" dsubln %.1e dlambda %.1e", e_dw, e_dl);
    printf("\n");
    int fail = !(e_out <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol && e_dw <= tol && e_dl <= tol);
    float *all[] = {q, k, v, dout, w, ref_out, ref_opre, ref_rstd, att, scr, rdq, rdk, rdv, rdw, f_out, f_opre,
                    f_rstd, o1, o2, lse, fscr, dopre, fdq, fdk, fdv, fdw};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return fail;
}

static int compare(int diff, int B, int T, int H, int n_kv, int d) { return compare_w(diff, B, T, H, n_kv, d, 0); }

/* DIFF2: both kernels on the same random q (B, T, 2C), k, v and per-row lam. */
static int compare_diff2(int B, int T, int H, int n_kv, int d, int window) {
    const da_attn_ops *ref = da_attn_ops_of(DA_ISA_SCALAR), *at = da_attn_ops_of(level);
    const int C = H * d, Ckv = n_kv * d, threads = omp_get_max_threads();
    attn_shape s = {B, T, H, n_kv, d, C, Ckv, threads, 0, window, 0, NULL};
    da_rng r;
    da_rng_seed(&r, (uint64_t)(T * 131 + d * 7 + H + 2));
    const float qk_std = 1.5f / powf((float)d, 0.25f);
    const size_t nq = (size_t)B * T * 2 * C, n = (size_t)B * T * C, nkv = (size_t)B * T * Ckv, nl = (size_t)B * T * H;
    float *q = randn(nq, &r, qk_std), *k = randn(nkv, &r, qk_std), *v = randn(nkv, &r, 1.0f);
    float *dout = randn(n, &r, 1.0f), *lam = calloc(nl, 4);
    for (size_t i = 0; i < nl; i++) lam[i] = da_rng_uniform(&r);
    float *ref_out = calloc(n, 4), *att = calloc((size_t)B * H * 2 * T * T, 4), *scr = calloc(da_attn_scratch_size(&s), 4);
    float *rdq = calloc(nq, 4), *rdk = calloc(nkv, 4), *rdv = calloc(nkv, 4), *rdl = calloc(nl, 4);
    float *f_out = calloc(n, 4), *o1 = calloc(n, 4), *o2 = calloc(n, 4), *lse = calloc((size_t)B * H * 2 * T, 4);
    float *fscr = calloc(da_flash_scratch_size(&s, lay(DA_ARCH_DIFF2)), 4);
    float *fdq = calloc(nq, 4), *fdk = calloc(nkv, 4), *fdv = calloc(nkv, 4), *fdl = calloc(nl, 4);
    ref->diff2_forward(ref_out, att, q, k, v, lam, &s, scr);
    ref->diff2_backward(rdq, rdk, rdv, rdl, dout, att, q, k, v, lam, &s, scr);
    at->flash_forward(f_out, o1, o2, lse, q, k, v, 0.0f, lam, lay(DA_ARCH_DIFF2), &s, fscr);
    at->flash_backward(fdq, fdk, fdv, NULL, fdl, dout, f_out, o1, o2, lse, q, k, v, 0.0f, lam, lay(DA_ARCH_DIFF2), &s,
                             fscr);
    const double tol = 1e-5;
    double e_out = max_rel_error(f_out, ref_out, n, 0), e_dq = max_rel_error(fdq, rdq, nq, 0);
    double e_dk = max_rel_error(fdk, rdk, nkv, 0), e_dv = max_rel_error(fdv, rdv, nkv, 0);
    double e_dl = max_rel_error(fdl, rdl, nl, 0);
    printf("     diff2   B%d T%-4d H%d kv%d d%-3d W%-3d %s: out %.1e dq %.1e dk %.1e dv %.1e dlam %.1e\n", B, T, H,
           n_kv, d, window, da_isa_name(at->isa), e_out, e_dq, e_dk, e_dv, e_dl);
    int fail = !(e_out <= tol && e_dq <= tol && e_dk <= tol && e_dv <= tol && e_dl <= tol);
    float *all[] = {q, k, v, dout, lam, ref_out, att, scr, rdq, rdk, rdv, rdl, f_out, o1, o2, lse, fscr, fdq, fdk, fdv, fdl};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
    return fail;
}

static int test_diff_mha_d32_ragged(void) { return compare(1, 2, 100, 2, 2, 32); }
static int test_diff_gqa_d64_ragged(void) { return compare(1, 2, 150, 4, 2, 64); }
static int test_diff_gqa1_d128(void) { return compare(1, 1, 130, 2, 1, 128); }
static int test_diff_tile_multiple(void) { return compare(1, 1, 128, 2, 2, 32); }
static int test_diff_short(void) { return compare(1, 3, 5, 2, 2, 32); }
static int test_softmax_mha_d32_ragged(void) { return compare(0, 2, 100, 4, 4, 32); }
static int test_softmax_gqa_d64_ragged(void) { return compare(0, 2, 150, 4, 2, 64); }
static int test_softmax_gqa_d128(void) { return compare(0, 1, 130, 4, 1, 128); }
static int test_diff2_mha_d32_ragged(void) { return compare_diff2(2, 100, 4, 4, 32, 0); }
static int test_diff2_gqa_rep2_d64_ragged(void) { return compare_diff2(2, 150, 4, 2, 64, 0); }
static int test_diff2_gqa_rep4_d128(void) { return compare_diff2(1, 130, 4, 1, 128, 0); }
static int test_diff2_short(void) { return compare_diff2(3, 5, 2, 2, 32, 0); }

/* Sliding window, T = 200, W = 37 (not a tile multiple: windows start
 * mid-tile and whole tiles are skipped), and W = 100 > a tile, per arch. */
static int test_window_diff(void) { return compare_w(1, 2, 200, 2, 1, 32, 37) | compare_w(1, 1, 200, 2, 2, 16, 100); }
static int test_window_softmax(void) {
    return compare_w(0, 2, 200, 4, 2, 32, 37) | compare_w(0, 1, 200, 4, 4, 16, 100);
}
static int test_window_diff2(void) {
    return compare_diff2(2, 200, 4, 2, 32, 37) | compare_diff2(1, 200, 4, 1, 16, 100);
}
static int test_window_one(void) { return compare_w(0, 1, 70, 2, 2, 8, 1) | compare_diff2(1, 70, 2, 1, 8, 1); }

/* A window of at least T is no window: flash outputs equal bit for bit. */
static int test_window_ge_T_is_full(void) {
    const da_attn_ops *at = da_attn_ops_of(level);
    const int B = 1, T = 90, H = 2, d = 16, C = 2 * H * d;
    da_rng r;
    da_rng_seed(&r, 31);
    float *q = randn((size_t)B * T * C, &r, 0.7f), *k = randn((size_t)B * T * C, &r, 0.7f);
    float *v = randn((size_t)B * T * C, &r, 1.0f);
    float *o[2], *o1 = calloc((size_t)B * T * C, 4), *o2 = calloc((size_t)B * T * C, 4);
    float *lse = calloc((size_t)B * H * 2 * T, 4);
    int fail = 0;
    for (int w = 0; w < 2; w++) {
        attn_shape s = {B, T, H, H, d, C, C, omp_get_max_threads(), 0, w ? T : 0, 0, NULL};
        float *scr = calloc(da_flash_scratch_size(&s, lay(DA_ARCH_DIFF)), 4);
        o[w] = calloc((size_t)B * T * C, 4);
        at->flash_forward(o[w], o1, o2, lse, q, k, v, 0.4f, NULL, lay(DA_ARCH_DIFF), &s, scr);
        free(scr);
    }
    fail = memcmp(o[0], o[1], (size_t)B * T * C * 4) != 0;
    if (fail) fprintf(stderr, "  window = T differs from no window\n");
    free(q), free(k), free(v), free(o[0]), free(o[1]), free(o1), free(o2), free(lse);
    return fail;
}
/* Every level this CPU runs, scalar included. */
static int every_level(da_arch arch, int B, int T, int H, int n_kv, int d) {
    const da_isa saved = level;
    int fail = 0;
    for (int isa = 0; isa < DA_ISA_N; isa++) {
        if (!da_isa_supported((da_isa)isa)) continue;
        level = (da_isa)isa;
        fail |= arch == DA_ARCH_DIFF2 ? compare_diff2(B, T, H, n_kv, d, 0) : compare(arch == DA_ARCH_DIFF, B, T, H, n_kv, d);
    }
    level = saved;
    return fail;
}
static int test_every_level_diff(void) { return every_level(DA_ARCH_DIFF, 2, 150, 4, 2, 64); }
static int test_every_level_softmax(void) { return every_level(DA_ARCH_SOFTMAX, 1, 100, 4, 2, 32); }
static int test_every_level_diff2(void) { return every_level(DA_ARCH_DIFF2, 1, 100, 4, 2, 32); }

int main(void) {
    level = da_exec_default().isa;
    RUN(test_diff_mha_d32_ragged);
    RUN(test_diff_gqa_d64_ragged);
    RUN(test_diff_gqa1_d128);
    RUN(test_diff_tile_multiple);
    RUN(test_diff_short);
    RUN(test_softmax_mha_d32_ragged);
    RUN(test_softmax_gqa_d64_ragged);
    RUN(test_softmax_gqa_d128);
    RUN(test_diff2_mha_d32_ragged);
    RUN(test_diff2_gqa_rep2_d64_ragged);
    RUN(test_diff2_gqa_rep4_d128);
    RUN(test_diff2_short);
    RUN(test_window_diff);
    RUN(test_window_softmax);
    RUN(test_window_diff2);
    RUN(test_window_one);
    RUN(test_window_ge_T_is_full);
    RUN(test_every_level_diff);
    RUN(test_every_level_softmax);
    RUN(test_every_level_diff2);
    TH_SUMMARY();
}
