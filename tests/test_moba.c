/* MoBA (--arch moba, src/attn/moba*.c) beyond the parity fixtures (test_parity:
 * moba_mha, moba_gqa_rep2, moba_short against tools/reference.py): the flash
 * kernel against the reference kernel, decoding against the training
 * forward, a softmax model's weights run as MoBA with every block chosen, the
 * block choice's rule, and the configuration's checks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/moba.h"
#include "diffattn.h"
#include "harness.h"

/* A random model far from uniform attention: blocks of 8, k = 3, T = 61
 * (not a multiple of 8), so that most queries choose among more than k blocks. */
static int make_model(da_model *m, da_arch arch, int heads, int kv_heads, int T, int block, int topk, int seed) {
    da_config c;
    da_config_default(&c);
    c.arch = arch, c.dim = 64, c.n_layers = 2, c.n_heads = heads, c.n_kv_heads = kv_heads;
    c.vocab_size = 64, c.ffn_hidden = da_default_ffn_hidden(64), c.max_seq_len = T;
    c.moba_block = block, c.moba_topk = topk;
    CHECK(!da_model_create(m, &c).code);
    da_model_init(m, (uint64_t)seed);
    da_rng rng;
    da_rng_seed(&rng, (uint64_t)seed + 1);
    for (size_t k = 0; k < m->n_params; k++) m->params[k] += 0.2f * da_rng_normal(&rng);
    return 0;
}

static void make_tokens(int *tok, int n, int V, int seed) {
    da_rng rng;
    da_rng_seed(&rng, (uint64_t)seed);
    for (int i = 0; i < n; i++) tok[i] = (int)(da_rng_next(&rng) % (uint64_t)V);
}

/* Logits, loss and every gradient of one kernel: logits (T, V) and grads (n_params) copied out. */
static int run_kernel(da_model *m, da_attn_kernel kernel, const int *tok, int T, float *logits, float *grads) {
    da_acts *a;
    CHECK(!da_acts_create_ex(&a, &m->cfg, 1, T, kernel, NULL).code);
    da_forward(m, a, tok, NULL, 1, T);
    memcpy(logits, da_acts_logits(a), (size_t)T * m->cfg.vocab_size * sizeof(float));
    if (grads) {
        CHECK(m->grads || !da_model_alloc_grads(m).code);
        da_model_zero_grads(m);
        da_forward(m, a, tok, tok + 1, 1, T - 1);
        da_backward(m, a);
        memcpy(grads, m->grads, m->n_params * sizeof(float));
    }
    da_acts_free(a);
    return 0;
}

/* The flash kernel (chosen keys only, probabilities recomputed from the log-sum-exp) equals
 * the reference kernel (dense maps): logits and every gradient within 1e-5. */
static int check_flash_equals_reference(int heads, int kv_heads, const char *what) {
    const int T = 61;
    da_model m;
    if (make_model(&m, DA_ARCH_MOBA, heads, kv_heads, T, 8, 3, 31)) return 1;
    const size_t nl = (size_t)T * m.cfg.vocab_size;
    int tok[61];
    make_tokens(tok, T, m.cfg.vocab_size, 5);
    float *lf = malloc(nl * sizeof(float)), *lr = malloc(nl * sizeof(float));
    float *gf = malloc(m.n_params * sizeof(float)), *gr = malloc(m.n_params * sizeof(float));
    CHECK(lf && lr && gf && gr);
    int rc = run_kernel(&m, DA_ATTN_FLASH, tok, T, lf, gf) | run_kernel(&m, DA_ATTN_REFERENCE, tok, T, lr, gr);
    char w[96];
    snprintf(w, sizeof w, "%s logits, flash vs reference", what);
    if (!rc) rc |= expect_close_rel(w, lf, lr, nl, 1e-5, 0);
    snprintf(w, sizeof w, "%s gradients, flash vs reference", what);
    if (!rc) rc |= expect_close_rel(w, gf, gr, m.n_params, 1e-5, 0);
    printf("     %s: logits %.2e, gradients %.2e (flash vs reference, rel)\n", what, max_rel_error(lf, lr, nl, 0),
           max_rel_error(gf, gr, m.n_params, 0));
    free(lf), free(lr), free(gf), free(gr);
    da_model_free(&m);
    return rc;
}

static int test_flash_equals_reference_mha(void) { return check_flash_equals_reference(2, 2, "moba mha"); }
static int test_flash_equals_reference_gqa(void) { return check_flash_equals_reference(2, 1, "moba gqa n_rep 2"); }

/* The engine's decoding (moba's own cache, one token per call) and its
 * T-token prompt call against da_forward, position by position. */
static int check_decode(int heads, int kv_heads, const char *what) {
    const int T = 61;
    da_model m;
    if (make_model(&m, DA_ARCH_MOBA, heads, kv_heads, T, 8, 3, 41)) return 1;
    const int V = m.cfg.vocab_size;
    int tok[61];
    make_tokens(tok, T, V, 6);
    float *want = malloc((size_t)T * V * sizeof(float)), *got = malloc((size_t)T * V * sizeof(float));
    CHECK(want && got && !run_kernel(&m, DA_ATTN_FLASH, tok, T, want, NULL));
    da_engine *e;
    da_session *s;
    da_session_opts o = da_session_opts_default();
    o.max_T = T;
    CHECK(!da_engine_from_model(&e, &m).code && !da_session_create(&s, e, &o).code);
    int rc = 0;
    for (int t = 0; t < T && !rc; t++) {
        const float *lg = NULL;
        da_status st = da_session_feed(s, &tok[t], 1, 0, &lg);
        if (st.code) {
            fprintf(stderr, "  da_session_feed at %d: %s\n", t, st.msg);
            rc = 1;
        } else {
            memcpy(got + (size_t)t * V, lg, (size_t)V * sizeof(float));
        }
    }
    char w[96];
    snprintf(w, sizeof w, "%s, token by token vs forward", what);
    if (!rc) rc = expect_close_rel(w, got, want, (size_t)T * V, 1e-4, 1e-6);
    const double e1 = max_rel_error(got, want, (size_t)T * V, 1e-6);
    const float *batch = NULL;
    da_session_reset(s);
    CHECK(!da_session_feed(s, tok, T, 1, &batch).code);
    snprintf(w, sizeof w, "%s, one prompt call vs forward", what);
    if (!rc) rc = expect_close_rel(w, batch, want, (size_t)T * V, 1e-4, 1e-6);
    printf("     %s: decode vs forward %.2e, prompt vs forward %.2e (rel)\n", what, e1,
           max_rel_error(batch, want, (size_t)T * V, 1e-6));
    da_session_free(s), da_engine_free(e);
    free(want), free(got);
    da_model_free(&m);
    return rc;
}

static int test_decode_mha(void) { return check_decode(2, 2, "moba decode mha"); }
static int test_decode_gqa(void) { return check_decode(2, 1, "moba decode gqa n_rep 2"); }

/* A softmax model's weights, run as MoBA with k B >= T (every block chosen),
 * give softmax's logits within 1e-5; with k B < T they differ (the test can fail). */
static int test_softmax_weights_run_as_moba(void) {
    const int T = 61;
    da_model sm, mb;
    if (make_model(&sm, DA_ARCH_SOFTMAX, 2, 1, T, 8, 3, 51)) return 1;
    int rc = 0;
    const size_t nl = (size_t)T * sm.cfg.vocab_size;
    int tok[61];
    make_tokens(tok, T, sm.cfg.vocab_size, 7);
    float *ls = malloc(nl * sizeof(float)), *lm = malloc(nl * sizeof(float));
    CHECK(ls && lm && !run_kernel(&sm, DA_ATTN_FLASH, tok, T, ls, NULL));
    const int blocks[][2] = {{8, 8}, {16, 4}, {64, 1}, {8, 3}};
    for (int i = 0; i < 4; i++) {
        da_config c = sm.cfg;
        c.arch = DA_ARCH_MOBA, c.moba_block = blocks[i][0], c.moba_topk = blocks[i][1];
        CHECK(!da_model_create(&mb, &c).code && mb.n_params == sm.n_params);
        for (int k = 0; k < mb.n_tensors; k++) CHECK(!strcmp(mb.tensors[k].name, sm.tensors[k].name));
        memcpy(mb.params, sm.params, sm.n_params * sizeof(float));
        CHECK(!run_kernel(&mb, DA_ATTN_FLASH, tok, T, lm, NULL));
        const double e = max_rel_error(lm, ls, nl, 0);
        const int every = c.moba_block * c.moba_topk >= T;
        printf("     B %d, k %d: MoBA vs softmax logits %.2e (rel)%s\n", c.moba_block, c.moba_topk, e,
               every ? "" : ", blocks left out");
        if (every ? e > 1e-5 : e < 1e-3) {
            fprintf(stderr, "  B %d k %d: MoBA vs softmax %.2e, expected %s\n", c.moba_block, c.moba_topk, e,
                    every ? "<= 1e-5" : "a difference");
            rc = 1;
        }
        da_model_free(&mb);
    }
    free(ls), free(lm);
    da_model_free(&sm);
    return rc;
}

/* The choice: the own block and the k - 1 best earlier ones, ties to the lower index, ascending. */
static int test_choose(void) {
    const float score[6] = {0.5f, 2.0f, 0.5f, 2.0f, -1.0f, 0.5f};
    int sel[4];
    CHECK(moba_choose(sel, score, 6, 4) == 4 && sel[0] == 0 && sel[1] == 1 && sel[2] == 3 && sel[3] == 6);
    CHECK(moba_choose(sel, score, 6, 2) == 2 && sel[0] == 1 && sel[1] == 6);
    CHECK(moba_choose(sel, score, 2, 4) == 3 && sel[0] == 0 && sel[1] == 1 && sel[2] == 2 && sel[3] == -1);
    CHECK(moba_choose(sel, score, 6, 1) == 1 && sel[0] == 6);
    CHECK(moba_choose(sel, score, 0, 3) == 1 && sel[0] == 0 && sel[1] == -1);
    return 0;
}

/* moba_block and moba_topk below 1 are refused, the message naming the field. */
static int test_config_checks(void) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_MOBA;
    CHECK(!da_config_validate(&c).code && c.moba_block == 64 && c.moba_topk == 4);
    c.moba_block = 0;
    da_status st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "moba_block"));
    c.moba_block = 64, c.moba_topk = 0;
    st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "moba_topk"));
    c.moba_topk = 4, c.window = 16;
    st = da_config_validate(&c);
    CHECK(st.code && strstr(st.msg, "window"));
    return 0;
}

int main(void) {
    RUN(test_choose);
    RUN(test_config_checks);
    RUN(test_flash_equals_reference_mha);
    RUN(test_flash_equals_reference_gqa);
    RUN(test_decode_mha);
    RUN(test_decode_gqa);
    RUN(test_softmax_weights_run_as_moba);
    TH_SUMMARY();
}
