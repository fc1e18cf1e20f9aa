/* The model options of the paper's Table 6 ablations (head_norm, lambda_init):
 * the schema's rules, the tensors each value gives, the flash kernel against
 * the reference one (logits and gradients), decoding against recomputation,
 * and the checkpoint, GGUF and Hugging Face paths. Parity with the PyTorch
 * reference is test_parity's (the diff_head_norm_off, diff_lambda_init_*,
 * diff_off_lambda_05 and softmax_head_norm_on fixtures). */
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diffattn.h"
#include "experiments/compare.h"
#include "study/arch_column.h"
#include "harness.h"
#include "infer/engine.h"
#include "io/gguf_config.h"
#include "quant/quantize.h"

#define SEQ 20

typedef struct {
    da_arch arch;
    da_head_norm head_norm;
    float lambda_init;
    const char *what;
} option_case;

static const option_case CASES[] = {
    {DA_ARCH_DIFF, DA_HEAD_NORM_DEFAULT, 0.0f, "diff (defaults)"},
    {DA_ARCH_DIFF, DA_HEAD_NORM_OFF, 0.0f, "diff head_norm off"},
    {DA_ARCH_DIFF, DA_HEAD_NORM_DEFAULT, 0.8f, "diff lambda_init 0.8"},
    {DA_ARCH_DIFF, DA_HEAD_NORM_DEFAULT, 0.5f, "diff lambda_init 0.5"},
    {DA_ARCH_DIFF, DA_HEAD_NORM_OFF, 0.5f, "diff head_norm off, lambda_init 0.5"},
    {DA_ARCH_SOFTMAX, DA_HEAD_NORM_ON, 0.0f, "softmax head_norm on"},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

static char tmpdir[256];
static const char *tpath(const char *name) {
    static char buf[2][512];
    static int k;
    k = (k + 1) % 2;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

/* --heads 2 (DIFF heads) over 2 KV groups of the variant's own heads: GQA for softmax. */
static da_status case_config(const option_case *oc, da_config *c) {
    da_config_default(c);
    c->arch = oc->arch;
    c->dim = 32;
    c->n_layers = 2;
    c->n_heads = 2;
    c->n_kv_heads = 1;
    c->vocab_size = 48;
    c->max_seq_len = 32;
    c->head_norm = oc->head_norm;
    c->lambda_init = oc->lambda_init;
    return da_config_from_diff_heads(c);
}

/* Weights far from the init: matrices of std ~0.2, gains and lambda vectors spread. */
static int make_model(da_model *m, const option_case *oc) {
    da_config c;
    da_status st = case_config(oc, &c);
    if (!st.code) st = da_model_create(m, &c);
    if (st.code) {
        fprintf(stderr, "  %s: %s\n", oc->what, st.msg);
        return 1;
    }
    da_model_init(m, 31);
    da_rng rng;
    da_rng_seed(&rng, 77);
    for (int i = 0; i < m->n_tensors; i++) {
        const da_tensor *t = &m->tensors[i];
        float *p = m->params + t->offset;
        for (size_t k = 0; k < t->numel; k++) {
            if (t->ndim == 2) p[k] *= 10.0f;
            else if (strstr(t->name, "lambda_")) p[k] = 0.4f * da_rng_normal(&rng);
            else p[k] = 1.0f + 0.3f * da_rng_normal(&rng);
        }
    }
    return 0;
}

static void make_tokens(int *tok, int n, int V) {
    da_rng rng;
    da_rng_seed(&rng, 5);
    for (int i = 0; i < n; i++) tok[i] = (int)(da_rng_next(&rng) % (uint64_t)V);
}

/* Which head-norm gain the layer has: its length, or 0 when it has none. */
static int subln_len(const da_model *m) {
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, "layers.0.attn.subln.weight")) return (int)m->tensors[i].numel;
    return 0;
}

static int test_schema(void) {
    da_config c;
    /* the variant's own value given explicitly is the default: the same file */
    option_case on = {DA_ARCH_DIFF, DA_HEAD_NORM_ON, 0.0f, "diff on"};
    CHECK(!case_config(&on, &c).code && c.head_norm == DA_HEAD_NORM_DEFAULT && da_config_head_norm(&c));
    option_case off = {DA_ARCH_SOFTMAX, DA_HEAD_NORM_OFF, 0.0f, "softmax off"};
    CHECK(!case_config(&off, &c).code && c.head_norm == DA_HEAD_NORM_DEFAULT && !da_config_head_norm(&c));
    /* options a variant lacks are refused, naming the field */
    option_case bad[] = {{DA_ARCH_DIFF2, DA_HEAD_NORM_ON, 0.0f, "head_norm"},
                         {DA_ARCH_DIFF2, DA_HEAD_NORM_OFF, 0.0f, "head_norm"},
                         {DA_ARCH_SOFTMAX, DA_HEAD_NORM_DEFAULT, 0.5f, "lambda_init"},
                         {DA_ARCH_DIFF, DA_HEAD_NORM_DEFAULT, 1.0f, "lambda_init"},
                         {DA_ARCH_DIFF, DA_HEAD_NORM_DEFAULT, -0.5f, "lambda_init"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        da_status st = case_config(&bad[i], &c);
        if (!st.code || strncmp(st.msg, bad[i].what, strlen(bad[i].what))) {
            fprintf(stderr, "  case %zu: \"%s\" does not refuse %s\n", i, st.msg, bad[i].what);
            return 1;
        }
    }
    /* lambda_init reads and writes "depth" for the schedule, numbers as floats */
    const da_field *f = da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "lambda_init");
    CHECK(f);
    da_config_default(&c);
    char buf[32];
    da_field_format(f, &c, buf, sizeof buf);
    CHECK(!strcmp(buf, "depth"));
    CHECK(!da_field_parse(f, &c, "0.5").code && c.lambda_init == 0.5f);
    da_field_format(f, &c, buf, sizeof buf);
    CHECK(!strcmp(buf, "0.5"));
    CHECK(!da_field_parse(f, &c, "depth").code && c.lambda_init == 0.0f);
    CHECK(da_field_parse(f, &c, "deep").code);
    /* the layers' lambda_init */
    c.lambda_init = 0.5f;
    CHECK(da_config_lambda_init(&c, 0) == 0.5f && da_config_lambda_init(&c, 3) == 0.5f);
    c.lambda_init = 0.0f;
    CHECK(da_config_lambda_init(&c, 3) == da_lambda_init(3));
    return 0;
}

/* head_norm off: no subln; softmax on: one d-wide subln; parameter counts follow. */
static int test_tensors(void) {
    da_model m[N_CASES];
    for (int i = 0; i < N_CASES; i++) CHECK(!make_model(&m[i], &CASES[i]));
    const int d = da_head_dim(&m[0].cfg);
    CHECK(subln_len(&m[0]) == 2 * d && subln_len(&m[1]) == 0 && subln_len(&m[2]) == 2 * d);
    CHECK(subln_len(&m[4]) == 0 && subln_len(&m[5]) == m[5].cfg.dim / m[5].cfg.n_heads);
    const size_t per_layer = (size_t)2 * d;
    CHECK(m[0].n_params - m[1].n_params == (size_t)m[0].cfg.n_layers * per_layer);
    CHECK(m[0].n_params == m[2].n_params);
    option_case plain = {DA_ARCH_SOFTMAX, DA_HEAD_NORM_DEFAULT, 0.0f, "softmax"};
    da_model s;
    CHECK(!make_model(&s, &plain));
    CHECK(subln_len(&s) == 0 && m[5].n_params - s.n_params == (size_t)s.cfg.n_layers * (s.cfg.dim / s.cfg.n_heads));
    da_model_free(&s);
    for (int i = 0; i < N_CASES; i++) da_model_free(&m[i]);
    return 0;
}

/* Logits and every gradient of the flash kernel against the reference kernel. */
static int check_flash_reference(const option_case *oc) {
    da_model m;
    if (make_model(&m, oc)) return 1;
    int tok[SEQ];
    make_tokens(tok, SEQ, m.cfg.vocab_size);
    const size_t n_logits = (size_t)(SEQ - 1) * m.cfg.vocab_size;
    float *logits[2], *grads[2], loss[2];
    CHECK(!da_model_alloc_grads(&m).code);
    for (int k = 0; k < 2; k++) {
        da_acts *a;
        CHECK(!da_acts_create_ex(&a, &m.cfg, 1, SEQ - 1, k ? DA_ATTN_REFERENCE : DA_ATTN_FLASH, NULL).code);
        da_model_zero_grads(&m);
        loss[k] = da_forward(&m, a, tok, tok + 1, 1, SEQ - 1);
        da_backward(&m, a);
        logits[k] = malloc(n_logits * sizeof(float));
        grads[k] = malloc(m.n_params * sizeof(float));
        CHECK(logits[k] && grads[k]);
        memcpy(logits[k], da_acts_logits(a), n_logits * sizeof(float));
        memcpy(grads[k], m.grads, m.n_params * sizeof(float));
        da_acts_free(a);
    }
    char what[160];
    snprintf(what, sizeof what, "%s: flash vs reference logits", oc->what);
    int fail = expect_close_rel(what, logits[0], logits[1], n_logits, 1e-5, 0);
    for (int i = 0; i < m.n_tensors; i++) {
        const da_tensor *t = &m.tensors[i];
        snprintf(what, sizeof what, "%s: flash vs reference grad %s", oc->what, t->name);
        fail |= expect_close_rel(what, grads[0] + t->offset, grads[1] + t->offset, t->numel, 1e-4, 0);
    }
    printf("     %s: loss flash %.6f, reference %.6f\n", oc->what, loss[0], loss[1]);
    for (int k = 0; k < 2; k++) free(logits[k]), free(grads[k]);
    da_model_free(&m);
    return fail;
}

/* The engine's token-by-token decode and its one-call prompt against da_forward. */
static int check_decode(const option_case *oc) {
    da_model m;
    if (make_model(&m, oc)) return 1;
    const int V = m.cfg.vocab_size;
    int tok[SEQ];
    make_tokens(tok, SEQ, V);
    da_acts *a;
    CHECK(!da_acts_create(&a, &m.cfg, 1, SEQ).code);
    da_forward(&m, a, tok, NULL, 1, SEQ);
    const float *ref = da_acts_logits(a);
    da_engine *e;
    da_session *s;
    CHECK(!da_engine_from_model(&e, &m).code);
    da_session_opts o = da_session_opts_default();
    o.max_T = SEQ;
    CHECK(!da_session_create(&s, e, &o).code);
    float *got = malloc((size_t)SEQ * V * sizeof(float));
    CHECK(got);
    for (int t = 0; t < SEQ; t++) {
        const float *lg;
        CHECK(!da_session_feed(s, &tok[t], 1, 0, &lg).code);
        memcpy(got + (size_t)t * V, lg, (size_t)V * sizeof(float));
    }
    char what[160];
    snprintf(what, sizeof what, "%s: decode vs forward", oc->what);
    int fail = expect_close_rel(what, got, ref, (size_t)SEQ * V, 1e-4, 1e-6);
    const float *batch;
    da_session_reset(s);
    CHECK(!da_session_feed(s, tok, SEQ, 1, &batch).code);
    snprintf(what, sizeof what, "%s: prompt vs forward", oc->what);
    fail |= expect_close_rel(what, batch, ref, (size_t)SEQ * V, 1e-4, 1e-6);
    free(got);
    da_session_free(s);
    da_engine_free(e);
    da_acts_free(a);
    da_model_free(&m);
    return fail;
}

static int test_flash_equals_reference(void) {
    int fail = 0;
    for (int i = 0; i < N_CASES; i++) fail |= check_flash_reference(&CASES[i]);
    return fail;
}

static int test_decode_equals_recompute(void) {
    int fail = 0;
    for (int i = 0; i < N_CASES; i++) fail |= check_decode(&CASES[i]);
    return fail;
}

/* The file holds the key exactly when the option is not the default. */
static int file_has(const char *path, const char *needle) {
    size_t n;
    unsigned char *b = th_read_file(path, &n);
    if (!b) return -1;
    int found = 0;
    for (size_t i = 0; !found && i + strlen(needle) <= n; i++) found = !memcmp(b + i, needle, strlen(needle));
    free(b);
    return found;
}

/* Checkpoint and GGUF round trips; Hugging Face export refuses what its classes cannot express. */
static int test_files(void) {
    for (int i = 0; i < N_CASES; i++) {
        const option_case *oc = &CASES[i];
        da_model m, r;
        CHECK(!make_model(&m, oc));
        CHECK(!da_model_save(&m, tpath("m.safetensors")).code);
        CHECK(!da_model_load(&r, tpath("m.safetensors")).code);
        CHECK(!memcmp(&r.cfg, &m.cfg, sizeof m.cfg) && r.n_params == m.n_params);
        CHECK(!memcmp(r.params, m.params, m.n_params * sizeof(float)));
        CHECK(file_has(tpath("m.safetensors"), "\"head_norm\"") == (oc->head_norm != DA_HEAD_NORM_DEFAULT));
        CHECK(file_has(tpath("m.safetensors"), "\"lambda_init\"") == (oc->lambda_init > 0.0f));
        da_model_free(&r);

        da_engine q, g;
        da_quantize_types o = {DA_QT_Q8_0, -1, 1};
        CHECK(!da_engine_quantize(&q, &m, &o).code);
        CHECK(!da_engine_save_gguf(&q, tpath("m.gguf")).code);
        da_status st = da_engine_load_gguf(&g, tpath("m.gguf"));
        if (st.code) fprintf(stderr, "  %s: %s\n", oc->what, st.msg);
        CHECK(!st.code && !memcmp(&g.cfg, &q.cfg, sizeof g.cfg) && g.n_tensors == q.n_tensors);
        CHECK(file_has(tpath("m.gguf"), "diffattn.attention.head_norm") == (oc->head_norm != DA_HEAD_NORM_DEFAULT));
        char arch[64];
        da_gguf_arch_of(&m.cfg, arch, sizeof arch);
        CHECK(strcmp(arch, "llama") || !da_config_head_norm(&m.cfg)); /* llama.cpp's llama has no head norm */
        da_engine_release(&q);
        da_engine_release(&g);

        st = da_model_export_hf(&m, tpath("hf"));
        const int expressible = i == 0;
        if (expressible != !st.code) {
            fprintf(stderr, "  %s: export %s\n", oc->what, st.code ? st.msg : "accepted");
            return 1;
        }
        if (st.code && !strstr(st.msg, oc->head_norm != DA_HEAD_NORM_DEFAULT ? "head_norm" : "lambda_init")) {
            fprintf(stderr, "  %s: the refusal does not name the option: %s\n", oc->what, st.msg);
            return 1;
        }
        da_model_free(&m);
    }
    return 0;
}

/* compare's columns: one --archs token names an architecture and its options. */
static int test_columns(void) {
    da_task_compare_config c;
    da_task_compare_config_default(&c);
    CHECK(!da_study_parse_archs(&c.shape, "diff,diff:head-norm=off,diff:lambda-init=0.8,diff:lambda-init=0.5,softmax,"
                                   "softmax:head-norm=on,diff2").code);
    CHECK(c.shape.n_archs == 7 && c.shape.archs[1] == DA_ARCH_DIFF && c.shape.archs[5] == DA_ARCH_SOFTMAX && c.shape.archs[6] == DA_ARCH_DIFF2);
    CHECK(!c.shape.columns[0][0] && !strcmp(c.shape.columns[1], "diff:head-norm=off") && !c.shape.columns[4][0]);
    da_config cfg;
    da_config_default(&cfg);
    CHECK(!da_arch_column_apply("diff:lambda-init=0.5:head-norm=off", &cfg).code);
    CHECK(cfg.lambda_init == 0.5f && cfg.head_norm == DA_HEAD_NORM_OFF);
    static const char *const bad[][2] = {
        {"diff2:head-norm=off", "head_norm"},    {"softmax:lambda-init=0.5", "lambda_init"},
        {"diff:lambda-init=2", "lambda_init"},   {"diff:dim=64", "not a column option"},
        {"diff:head-norm", "flag=value"},        {"diff:", "no option"},
        {"diff,diff", "listed twice"},           {"diff:head-norm=off,diff:head-norm=off", "listed twice"},
        {"difff:head-norm=off", "not an architecture"}, {"diff:head-norm=maybe", "expected"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        da_task_compare_config_default(&c);
        da_status st = da_study_parse_archs(&c.shape, bad[i][0]);
        if (!st.code || !strstr(st.msg, bad[i][1])) {
            fprintf(stderr, "  --archs %s: \"%s\" (expected an error with \"%s\")\n", bad[i][0], st.msg, bad[i][1]);
            return 1;
        }
    }
    return 0;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/da_test_ablation_%d", (int)getpid());
    CHECK(!mkdir(tmpdir, 0700) || errno == EEXIST);
    RUN(test_schema);
    RUN(test_tensors);
    RUN(test_flash_equals_reference);
    RUN(test_decode_equals_recompute);
    RUN(test_files);
    RUN(test_columns);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) fprintf(stderr, "  could not remove %s\n", tmpdir);
    TH_SUMMARY();
}
