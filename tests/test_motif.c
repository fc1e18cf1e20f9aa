/* The Motif architecture (--arch gda, --mlp polynorm) against the float64
 * PyTorch reference written from the public ports, tools/motif_reference.py:
 * its fixtures tests/fixtures/motif_*.* hold a Hugging Face-layout model
 * mapped to diffattn's tensors, the reference's logits, and the gradients of
 * the mean loss in diffattn's tensors. Logits within 1e-5 and gradients
 * within 1e-4 (relative to the largest), with both attention kernels; and
 * the inference engine's token-by-token decode equal to the training forward. The same for tiny Hugging Face
 * folders in Motif's published layout (tests/fixtures/hf_motif_*), loaded through the family table. */
#include "data/ids_file.h"
#include "diffattn.h"
#include "harness.h"
#include "io/npy.h"
#include "io/safetensors.h"

#define LOGIT_TOL 1e-5
#define GRAD_TOL 1e-4

typedef struct {
    da_model m;
    int *ids, T;
} fixture;

/* name: tests/fixtures/NAME.model.safetensors, or the Hugging Face folder tests/fixtures/NAME/ for an hf_ name */
static int fixture_open(fixture *f, const char *name) {
    char path[256];
    if (!strncmp(name, "hf_", 3)) snprintf(path, sizeof path, "tests/fixtures/%s", name);
    else snprintf(path, sizeof path, "tests/fixtures/%s.model.safetensors", name);
    da_status st = da_model_load(&f->m, path);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    snprintf(path, sizeof path, "tests/fixtures/%s.ids.txt", name);
    st = da_ids_read(path, f->m.cfg.vocab_size, &f->ids, &f->T);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); da_model_free(&f->m); return 1; }
    return 0;
}

static void fixture_close(fixture *f) {
    free(f->ids);
    da_model_free(&f->m);
}

static int check_parity(const char *name, da_attn_kernel kernel) {
    fixture f;
    if (fixture_open(&f, name)) return 1;
    da_model *m = &f.m;
    const int T = f.T, V = m->cfg.vocab_size;
    char path[256], what[200];
    int fail = 0;
    da_acts *a;
    CHECK(!da_acts_create_ex(&a, &m->cfg, 1, T, kernel, NULL).code);

    float *want;
    int ndim;
    int64_t shape[8];
    snprintf(path, sizeof path, "tests/fixtures/%s.logits.npy", name);
    CHECK(!da_npy_read_f32(path, &want, &ndim, shape).code);
    CHECK(ndim == 2 && shape[0] == T && shape[1] == V);
    da_forward(m, a, f.ids, NULL, 1, T);
    snprintf(what, sizeof what, "%s logits", name);
    fail |= expect_close_rel(what, da_acts_logits(a), want, (size_t)T * V, LOGIT_TOL, 0);
    const double logit_err = max_rel_error(da_acts_logits(a), want, (size_t)T * V, 0);
    free(want);

    da_st_file g;
    snprintf(path, sizeof path, "tests/fixtures/%s.grads.safetensors", name);
    CHECK(!da_st_open(&g, path).code);
    CHECK(!da_model_alloc_grads(m).code);
    da_model_zero_grads(m);
    const float loss = da_forward(m, a, f.ids, f.ids + 1, 1, T - 1);
    da_backward(m, a);
    float ref_loss;
    const da_st_tensor *lt = da_st_find(&g, "loss");
    CHECK(lt && !da_st_read_f32(&g, lt, &ref_loss).code);
    if (!(fabsf(loss - ref_loss) <= 1e-5f * fabsf(ref_loss))) {
        fprintf(stderr, "  %s loss %.7f, reference %.7f\n", name, loss, ref_loss);
        fail = 1;
    }
    double grad_err = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        const da_st_tensor *gt = da_st_find(&g, t->name);
        if (!gt || gt->numel != t->numel) {
            fprintf(stderr, "  %s: reference lacks gradient %s\n", name, t->name);
            fail = 1;
            continue;
        }
        float *ref = malloc(t->numel * sizeof(float));
        CHECK(ref && !da_st_read_f32(&g, gt, ref).code);
        snprintf(what, sizeof what, "%s grad %s", name, t->name);
        fail |= expect_close_rel(what, m->grads + t->offset, ref, t->numel, GRAD_TOL, 0);
        const double e = max_rel_error(m->grads + t->offset, ref, t->numel, 0);
        grad_err = e > grad_err ? e : grad_err;
        free(ref);
    }
    printf("     %s (%s): loss %.6f (reference %.6f), logits rel err %.2e, worst grad rel err %.2e\n", name,
           kernel == DA_ATTN_FLASH ? "flash" : "reference", loss, ref_loss, logit_err, grad_err);
    da_st_close(&g);
    da_acts_free(a);
    fixture_close(&f);
    return fail;
}

/* The engine (da_engine_from_model: the variant's decode_head over the KV cache, and the PolyNorm gate)
 * fed one token at a time, and the whole sequence as one prompt, against da_forward's logits. */
static int check_decode(const char *name) {
    fixture f;
    if (fixture_open(&f, name)) return 1;
    const int T = f.T, V = f.m.cfg.vocab_size;
    da_acts *a;
    CHECK(!da_acts_create(&a, &f.m.cfg, 1, T).code);
    da_forward(&f.m, a, f.ids, NULL, 1, T);
    da_engine *e;
    da_session *s;
    CHECK(!da_engine_from_model(&e, &f.m).code);
    CHECK(!da_session_create(&s, e, NULL).code);
    float *got = malloc((size_t)T * V * sizeof(float));
    CHECK(got);
    for (int t = 0; t < T; t++) {
        const float *lg;
        CHECK(!da_session_feed(s, &f.ids[t], 1, 0, &lg).code);
        memcpy(got + (size_t)t * V, lg, (size_t)V * sizeof(float));
    }
    char what[160];
    snprintf(what, sizeof what, "%s decode", name);
    int fail = expect_close_rel(what, got, da_acts_logits(a), (size_t)T * V, LOGIT_TOL, 0);
    const double step_err = max_rel_error(got, da_acts_logits(a), (size_t)T * V, 0);
    /* the prompt path: all T tokens in one call (the variant's forward with B = 1) */
    const float *all;
    da_session_reset(s);
    CHECK(!da_session_feed(s, f.ids, T, 1, &all).code);
    snprintf(what, sizeof what, "%s prompt", name);
    fail |= expect_close_rel(what, all, da_acts_logits(a), (size_t)T * V, LOGIT_TOL, 0);
    printf("     %s: engine against the training forward, rel err %.2e token by token, %.2e as one prompt\n", name,
           step_err, max_rel_error(all, da_acts_logits(a), (size_t)T * V, 0));
    free(got);
    da_session_free(s);
    da_engine_free(e);
    da_acts_free(a);
    fixture_close(&f);
    return fail;
}

static int check_fixture(const char *name) {
    return check_parity(name, DA_ATTN_FLASH) | check_parity(name, DA_ATTN_REFERENCE) | check_decode(name);
}

/* GDA, 8 signal heads in 2 groups over 2 K/V pairs, PolyNorm */
static int test_motif_gda(void) { return check_fixture("motif_gda"); }
/* GDA over one shared K/V pair (GQA), tied embeddings, attn_rms_norm_eps 1e-6 (v_proj rescaled) */
static int test_motif_gda_gqa(void) { return check_fixture("motif_gda_gqa"); }
/* Motif-2.6B's DIFF V1 (no num_noise_heads: G = H/2), GQA, 3 layers of the lambda_init schedule */
static int test_motif_v1(void) { return check_fixture("motif_v1"); }
/* GDA with the SwiGLU MLP */
static int test_motif_gda_silu(void) { return check_fixture("motif_gda_silu"); }

/* Motif's Hugging Face folders as published (tools/motif_reference.py FOLDERS), through the hf-motif row of the
 * family table: the float64 reference's logits of the weights as stored, and its gradients in diffattn's tensors.
 * GDA over 2 K/V pairs, untied, BF16 in 2 shards */
static int test_hf_motif_gda(void) { return check_fixture("hf_motif_gda"); }
/* GDA over one K/V pair, tied, F32 in 3 shards, attn_rms_norm_eps 1e-6 (v_proj rescaled) */
static int test_hf_motif_gda_gqa(void) { return check_fixture("hf_motif_gda_gqa"); }
/* Motif-2.6B's DIFF V1 (no num_noise_heads), GQA, untied, F32 */
static int test_hf_motif_v1(void) { return check_fixture("hf_motif_v1"); }
/* DIFF V1, a K/V pair per head pair, tied, BF16 */
static int test_hf_motif_v1_tied(void) { return check_fixture("hf_motif_v1_tied"); }

/* --kv-heads left 0: one K/V pair per group (Motif-2-12.7B's 8 groups over 8 pairs); a pair count that does
 * not divide the groups is refused naming the field. */
static int test_gda_kv_heads(void) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_GDA;
    c.dim = 64, c.n_heads = 8, c.gda_noise_heads = 2, c.n_kv_heads = 0, c.head_dim = 4;
    CHECK(!da_config_from_diff_heads(&c).code);
    int fail = c.n_kv_heads != 2;
    if (fail) fprintf(stderr, "  default n_kv_heads %d, expected 2\n", c.n_kv_heads);
    c.n_kv_heads = 4;
    da_status st = da_config_validate(&c);
    if (!st.code || !strstr(st.msg, "n_kv_heads")) {
        fprintf(stderr, "  4 pairs over 2 groups: \"%s\"\n", st.msg);
        fail = 1;
    }
    return fail;
}

int main(void) {
    RUN(test_gda_kv_heads);
    RUN(test_motif_gda);
    RUN(test_motif_gda_gqa);
    RUN(test_motif_v1);
    RUN(test_motif_gda_silu);
    RUN(test_hf_motif_gda);
    RUN(test_hf_motif_gda_gqa);
    RUN(test_hf_motif_v1);
    RUN(test_hf_motif_v1_tied);
    TH_SUMMARY();
}
