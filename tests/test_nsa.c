/* NSA's kernels (src/attn/nsa*.c) against the float64 PyTorch reference
 * (tools/nsa_reference.py, fixtures tests/fixtures/nsa_kernel_*.safetensors
 * from tools/make_nsa_fixtures.py), against each other, token-by-token
 * decoding against the full forward, and finite differences. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attn/nsa.h"
#include "diffattn/core.h"
#include "diffattn/exec.h"
#include "harness.h"
#include "io/safetensors.h"

#define N_IN 12
static const char *const IN_NAMES[N_IN] = {"q",     "k_cmp", "v_cmp", "k_slc",    "v_slc",   "k_win",
                                           "v_win", "gate",  "cmp_k", "cmp_v", "cmp_pe_k", "cmp_pe_v"};

typedef struct {
    nsa_shape s;
    float *in[N_IN], *dout, *out, *grad[N_IN], *sel;
    size_t n[N_IN];
} nsa_case;

static float *read_tensor(const da_st_file *f, const char *name, size_t *numel) {
    const da_st_tensor *t = da_st_find(f, name);
    if (!t) return NULL;
    float *p = malloc(t->numel * sizeof(float));
    if (da_st_read_f32(f, t, p).code) { free(p); return NULL; }
    if (numel) *numel = t->numel;
    return p;
}

static int load_case(nsa_case *c, const char *name) {
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/nsa_kernel_%s.safetensors", name);
    da_st_file f;
    da_status st = da_st_open(&f, path);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    memset(c, 0, sizeof *c);
    const char *keys[] = {"T", "H", "G", "d", "nsa_block", "nsa_stride", "nsa_select", "nsa_topn", "nsa_window"};
    int *dst[] = {&c->s.T, &c->s.H, &c->s.G, &c->s.d, &c->s.block, &c->s.stride, &c->s.select, &c->s.topn,
                  &c->s.window};
    for (int k = 0; k < 9; k++) {
        const char *v = da_st_meta_get(&f, keys[k]);
        CHECK(v);
        *dst[k] = atoi(v);
    }
    c->s.B = 1;
    c->s.n_threads = 2;
    for (int k = 0; k < N_IN; k++) {
        char gname[64];
        snprintf(gname, sizeof gname, "d_%s", IN_NAMES[k]);
        CHECK((c->in[k] = read_tensor(&f, IN_NAMES[k], &c->n[k])) && (c->grad[k] = read_tensor(&f, gname, NULL)));
    }
    CHECK((c->dout = read_tensor(&f, "dout", NULL)) && (c->out = read_tensor(&f, "out", NULL)));
    CHECK(c->sel = read_tensor(&f, "sel", NULL));
    da_st_close(&f);
    return 0;
}

static void free_case(nsa_case *c) {
    for (int k = 0; k < N_IN; k++) { free(c->in[k]); free(c->grad[k]); }
    free(c->dout);
    free(c->out);
    free(c->sel);
}

/* The level under test: the CPU's, or DIFFATTN_ISA's (main), then each level in turn. */
static const nsa_kernels *K;

static nsa_inputs inputs_of(float *const *in) {
    return (nsa_inputs){in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7], in[8], in[9], in[10], in[11]};
}

/* A forward's and backward's buffers. */
typedef struct {
    nsa_saved sv;
    float *out, *g[N_IN], *scratch;
} nsa_run;

static void run_alloc(nsa_run *r, const nsa_case *c, int flash) {
    const nsa_shape *s = &c->s;
    memset(r, 0, sizeof *r);
    r->sv.kc = calloc(nsa_saved_floats_kv(s) + 1, sizeof(float));
    r->sv.vc = calloc(nsa_saved_floats_kv(s) + 1, sizeof(float));
    r->sv.o_cmp = calloc(nsa_saved_floats_out(s), sizeof(float));
    r->sv.o_slc = calloc(nsa_saved_floats_out(s), sizeof(float));
    r->sv.o_win = calloc(nsa_saved_floats_out(s), sizeof(float));
    r->sv.sel = calloc(nsa_saved_ints_sel(s), sizeof(int));
    if (flash) r->sv.lse = calloc(nsa_saved_floats_lse(s), sizeof(float));
    else r->sv.att_cmp = calloc(nsa_saved_floats_att(s), sizeof(float));
    if (!flash) {
        r->sv.att_slc = r->sv.att_cmp + (size_t)s->B * s->H * s->T * nsa_n_compressed(s, s->T);
        r->sv.att_win = r->sv.att_slc + (size_t)s->B * s->H * s->T * s->T;
    }
    r->out = calloc(nsa_saved_floats_out(s), sizeof(float));
    for (int k = 0; k < N_IN; k++) r->g[k] = calloc(c->n[k], sizeof(float)); /* parameters' +=: from 0 */
    r->scratch = calloc(flash ? nsa_flash_scratch_floats(s) : nsa_reference_scratch_floats(s), sizeof(float));
}

static void run_free(nsa_run *r) {
    free(r->sv.kc); free(r->sv.vc); free(r->sv.o_cmp); free(r->sv.o_slc); free(r->sv.o_win);
    free(r->sv.sel); free(r->sv.lse); free(r->sv.att_cmp); free(r->out); free(r->scratch);
    for (int k = 0; k < N_IN; k++) free(r->g[k]);
}

static void run_forward(nsa_run *r, const nsa_case *c, float *const *in, int flash) {
    nsa_inputs x = inputs_of(in);
    if (flash) K->flash_forward(r->out, &x, &r->sv, &c->s, r->scratch);
    else nsa_reference_forward(r->out, &x, &r->sv, &c->s);
}

static void run_backward(nsa_run *r, const nsa_case *c, int flash) {
    nsa_inputs x = inputs_of(c->in);
    nsa_grads g = {r->g[0], r->g[1], r->g[2], r->g[3], r->g[4],  r->g[5],
                   r->g[6], r->g[7], r->g[8], r->g[9], r->g[10], r->g[11]};
    if (flash) K->flash_backward(&g, c->dout, &x, &r->sv, &c->s, r->scratch);
    else nsa_reference_backward(&g, c->dout, &x, &r->sv, &c->s, r->scratch);
}

/* Gradient error floor: cmp_pe_k's true gradient is zero (it shifts every
 * compressed logit of a row alike), so it is measured against the size of
 * Wck's gradient instead of its own. */
static double grad_floor(const nsa_case *c, int k) {
    double m = 0;
    if (k == 10)
        for (size_t i = 0; i < c->n[8]; i++) m = fabs(c->grad[8][i]) > m ? fabs(c->grad[8][i]) : m;
    return m;
}

/* One kernel against the fixture: out, the selection, every gradient. */
static int check_against_reference(const char *name, int flash) {
    nsa_case c;
    if (load_case(&c, name)) return 1;
    nsa_run r;
    run_alloc(&r, &c, flash);
    run_forward(&r, &c, c.in, flash);
    run_backward(&r, &c, flash);
    int fail = 0;
    char what[96];
    snprintf(what, sizeof what, "%s %s out", name, flash ? "flash" : "reference");
    fail |= expect_close_rel(what, r.out, c.out, nsa_saved_floats_out(&c.s), 1e-4, 0);
    double worst_out = max_rel_error(r.out, c.out, nsa_saved_floats_out(&c.s), 0), worst_g = 0;
    size_t nsel = nsa_saved_ints_sel(&c.s), bad_sel = 0;
    for (size_t k = 0; k < nsel; k++) bad_sel += r.sv.sel[k] != (int)c.sel[k];
    if (bad_sel) { fprintf(stderr, "  %s: %zu selected blocks differ from the reference\n", name, bad_sel); fail = 1; }
    for (int k = 0; k < N_IN; k++) {
        snprintf(what, sizeof what, "%s %s d_%s", name, flash ? "flash" : "reference", IN_NAMES[k]);
        fail |= expect_close_rel(what, r.g[k], c.grad[k], c.n[k], 1e-3, grad_floor(&c, k));
        double e = max_rel_error(r.g[k], c.grad[k], c.n[k], grad_floor(&c, k));
        if (e > worst_g) worst_g = e;
    }
    printf("     %s (%s, T %d, H %d, G %d, l %d s %d l' %d n %d w %d): out rel err %.2e, worst grad rel err %.2e\n",
           name, flash ? "flash" : "reference", c.s.T, c.s.H, c.s.G, c.s.block, c.s.stride, c.s.select, c.s.topn,
           c.s.window, worst_out, worst_g);
    run_free(&r);
    free_case(&c);
    return fail;
}

static const char *const CASES[] = {"mha", "gqa_rep2", "gqa_rep4", "short", "equal"};
#define N_CASES 5

static int test_reference_kernel(void) {
    int fail = 0;
    for (int k = 0; k < N_CASES; k++) fail |= check_against_reference(CASES[k], 0);
    return fail;
}

static int test_flash_kernel(void) {
    int fail = 0;
    for (int k = 0; k < N_CASES; k++) fail |= check_against_reference(CASES[k], 1);
    return fail;
}

/* A random case in memory: T over several tiles, GQA n_rep 3. */
static uint64_t lcg = 88172645463325252ull;
static float urand(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((lcg >> 40) / 16777216.0) * 2.0f - 1.0f;
}

static void random_case(nsa_case *c, nsa_shape s) {
    memset(c, 0, sizeof *c);
    c->s = s;
    const size_t nq = (size_t)s.B * s.T * s.H * s.d, nkv = (size_t)s.B * s.T * s.G * s.d;
    const size_t sizes[N_IN] = {nq,  nkv, nkv, nkv, nkv, nkv, nkv, (size_t)s.B * s.T * s.H * 3,
                                (size_t)s.d * s.block * s.d, (size_t)s.d * s.block * s.d,
                                (size_t)s.block * s.d, (size_t)s.block * s.d};
    for (int k = 0; k < N_IN; k++) {
        c->n[k] = sizes[k];
        c->in[k] = malloc(sizes[k] * sizeof(float));
        const float amp = k == 7 ? 0.45f : k == 8 || k == 9 ? 1.0f / sqrtf((float)s.block * s.d) : 1.0f;
        for (size_t i = 0; i < sizes[k]; i++) c->in[k][i] = (k == 7 ? 0.5f : 0.0f) + amp * urand();
    }
    c->dout = malloc(nq * sizeof(float));
    for (size_t i = 0; i < nq; i++) c->dout[i] = urand();
}

static const nsa_shape RANDOM_SHAPE = {.B = 2, .T = 300, .H = 6, .G = 2, .d = 16, .block = 16, .stride = 8,
                                       .select = 32, .topn = 5, .window = 70, .n_threads = 2};

/* A second one for the vector paths' edges: n_rep 5 (a block of 4 heads and one
 * more), d = 24 (16 channels in registers, 8 after). */
static const nsa_shape RANDOM_SHAPE_EDGES = {.B = 1, .T = 200, .H = 10, .G = 2, .d = 24, .block = 16, .stride = 16,
                                             .select = 48, .topn = 4, .window = 40, .n_threads = 2};

/* The efficient kernels equal the reference within 1e-5 (1e-4 with a spike), forward and backward.
 * spike > 0: each query's own selection key is spike times its group's first query, so that head's logit
 * of its own key (the last of its row, in a vector loop's tail) stands about 150 above the rest at 200: a
 * softmax shifted by anything less than the row's maximum overflows exp there. */
static int flash_equals_reference(nsa_shape shape, float spike) {
    nsa_case c;
    random_case(&c, shape);
    const int rep = shape.H / shape.G;
    for (int bt = 0; spike > 0 && bt < shape.B * shape.T; bt++)
        for (int g = 0; g < shape.G; g++)
            for (int k = 0; k < shape.d; k++)
                c.in[3][((size_t)bt * shape.G + g) * shape.d + k] =
                    spike * c.in[0][((size_t)bt * shape.H + g * rep) * shape.d + k];
    nsa_run ref, fl;
    run_alloc(&ref, &c, 0);
    run_alloc(&fl, &c, 1);
    run_forward(&ref, &c, c.in, 0);
    run_forward(&fl, &c, c.in, 1);
    run_backward(&ref, &c, 0);
    run_backward(&fl, &c, 1);
    /* logits near 300 carry about 1e-5 of float rounding into the probabilities, kernel and reference alike */
    const double tol = spike > 0 ? 1e-4 : 1e-5;
    int fail = expect_close_rel("flash out", fl.out, ref.out, nsa_saved_floats_out(&c.s), tol, 0);
    double worst = max_rel_error(fl.out, ref.out, nsa_saved_floats_out(&c.s), 0), wg = 0;
    size_t bad = 0;
    for (size_t k = 0; k < nsa_saved_ints_sel(&c.s); k++) bad += fl.sv.sel[k] != ref.sv.sel[k];
    if (bad) { fprintf(stderr, "  %zu selected blocks differ\n", bad); fail = 1; }
    for (int k = 0; k < N_IN; k++) {
        char what[64];
        snprintf(what, sizeof what, "flash d_%s", IN_NAMES[k]);
        double floor = 0;
        if (k == 10)
            for (size_t i = 0; i < c.n[8]; i++) floor = fabs(ref.g[8][i]) > floor ? fabs(ref.g[8][i]) : floor;
        fail |= expect_close_rel(what, fl.g[k], ref.g[k], c.n[k], tol, floor);
        double e = max_rel_error(fl.g[k], ref.g[k], c.n[k], floor);
        wg = e > wg ? e : wg;
    }
    printf("     flash (level %d) vs reference (B %d, T %d, H %d, G %d, d %d%s): out %.2e, worst grad %.2e\n",
           (int)K->isa, shape.B, shape.T, shape.H, shape.G, shape.d, spike > 0 ? ", own keys spiked" : "", worst, wg);
    run_free(&ref);
    run_free(&fl);
    free_case(&c);
    return fail;
}

static int test_flash_equals_reference(void) {
    return flash_equals_reference(RANDOM_SHAPE, 0) | flash_equals_reference(RANDOM_SHAPE_EDGES, 0) |
           flash_equals_reference(RANDOM_SHAPE_EDGES, 200);
}

/* Decoding token by token through the cache equals the full forward. */
static int decode_matches(nsa_case *c) {
    nsa_shape s = c->s;
    nsa_run fl;
    run_alloc(&fl, c, 1);
    run_forward(&fl, c, c->in, 1);
    const int T = s.T, Hd = s.H * s.d, Gd = s.G * s.d;
    float *mem = malloc(nsa_cache_floats(&s, T) * sizeof(float));
    float *scratch = malloc(nsa_decode_scratch_floats(&s, T) * sizeof(float));
    float *out = malloc((size_t)T * Hd * sizeof(float));
    nsa_cache cache;
    nsa_cache_init(&cache, mem, &s, T);
    for (int t = 0; t < T; t++) {
        nsa_inputs x = inputs_of(c->in);
        x.q += (size_t)t * Hd;
        x.k_cmp += (size_t)t * Gd; x.v_cmp += (size_t)t * Gd;
        x.k_slc += (size_t)t * Gd; x.v_slc += (size_t)t * Gd;
        x.k_win += (size_t)t * Gd; x.v_win += (size_t)t * Gd;
        x.gate += (size_t)t * s.H * 3;
        K->decode_step(out + (size_t)t * Hd, &cache, &x, &s, scratch);
    }
    char what[64];
    snprintf(what, sizeof what, "decode T %d", T);
    int fail = expect_close_rel(what, out, fl.out, (size_t)T * Hd, 1e-5, 0);
    printf("     decode vs full forward (T %d, H %d, G %d, l %d s %d l' %d n %d w %d): %.2e, %d blocks\n", T, s.H,
           s.G, s.block, s.stride, s.select, s.topn, s.window, max_rel_error(out, fl.out, (size_t)T * Hd, 0),
           cache.n_blocks);
    free(mem); free(scratch); free(out);
    run_free(&fl);
    return fail;
}

static int test_decode_equals_forward(void) {
    nsa_shape s = RANDOM_SHAPE;
    s.B = 1;
    nsa_case c;
    random_case(&c, s);
    int fail = decode_matches(&c);
    free_case(&c);
    for (int k = 0; k < N_CASES; k++) {
        if (load_case(&c, CASES[k])) return 1;
        fail |= decode_matches(&c);
        free_case(&c);
    }
    return fail;
}

/* sum(out * dout) in double, by the efficient forward. */
static double loss_of(nsa_run *r, const nsa_case *c, float *const *in) {
    run_forward(r, c, in, 1);
    double acc = 0;
    for (size_t i = 0; i < nsa_saved_floats_out(&c->s); i++) acc += (double)r->out[i] * c->dout[i];
    return acc;
}

/* Central differences of the efficient kernels' loss on entries of cmp_k
 * (Wck), cmp_pe_k, gate and k_slc against their analytic gradients. */
static int test_finite_differences(void) {
    nsa_case c;
    if (load_case(&c, "gqa_rep2")) return 1;
    nsa_run r;
    run_alloc(&r, &c, 1);
    run_forward(&r, &c, c.in, 1);
    run_backward(&r, &c, 1);
    const int which[] = {8, 10, 7, 3};
    const float h = 2e-3f;
    int fail = 0;
    for (int w = 0; w < 4; w++) {
        const int k = which[w];
        double gmax = 0, worst = 0;
        int skipped = 0;
        for (size_t i = 0; i < c.n[k]; i++) gmax = fabs(r.g[k][i]) > gmax ? fabs(r.g[k][i]) : gmax;
        if (k == 10) /* zero gradient: measured against Wck's */
            for (size_t i = 0; i < c.n[8]; i++) gmax = fabs(r.g[8][i]) > gmax ? fabs(r.g[8][i]) : gmax;
        nsa_run p;
        run_alloc(&p, &c, 1);
        for (int e = 0; e < 12; e++) {
            const size_t i = (size_t)e * 7919 % c.n[k];
            const float keep = c.in[k][i];
            c.in[k][i] = keep + h;
            const double lp = loss_of(&p, &c, c.in);
            int flipped = memcmp(p.sv.sel, r.sv.sel, nsa_saved_ints_sel(&c.s) * sizeof(int)) != 0;
            c.in[k][i] = keep - h;
            const double lm = loss_of(&p, &c, c.in);
            flipped |= memcmp(p.sv.sel, r.sv.sel, nsa_saved_ints_sel(&c.s) * sizeof(int)) != 0;
            c.in[k][i] = keep;
            if (flipped) { /* the choice is a step function: no derivative across a change */
                skipped++;
                continue;
            }
            const double fd = (lp - lm) / (2.0 * h), err = fabs(fd - r.g[k][i]) / gmax;
            worst = err > worst ? err : worst;
        }
        run_free(&p);
        printf("     finite differences d_%s: worst |fd - grad| / max|grad| %.2e (max|grad| %.3g; %d of 12 "
               "entries skipped: the step changed the block choice)\n", IN_NAMES[k], worst, gmax, skipped);
        if (skipped > 3) { fprintf(stderr, "  d_%s: %d entries changed the choice\n", IN_NAMES[k], skipped); fail = 1; }
        if (!(worst < 1e-2)) { fprintf(stderr, "  d_%s: finite differences off by %.2e\n", IN_NAMES[k], worst); fail = 1; }
    }
    run_free(&r);
    free_case(&c);
    return fail;
}

/* Every level this CPU runs, below the chosen one: flash == reference and decode == forward. */
static int test_every_level(void) {
    const nsa_kernels *chosen = K;
    int fail = 0;
    for (int level = 0; level < (int)chosen->isa; level++) {
        if (!da_isa_supported((da_isa)level)) continue;
        K = nsa_kernels_of((da_isa)level);
        if (K->isa != (da_isa)level) continue;
        fail |= test_flash_equals_reference() | test_decode_equals_forward();
    }
    K = chosen;
    return fail;
}

/* nsa_choose_blocks against a plain oracle: the forced blocks (0, t/l' - 1, t/l'), then the others best
 * first by a full scan per pick (higher importance, ties to the lower index), ascending. The importance
 * takes few distinct values, so that ties are common, or many, some flat rows, where every block ties, and some
 * rising ones; up to 1,023 blocks, more than the choice's buffer holds at once. */
static int test_choose_blocks(void) {
    const nsa_shape s = {.T = 4096, .select = 4, .topn = 9};
    float imp[4096 / 4 + 1];
    int chosen[9], want[9], fail = 0;
    uint32_t rng = 12345;
    for (int trial = 0; trial < 400; trial++) {
        const int t = trial * 97 % s.T, cur = t / s.select, levels = trial % 5 == 0 ? 1 : 1 + trial % 7;
        for (int j = 0; j <= cur; j++) {
            rng = rng * 1664525u + 1013904223u;
            imp[j] = trial % 4 == 3 ? (float)(rng >> 8) /* distinct */
                                    : (float)((rng >> 8 & 0xffff) % (uint32_t)levels) * 0.125f +
                                          (trial % 3 == 1 ? 0.01f * j : 0.0f);
        }
        int n = 0, taken[4096 / 4 + 1] = {0};
        const int forced[3] = {0, cur - 1, cur};
        for (int f = 0; f < 3; f++)
            if (forced[f] >= 0 && !taken[forced[f]]) taken[forced[f]] = 1, n++;
        while (n < s.topn) {
            int best = -1;
            for (int j = 1; j < cur - 1; j++)
                if (!taken[j] && (best < 0 || imp[j] > imp[best])) best = j;
            if (best < 0) break;
            taken[best] = 1, n++;
        }
        int k = 0;
        for (int j = 0; j <= cur; j++)
            if (taken[j]) want[k++] = j;
        for (; k < s.topn; k++) want[k] = -1;
        const int got = nsa_choose_blocks(chosen, imp, t, &s);
        if (got != n || memcmp(chosen, want, sizeof want)) {
            if (!fail) fprintf(stderr, "  choose t %d (levels %d): count %d, want %d\n", t, levels, got, n);
            fail = 1;
        }
    }
    return fail;
}

int main(void) {
    da_exec x = da_exec_default();
    K = nsa_kernels_of(x.isa);
    printf("NSA kernels of level %d\n", (int)K->isa);
    RUN(test_choose_blocks);
    RUN(test_reference_kernel);
    RUN(test_flash_kernel);
    RUN(test_flash_equals_reference);
    RUN(test_decode_equals_forward);
    RUN(test_finite_differences);
    RUN(test_every_level);
    TH_SUMMARY();
}
