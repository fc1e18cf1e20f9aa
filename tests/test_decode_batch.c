/* da_session_decode_batch: several sessions decoded in one pass give each the
 * logits da_session_feed gives it alone: bit for bit with q8_0 weights and
 * integer activations (so greedy output does not depend on the other
 * requests of diffattn serve; DIFF2's f32 lambda projection included), to
 * float-sum order with f32 weights; sessions
 * at different lengths, more than one pass's 15, and the errors. */
#include <unistd.h>

#include "diffattn.h"
#include "diffattn/quant.h"
#include "harness.h"

#define N_SESS 18 /* more than a pass takes: two passes */
#define STEPS 6

static char dir[64];

/* A DIFF model of arch with random weights, saved; *path: its f32 file, *qpath the q8_0 GGUF. */
static int make_files(da_arch arch, char *path, char *qpath) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 2;
    c.n_kv_heads = 1;
    c.vocab_size = 96;
    c.ffn_hidden = da_default_ffn_hidden(c.dim);
    c.max_seq_len = 64;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 11);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] *= 5.0f; /* attention far from uniform */
    snprintf(path, 128, "%s/m%d.safetensors", dir, (int)arch);
    snprintf(qpath, 128, "%s/m%d.q8_0.gguf", dir, (int)arch);
    da_status st = da_model_save(&m, path);
    da_model_free(&m);
    CHECK(!st.code);
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    o.type = "q8_0";
    st = da_quantize_file(path, qpath, &o, NULL);
    if (st.code) fprintf(stderr, "  quantize: %s\n", st.msg);
    CHECK(!st.code);
    return 0;
}

/* N_SESS sessions with prompts of lengths 1.. and STEPS decoding steps, batched and alone; worst rel. error in *worst. */
static int run_pair(const char *path, double *worst) {
    da_engine *e = NULL;
    CHECK(!da_engine_load(&e, path).code);
    const int V = da_engine_config(e)->vocab_size;
    da_session *a[N_SESS], *b[N_SESS], *w = NULL;
    da_session_opts o = da_session_opts_default();
    o.max_T = 48;
    o.max_batch = 32;
    for (int i = 0; i < N_SESS; i++) CHECK(!da_session_create(&a[i], e, &o).code && !da_session_create(&b[i], e, &o).code);
    o.max_T = o.max_batch = 15;
    CHECK(!da_session_create(&w, e, &o).code);
    int toks[N_SESS];
    float *batched = malloc((size_t)N_SESS * V * sizeof(float));
    CHECK(batched);
    for (int i = 0; i < N_SESS; i++) {
        int prompt[32];
        for (int t = 0; t <= i; t++) prompt[t] = (7 * i + 3 * t + 1) % V;
        const float *la = NULL, *lb = NULL;
        CHECK(!da_session_feed(a[i], prompt, i + 1, 0, &la).code && !da_session_feed(b[i], prompt, i + 1, 0, &lb).code);
        toks[i] = (i * 5 + 2) % V;
    }
    *worst = 0;
    for (int s = 0; s < STEPS; s++) {
        CHECK(!da_session_decode_batch(w, a, N_SESS, toks, batched).code);
        for (int i = 0; i < N_SESS; i++) {
            const float *alone = NULL;
            CHECK(!da_session_feed(b[i], &toks[i], 1, 0, &alone).code);
            CHECK(da_session_len(a[i]) == da_session_len(b[i]));
            const double err = rel_error_at(batched + (size_t)i * V, alone, (size_t)V, 1e-6, NULL, NULL);
            *worst = err > *worst ? err : *worst;
            int best = 0; /* the next token: greedy on the batched logits */
            for (int v = 1; v < V; v++) best = batched[(size_t)i * V + v] > batched[(size_t)i * V + best] ? v : best;
            toks[i] = best;
        }
    }
    free(batched);
    for (int i = 0; i < N_SESS; i++) da_session_free(a[i]), da_session_free(b[i]);
    da_session_free(w);
    da_engine_free(e);
    return 0;
}

static int check_arch(da_arch arch, const char *name) {
    char path[128], qpath[128];
    double wq = 1, wf = 1;
    CHECK(!make_files(arch, path, qpath));
    CHECK(!run_pair(qpath, &wq));
    CHECK(!run_pair(path, &wf));
    printf("  %s: q8_0 worst rel. error %.3g (want 0), f32 %.3g (want < 1e-4: sgemm against sgemv)\n", name, wq, wf);
    CHECK(wq == 0);
    CHECK(wf < 1e-4);
    return 0;
}

static int test_batch_diff(void) { return check_arch(DA_ARCH_DIFF, "diff"); }
static int test_batch_softmax(void) { return check_arch(DA_ARCH_SOFTMAX, "softmax"); }
static int test_batch_diff2(void) { return check_arch(DA_ARCH_DIFF2, "diff2"); }

/* A session twice in one call, or a work session too small, is an error that names it. */
static int test_batch_errors(void) {
    char path[128], qpath[128];
    CHECK(!make_files(DA_ARCH_DIFF, path, qpath));
    da_engine *e = NULL;
    CHECK(!da_engine_load(&e, qpath).code);
    da_session_opts o = da_session_opts_default();
    o.max_T = 8;
    o.max_batch = 1;
    da_session *s[3], *w = NULL;
    for (int i = 0; i < 3; i++) CHECK(!da_session_create(&s[i], e, &o).code);
    CHECK(!da_session_create(&w, e, &o).code);
    int toks[3] = {1, 2, 3};
    float logits[3 * 96];
    da_status st = da_session_decode_batch(w, s, 3, toks, logits);
    CHECK(st.code && strstr(st.msg, "max_batch >= 3"));
    da_session_free(w);
    o.max_batch = 3;
    CHECK(!da_session_create(&w, e, &o).code);
    da_session *dup[3] = {s[0], s[1], s[0]};
    st = da_session_decode_batch(w, dup, 3, toks, logits);
    CHECK(st.code && strstr(st.msg, "appears twice"));
    toks[1] = 96;
    st = da_session_decode_batch(w, s, 3, toks, logits);
    CHECK(st.code && strstr(st.msg, "out of range"));
    CHECK(da_session_len(s[0]) == 0); /* nothing was fed */
    for (int i = 0; i < 3; i++) da_session_free(s[i]);
    da_session_free(w);
    da_engine_free(e);
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_batch.XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_batch_diff);
    RUN(test_batch_softmax);
    RUN(test_batch_diff2);
    RUN(test_batch_errors);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    TH_SUMMARY();
}
