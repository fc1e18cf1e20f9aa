/* Grouped differential attention with PolyNorm MLPs (Motif's two forms) in
 * GGUF: the family row's names and keys, export picking it only for that
 * model, the f32 file's logits equal to the model's, the quantized types with
 * PolyNorm's and the lambdas' vectors kept f32, and AWQ exact in f32 for
 * q_proj heights other than dim. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "attn/variant.h"
#include "harness.h"
#include "io/family.h"
#include "io/gguf.h"
#include "quant/calib.h"
#include "quant/quantize.h"
#include "session_logits.h"

static char tmpdir[256];

/* S signal heads in G groups over kv pairs, head_dim 16, PolyNorm; the seeded
 * init with matrices scaled up, PolyNorm's weights and the lambdas off their
 * init, so that every tensor moves the logits. */
static int make_model(da_model *m, int S, int G, int kv, int tie) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_GDA;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = S;
    c.gda_noise_heads = G;
    c.n_kv_heads = kv;
    c.head_dim = 16;
    c.ffn_hidden = 128;
    c.max_seq_len = 64;
    c.tie_embeddings = tie;
    c.mlp = DA_MLP_POLYNORM;
    c.rope_freq = DA_ROPE_FREQ_LLAMA;
    if (da_model_create(m, &c).code) return -1;
    da_model_init(m, 11);
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        const int poly = strstr(t->name, ".poly.") != NULL, lambda = strstr(t->name, "lambda_") != NULL;
        for (size_t k = 0; k < t->numel; k++) {
            if (t->ndim == 2) p[k] *= 3.0f;
            else if (poly) p[k] = 0.2f + 0.1f * (float)(k + 1) * (strstr(t->name, "bias") ? -1.0f : 1.0f);
            else if (lambda) p[k] = 0.3f * sinf(0.7f * (float)k + (float)i);
        }
    }
    return 0;
}

static int ref_logits(da_model *m, const int *tok, int T, float *out) {
    da_acts *a;
    if (da_acts_create(&a, &m->cfg, 1, T).code) return -1;
    da_forward(m, a, tok, NULL, 1, T);
    memcpy(out, da_acts_logits(a), (size_t)T * m->cfg.vocab_size * sizeof(float));
    da_acts_free(a);
    return 0;
}

/* mean over positions of KL(softmax(ref) || softmax(got)) */
static double mean_kl(const float *ref, const float *got, int T, int V) {
    double sum = 0;
    for (int t = 0; t < T; t++) {
        const float *a = ref + (size_t)t * V, *b = got + (size_t)t * V;
        double ma = a[0], mb = b[0], za = 0, zb = 0, kl = 0;
        for (int v = 1; v < V; v++) ma = fmax(ma, a[v]), mb = fmax(mb, b[v]);
        for (int v = 0; v < V; v++) za += exp(a[v] - ma), zb += exp(b[v] - mb);
        for (int v = 0; v < V; v++) {
            const double la = a[v] - ma - log(za), lb = b[v] - mb - log(zb);
            kl += exp(la) * (la - lb);
        }
        sum += kl;
    }
    return sum / T;
}

/* the row's names and keys, both ways, in llama.cpp's style */
static int test_names(void) {
    da_arch a = DA_ARCH_N;
    const da_family *f = da_family_gguf("motif", &a);
    CHECK(f && a == DA_ARCH_GDA && !f->names_native && !f->plain_only);
    static const char *const pairs[][2] = {
        {"layers.2.feed_forward.poly.weight", "blk.2.ffn_act_norm.weight"},
        {"layers.2.feed_forward.poly.bias", "blk.2.ffn_act_norm.bias"},
        {"layers.2.attn.lambda_q1", "blk.2.attn_lambda_q1.weight"},
        {"layers.2.attn.lambda_k2", "blk.2.attn_lambda_k2.weight"},
        {"layers.2.attn.subln.weight", "blk.2.attn_sub_norm.weight"},
        {"layers.2.attn.q_proj.weight", "blk.2.attn_q.weight"},
        {"layers.2.feed_forward.w1.weight", "blk.2.ffn_gate.weight"},
        {"tok_embeddings.weight", "token_embd.weight"},
    };
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        char out[160], back[160];
        CHECK(!da_family_to_file(f, pairs[i][0], out, sizeof out));
        if (strcmp(out, pairs[i][1])) {
            fprintf(stderr, "  %s -> %s, expected %s\n", pairs[i][0], out, pairs[i][1]);
            return 1;
        }
        CHECK(!da_family_from_file(f, out, back, sizeof back) && !strcmp(back, pairs[i][0]));
    }
    char k[128];
    CHECK(!strcmp(da_family_key_of(f, "gda_noise_heads", "motif", k, sizeof k), "motif.attention.noise_head_count"));
    CHECK(!strcmp(da_family_key_of(f, "n_heads", "motif", k, sizeof k), "motif.attention.head_count"));
    /* other GGUF rows have no noise-head key: theirs is diffattn.gda_noise_heads */
    CHECK(!da_family_key_of(da_family_gguf("diffattn-gda", &a), "gda_noise_heads", "diffattn-gda", k, sizeof k));
    return 0;
}

/* export writes "motif" for GDA with PolyNorm only; PolyNorm elsewhere is named in diffattn.mlp, never llama */
static int test_export_rows(void) {
    da_config c;
    char arch[64];
    da_config_default(&c);
    c.arch = DA_ARCH_GDA;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-gda"));
    c.mlp = DA_MLP_POLYNORM;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "motif"));
    c.arch = DA_ARCH_DIFF;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-diff"));
    c.arch = DA_ARCH_SOFTMAX;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-softmax"));
    return 0;
}

static const struct {
    const char *what;
    int S, G, kv, tie;
} FORMS[] = {
    {"grouped, 2 groups of 2, one K/V pair, tied", 4, 2, 1, 1},
    {"V1 (G = S), GQA over 2 pairs, untied", 4, 4, 2, 0},
    {"grouped, 2 groups of 3, 2 pairs, untied", 6, 2, 2, 0},
};
#define N_FORMS ((int)(sizeof FORMS / sizeof FORMS[0]))

/* f32 GGUF: the keys and names in the file, the config back, logits within 1e-5 of da_forward's */
static int test_f32_round_trip(void) {
    enum { T = 24 };
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 53 + 7) % 256;
    char path[300];
    snprintf(path, sizeof path, "%s/f32.gguf", tmpdir);
    for (int k = 0; k < N_FORMS; k++) {
        da_model m;
        CHECK(!make_model(&m, FORMS[k].S, FORMS[k].G, FORMS[k].kv, FORMS[k].tie));
        const size_t n = (size_t)T * m.cfg.vocab_size;
        float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
        CHECK(ref && got && !ref_logits(&m, tok, T, ref));
        CHECK(!da_model_export_gguf(&m, path, "f32").code);
        da_gguf_file f;
        CHECK(!da_gguf_open(&f, path).code);
        const char *arch;
        int64_t v;
        CHECK(!da_gguf_get_str(&f, "general.architecture", &arch).code && !strcmp(arch, "motif"));
        CHECK(!da_gguf_get_int(&f, "motif.attention.noise_head_count", &v).code && v == FORMS[k].G);
        CHECK(!da_gguf_get_int(&f, "motif.attention.head_count", &v).code && v == FORMS[k].S);
        CHECK(!da_gguf_kv_find(&f, "diffattn.gda_noise_heads") && !da_gguf_kv_find(&f, "diffattn.mlp"));
        const da_gguf_tensor *g = da_gguf_tensor_find(&f, "blk.1.ffn_act_norm.weight");
        CHECK(g && g->type == DA_QT_F32 && g->ne[0] == 3);
        CHECK(da_gguf_tensor_find(&f, "blk.1.ffn_act_norm.bias") && da_gguf_tensor_find(&f, "blk.0.attn_sub_norm.weight"));
        da_gguf_close(&f);
        da_engine r;
        da_status st = da_engine_load_gguf(&r, path);
        if (st.code) fprintf(stderr, "  %s\n", st.msg);
        CHECK(!st.code);
        CHECK(r.cfg.arch == DA_ARCH_GDA && r.cfg.mlp == DA_MLP_POLYNORM && r.cfg.gda_noise_heads == FORMS[k].G &&
              r.cfg.n_kv_heads == FORMS[k].kv && r.cfg.tie_embeddings == FORMS[k].tie);
        CHECK(!session_logits(&r, DA_ACTQ_F32, 0, tok, T, got));
        const int rc = expect_close_rel(FORMS[k].what, got, ref, n, 1e-5, 1e-3);
        printf("     %s: f32 GGUF logits max rel error %.2g\n", FORMS[k].what, max_rel_error(got, ref, n, 1e-3));
        da_engine_release(&r);
        free(ref);
        free(got);
        da_model_free(&m);
        CHECK(!rc);
    }
    return 0;
}

/* q8_0, q4_0, q4_K (with the q8_0 fallback for widths off the 256 block) through the file: the vectors stay
 * f32, the logits stay near the f32 model's (q8_0: mean KL printed and bounded) */
static int test_quantized(void) {
    enum { T = 24 };
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 29 + 3) % 256;
    char path[300];
    snprintf(path, sizeof path, "%s/q.gguf", tmpdir);
    const int types[] = {DA_QT_Q8_0, DA_QT_Q4_0, DA_QT_Q4_K};
    const double kl_max[] = {0.002, 0.05, 0.05};
    da_model m;
    CHECK(!make_model(&m, 4, 2, 1, 0));
    const size_t n = (size_t)T * m.cfg.vocab_size;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    CHECK(ref && got && !ref_logits(&m, tok, T, ref));
    int rc = 0;
    for (int k = 0; k < 3 && !rc; k++) {
        da_engine q, r;
        da_quantize_types o = {types[k], -1, 1};
        CHECK(!da_engine_quantize(&q, &m, &o).code);
        CHECK(!da_engine_save_gguf(&q, path).code);
        da_status st = da_engine_load_gguf(&r, path);
        if (st.code) fprintf(stderr, "  %s\n", st.msg);
        CHECK(!st.code);
        /* every tensor comes back in the type it was saved in: the vectors f32, each matrix its own */
        for (int i = 1; i < r.n_tensors; i++) {
            if (!r.t[i].cols || strstr(r.t[i].name, "lambda_") || strstr(r.t[i].name, ".poly.")) CHECK(r.t[i].type == DA_QT_F32);
            if (r.t[i].type != q.t[i].type) {
                fprintf(stderr, "  %s: %s saved, %s loaded\n", r.t[i].name, da_qtype_name(q.t[i].type),
                        da_qtype_name(r.t[i].type));
                return 1;
            }
        }
        CHECK(!session_logits(&r, DA_ACTQ_Q8, 0, tok, T, got));
        const double kl = mean_kl(ref, got, T, m.cfg.vocab_size);
        printf("     %s: mean KL against f32 %.3g\n", da_qtype_name(types[k]), kl);
        rc = !(kl <= kl_max[k]);
        da_engine_release(&q);
        da_engine_release(&r);
    }
    free(ref);
    free(got);
    da_model_free(&m);
    return rc;
}

/* AWQ scales every matrix reading the normed input by s and the norm by 1/s: exact in f32, also where q_proj
 * is (S + G) d and k_proj 2 d per pair tall rather than dim, and for DIFF2's lambda_proj and NSA's gates,
 * which read the same input */
static int awq_exact(da_arch arch) {
    enum { T = 16 };
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 17 + 5) % 256;
    da_model m;
    if (arch == DA_ARCH_GDA) {
        CHECK(!make_model(&m, 6, 2, 2, 0));
    } else {
        da_config c;
        da_config_default(&c);
        c.arch = arch;
        c.dim = 64;
        c.n_layers = 2;
        c.n_heads = 2;
        c.n_kv_heads = 0;
        c.ffn_hidden = 128;
        c.max_seq_len = 64;
        da_status st = da_config_from_diff_heads(&c);
        if (!st.code) st = da_model_create(&m, &c);
        if (st.code) fprintf(stderr, "  %s: %s\n", da_arch_name(arch), st.msg);
        CHECK(!st.code);
        da_model_init(&m, 5);
    }
    const size_t n = (size_t)T * m.cfg.vocab_size;
    float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
    float *alpha = calloc((size_t)DA_N_SITES(&m.cfg), sizeof *alpha);
    CHECK(ref && got && alpha && !ref_logits(&m, tok, T, ref));
    da_qstats st;
    CHECK(!da_qstats_create(&st, &m.cfg).code);
    st.rows = 1;
    const size_t w = st.chan_off[DA_N_SITES(&m.cfg)];
    for (size_t c = 0; c < w; c++) { /* channel magnitudes over two decades, so every alpha gives other scales */
        st.chan[c] = pow(10.0, 2.0 * (double)((c * 7919) % 97) / 96.0);
        st.chan2[c] = st.chan[c] * st.chan[c];
    }
    CHECK(!da_awq_apply(&m, &st, DA_QT_Q4_0, alpha).code);
    CHECK(!ref_logits(&m, tok, T, got));
    const int rc = expect_close_rel(da_arch_name(arch), got, ref, n, 1e-4, 1e-3);
    da_qstats_free(&st);
    free(alpha);
    free(ref);
    free(got);
    da_model_free(&m);
    return rc;
}

static int test_awq_exact(void) {
    const da_arch archs[] = {DA_ARCH_GDA, DA_ARCH_DIFF, DA_ARCH_DIFF2, DA_ARCH_NSA};
    int rc = 0;
    for (int k = 0; k < 4; k++) rc |= awq_exact(archs[k]);
    return rc;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/da_test_gguf_gda_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    if (system(cmd)) return 1;
    RUN(test_names);
    RUN(test_export_rows);
    RUN(test_f32_round_trip);
    RUN(test_quantized);
    RUN(test_awq_exact);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
    TH_SUMMARY();
}
