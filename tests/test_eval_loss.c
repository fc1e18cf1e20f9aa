/* eval loss on hand-built cases with a known answer: a model whose logits are
 * all zero scores exactly ln(vocab); the train loop's logged validation loss
 * is the same number eval loss computes for the same windows. */
#include <unistd.h>

#include "diffattn.h"
#include "attn/attention.h"
#include "eval/quant_logits.h"
#include "harness.h"

static char corpus[64]; /* /tmp/da_eval_loss_corpus_<pid>.txt: suites of two builds may run at once */

static int write_corpus(void) {
    FILE *fp = fopen(corpus, "w");
    if (!fp) return -1;
    for (int i = 0; i < 400; i++) fprintf(fp, "line %d: the quick brown fox jumps over the lazy dog.\n", i);
    return fclose(fp);
}

static void tiny(da_config *c) {
    da_config_default(c);
    c->dim = 32, c->n_layers = 1, c->n_heads = 2, c->n_kv_heads = 2, c->ffn_hidden = 64, c->max_seq_len = 32;
}

static int test_zero_logits_give_log_vocab(void) {
    da_config c;
    tiny(&c);
    da_model m;
    CHECK(!da_model_create(&m, &c).code); /* every weight 0: the LM head outputs 0 for every token */
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, 0.1f, 32).code);
    da_eval_loss_result r;
    CHECK(!da_eval_loss(&m, &d, 32, 10, 4, DA_ATTN_FLASH, &r).code);
    printf("     zero model: loss %.7f, ln(256) = %.7f\n", r.loss, log(256.0));
    CHECK(fabs(r.loss - log(256.0)) < 1e-5);
    CHECK(fabs(r.ppl - 256.0) < 1e-2);
    da_text_data_free(&d);
    da_model_free(&m);
    return 0;
}

static int test_matches_train_loop(void) {
    da_config c;
    tiny(&c);
    da_train_config tc;
    da_train_config_default(&tc);
    tc.batch = 4, tc.seq = 32, tc.steps = 6, tc.warmup = 1, tc.eval_every = 0, tc.eval_batches = 3, tc.log_every = 1;
    char dir[] = "/tmp/da_eval_runXXXXXX";
    CHECK(mkdtemp(dir));
    CHECK(!da_train(&c, &tc, corpus, dir, 0, NULL).code);
    char p[128];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    FILE *fp = fopen(p, "r");
    char line[512], last[512] = "";
    while (fgets(line, sizeof line, fp)) strcpy(last, line);
    fclose(fp);
    const char *v = strstr(last, "\"val_loss\":");
    CHECK(v);
    double logged = atof(v + 11);
    da_model m;
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(!da_model_load(&m, p).code);
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, tc.val_fraction, 32).code);
    da_eval_loss_result r;
    CHECK(!da_eval_loss(&m, &d, 32, (long)tc.eval_batches * tc.batch, tc.batch, DA_ATTN_FLASH, &r).code);
    printf("     train loop logged %.6g, eval loss %.6g\n", logged, r.loss);
    CHECK(fabs(r.loss - logged) <= 1e-5 * fabs(logged));
    da_text_data_free(&d);
    da_model_free(&m);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    if (system(p)) {}
    return 0;
}

/* Through the engine, exact logits give the training forward's loss;
 * quantizing them to 16 bits changes nothing measurable; 2 bits does change
 * the loss (so the quantizer is really applied). */
static int quant_case(da_arch arch) {
    da_config c;
    tiny(&c);
    c.arch = arch;
    if (arch != DA_ARCH_DIFF) c.n_heads = c.n_kv_heads = 4;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 3);
    da_rng r;
    da_rng_seed(&r, 4);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] += 0.2f * da_rng_normal(&r); /* peaked attention */
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, 0.1f, 32).code);
    da_eval_loss_result exact, flash, q16, q3;
    da_engine *e = NULL;
    CHECK(!da_engine_from_model(&e, &m).code);
    CHECK(!da_eval_loss_logit_bits(e, &d, 32, 8, 0, &exact).code);
    CHECK(!da_eval_loss(&m, &d, 32, 8, 4, DA_ATTN_FLASH, &flash).code);
    CHECK(!da_eval_loss_logit_bits(e, &d, 32, 8, 16, &q16).code);
    CHECK(!da_eval_loss_logit_bits(e, &d, 32, 8, 2, &q3).code);
    da_engine_free(e);
    printf("     %s: exact %.6f (flash %.6f), 16-bit %.6f, 2-bit %.6f\n", da_arch_name(arch), exact.loss, flash.loss,
           q16.loss, q3.loss);
    CHECK(fabs(flash.loss - exact.loss) < 1e-5 * exact.loss);
    CHECK(fabs(q16.loss - exact.loss) < 1e-5 * exact.loss);
    /* 2-bit logits: -amax, 0 or amax (diff2 at this size: 5e-4; 16 bits: under 1e-6) */
    CHECK(fabs(q3.loss - exact.loss) > 2e-4 * exact.loss);
    da_text_data_free(&d);
    da_model_free(&m);
    return 0;
}

static int test_quant_logits_diff(void) { return quant_case(DA_ARCH_DIFF); }
static int test_quant_logits_softmax(void) { return quant_case(DA_ARCH_SOFTMAX); }
static int test_quant_logits_diff2(void) { return quant_case(DA_ARCH_DIFF2); }

/* One row rounded by hand: amax 1.2 at 3 bits gives 3 levels of 0.4. */
static int test_quant_row_by_hand(void) {
    float a[5] = {1.2f, -0.5f, 0.21f, 0.19f, 0.0f};
    const float want[5] = {1.2f, -0.4f, 0.4f, 0.0f, 0.0f}; /* -1.25 -> -1, 0.525 -> 1, 0.475 -> 0 */
    da_quantize_logit_row(a, 5, 3);
    for (int i = 0; i < 5; i++) CHECK(fabsf(a[i] - want[i]) < 1e-6f);
    float z[3] = {0, 0, 0}; /* an all-zero row stays zero (no division by zero) */
    da_quantize_logit_row(z, 3, 4);
    for (int i = 0; i < 3; i++) CHECK(z[i] == 0.0f);
    return 0;
}

/* Token-by-token decoding quantizes the same way: 16 bits match the exact
 * logits, 2 bits do not. */
static int decode_case(da_arch arch) {
    da_config cfg;
    tiny(&cfg);
    cfg.arch = arch;
    cfg.n_heads = cfg.n_kv_heads = arch == DA_ARCH_DIFF ? 2 : 4;
    da_model m;
    CHECK(!da_model_create(&m, &cfg).code);
    da_model_init(&m, 5);
    da_rng r;
    da_rng_seed(&r, 6);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] += 0.2f * da_rng_normal(&r);
    const int n = 24, V = cfg.vocab_size;
    float *out[3];
    const int bits[3] = {0, 16, 2};
    for (int b = 0; b < 3; b++) {
        out[b] = malloc((size_t)n * V * sizeof(float));
        da_engine *e = NULL;
        da_session *s = NULL;
        da_session_opts o = da_session_opts_default();
        o.logit_bits = bits[b];
        o.max_T = n;
        CHECK(!da_engine_from_model(&e, &m).code && !da_session_create(&s, e, &o).code);
        for (int t = 0; t < n; t++) {
            const float *lg;
            const int tok = (t * 37 + 11) % V;
            CHECK(!da_session_feed(s, &tok, 1, 0, &lg).code);
            memcpy(out[b] + (size_t)t * V, lg, (size_t)V * sizeof(float));
        }
        da_session_free(s);
        da_engine_free(e);
    }
    size_t at;
    double scale, e16 = rel_error_at(out[1], out[0], (size_t)n * V, 1e-6, &at, &scale);
    double e2 = rel_error_at(out[2], out[0], (size_t)n * V, 1e-6, &at, &scale);
    printf("     %s decode: 16-bit rel. error %.2e, 2-bit %.2e\n", da_arch_name(arch), e16, e2);
    CHECK(e16 < 2e-4 && e2 > 1e-3);
    for (int b = 0; b < 3; b++) free(out[b]);
    da_model_free(&m);
    return 0;
}

static int test_quant_decode_diff(void) { return decode_case(DA_ARCH_DIFF); }
static int test_quant_decode_softmax(void) { return decode_case(DA_ARCH_SOFTMAX); }
static int test_quant_decode_diff2(void) { return decode_case(DA_ARCH_DIFF2); }

int main(void) {
    snprintf(corpus, sizeof corpus, "/tmp/da_eval_loss_corpus_%ld.txt", (long)getpid());
    if (write_corpus()) return 1;
    RUN(test_zero_logits_give_log_vocab);
    RUN(test_matches_train_loop);
    RUN(test_quant_logits_diff);
    RUN(test_quant_logits_softmax);
    RUN(test_quant_logits_diff2);
    RUN(test_quant_row_by_hand);
    RUN(test_quant_decode_diff);
    RUN(test_quant_decode_softmax);
    RUN(test_quant_decode_diff2);
    unlink(corpus);
    TH_SUMMARY();
}
