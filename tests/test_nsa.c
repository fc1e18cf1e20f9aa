/* NSA's kernels (src/attn/nsa*.c) against the float64 PyTorch reference
 * (tools/nsa_reference.py, fixtures tests/fixtures/nsa_kernel_*.safetensors
 * from tools/make_nsa_fixtures.py), against each other, token-by-token
 * decoding against the full forward, and finite differences. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/nsa.h"
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
    if (flash) nsa_flash_forward(r->out, &x, &r->sv, &c->s, r->scratch);
    else nsa_reference_forward(r->out, &x, &r->sv, &c->s);
}

static void run_backward(nsa_run *r, const nsa_case *c, int flash) {
    nsa_inputs x = inputs_of(c->in);
    nsa_grads g = {r->g[0], r->g[1], r->g[2], r->g[3], r->g[4],  r->g[5],
                   r->g[6], r->g[7], r->g[8], r->g[9], r->g[10], r->g[11]};
    if (flash) nsa_flash_backward(&g, c->dout, &x, &r->sv, &c->s, r->scratch);
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

int main(void) {
    RUN(test_reference_kernel);
    RUN(test_flash_kernel);
    TH_SUMMARY();
}
