/* Multi-needle retrieval on hand-built cases: a predictor that attends
 * exactly to the asked needle (an oracle reading the prompt) scores 1.0, one
 * that attends elsewhere scores 0; a transformer whose weights are set by
 * hand so that its attention points at the needle scores 1.0 through the
 * same decoding path as any trained model; prompts have the asked needles at
 * the asked depth and the asked length; a real model runs end to end. */
#include "diffattn.h"
#include "eval/needle.h"
#include "attn/attention.h"
#include "harness.h"

/* Finds the value of the key asked for at the end of the prompt. */
static da_status oracle(void *ctx, const uint8_t *prompt, size_t n, char *out, size_t cap) {
    int wrong = ctx != NULL;
    char *text = malloc(n + 1);
    memcpy(text, prompt, n);
    text[n] = 0;
    const char *ask = strrchr(text, '\n'); /* "\nThe special magic KEY number is:" */
    char key[32] = "";
    sscanf(ask, "\nThe special magic %31s number is:", key);
    char needle[96];
    snprintf(needle, sizeof needle, "The special magic %s number is: ", key);
    const char *hit = strstr(text, needle);
    snprintf(out, cap, " %.7s.", hit ? hit + strlen(needle) : "none");
    if (wrong) out[1] = out[1] == '9' ? '0' : (char)(out[1] + 1); /* one digit off */
    free(text);
    return da_ok();
}

static int test_oracle_scores_one(void) {
    da_needle_config c;
    da_needle_config_default(&c);
    c.n_contexts = 2, c.contexts[0] = 512, c.contexts[1] = 2048, c.samples = 3;
    da_needle_result r;
    CHECK(!da_needle_eval(&c, oracle, NULL, &r).code);
    CHECK(r.asked == 2L * 5 * 3 * 2);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++) CHECK(r.acc[i][j] == 1.0);
    CHECK(r.overall == 1.0);
    int wrong = 1;
    CHECK(!da_needle_eval(&c, oracle, &wrong, &r).code);
    CHECK(r.overall == 0.0);
    return 0;
}

static int test_prompt_layout(void) {
    da_needle_config c;
    da_needle_config_default(&c);
    c.contexts[0] = 4096;
    for (int di = 0; di < c.n_depths; di++) {
        uint8_t *text;
        size_t n;
        char keys[16][16], values[16][16];
        CHECK(!da_needle_prompt(&c, 0, di, 0, &text, &n, keys, values).code);
        char *s = malloc(n + 1);
        memcpy(s, text, n);
        s[n] = 0;
        CHECK(n > 3800 && n < 4200);
        for (int q = 0; q < c.queries; q++) {
            char needle[320];
            snprintf(needle, sizeof needle, "The special magic %.15s number is: %.15s.", keys[q], values[q]);
            const char *hit = strstr(s, needle);
            CHECK(hit);
            double depth = 100.0 * (double)(hit - s) / (double)n;
            if (fabs(depth - c.depths[di]) > 8) {
                fprintf(stderr, "  needle %d at %.1f%%, asked for %d%%\n", q, depth, c.depths[di]);
                return 1;
            }
        }
        for (int i = 0; i < c.needles; i++) /* every needle is there, each key once */
            for (int k = i + 1; k < c.needles; k++) CHECK(strcmp(keys[i], keys[k]));
        free(s);
        free(text);
    }
    return 0;
}

static int test_model_runs(void) {
    da_config cfg;
    da_config_default(&cfg);
    cfg.dim = 32, cfg.n_layers = 1, cfg.n_heads = 2, cfg.n_kv_heads = 2, cfg.ffn_hidden = 64, cfg.max_seq_len = 700;
    da_model m;
    CHECK(!da_model_create(&m, &cfg).code);
    da_model_init(&m, 1);
    da_needle_config c;
    da_needle_config_default(&c);
    c.contexts[0] = 512, c.samples = 1, c.n_depths = 2;
    da_engine *e = NULL;
    CHECK(!da_engine_from_model(&e, &m).code);
    da_needle_model nm = {e, 10, 0};
    da_needle_result r;
    CHECK(!da_needle_eval(&c, da_needle_predict_model, &nm, &r).code);
    CHECK(r.asked == 4 && r.overall >= 0 && r.overall <= 1);
    /* a prompt longer than the model's context is an error, not a crash */
    c.contexts[0] = 4096;
    da_status st = da_needle_eval(&c, da_needle_predict_model, &nm, &r);
    CHECK(st.code && strstr(st.msg, "max_seq_len"));
    da_engine_free(e);
    da_model_free(&m);
    return 0;
}

/* A two-layer softmax transformer that retrieves by construction (one needle
 * per prompt). Residual stream, C = 512: a constant 1 at dim 0 and one-hot
 * codes of 14 symbols ('0'..'9', ' ', ':', 's', anything else) for the token
 * (dims 1..14), the tokens 1, 2 and 3 back (16.., 32.., 48..) and the answer
 * (64..).
 *   layer 0, heads 0..2: positional heads. q and k read the constant; over
 *     every RoPE pair p, q = A (cos Δω_p, -sin Δω_p) and k = (1, 0), so the
 *     logit is A' sum_p cos(ω_p (t - j - Δ)): a sharp peak at j = t - Δ. They
 *     copy the token code Δ back into its slot.
 *   layer 1, head 0: induction over three tokens. q holds the codes of the
 *     token and the two before it, k the codes of the three tokens before j,
 *     in the first dim of RoPE pairs slow enough to ignore position (theta
 *     1e8), so the logit counts matches. It attends to the digit that
 *     follows the same three tokens in the needle and copies its code into
 *     the answer slot, which the LM head turns into that digit (and into a
 *     space when the slot is empty, as right after "is:").
 * Answering " 1234567" from "...is: 1234567. ... number is:" then only fails
 * if three consecutive tokens repeat inside the value. */
enum { HB_C = 512, HB_D = 128, HB_SYM = 14 };

static int hb_symbol(int byte) {
    if (byte >= '0' && byte <= '9') return byte - '0';
    return byte == ' ' ? 10 : byte == ':' ? 11 : byte == 's' ? 12 : 13;
}

static int build_retriever(da_model *m) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_SOFTMAX, c.dim = HB_C, c.n_layers = 2, c.n_heads = c.n_kv_heads = HB_C / HB_D;
    c.ffn_hidden = 64, c.max_seq_len = 600, c.rope_theta = 1e8f, c.tie_embeddings = 0;
    if (da_model_create(m, &c).code) return 1;
    const int C = HB_C, d = HB_D, half = d / 2;
    for (int b = 0; b < 256; b++) {
        m->w.tok_embeddings[(size_t)b * C] = 1.0f;
        m->w.tok_embeddings[(size_t)b * C + 1 + hb_symbol(b)] = 1.0f; /* every token has norm sqrt(2) */
    }
    for (int i = 0; i < C; i++) m->w.norm[i] = 1.0f;
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < C; i++) m->w.layers[l].attention_norm[i] = m->w.layers[l].ffn_norm[i] = 1.0f;
    /* layer 0: the input is 16 at dim 0 and at the token's code after the norm (rms = sqrt(2/512)) */
    da_layer_weights *w = &m->w.layers[0];
    for (int h = 0; h < 3; h++) {
        const int delta = h + 1;
        for (int p = 0; p < half; p++) {
            const double omega = pow(1e8, -(double)p / (half - 1));
            w->wq[(size_t)(h * d + 2 * p) * C] = (float)(3.0 * cos(delta * omega));
            w->wq[(size_t)(h * d + 2 * p + 1) * C] = (float)(-3.0 * sin(delta * omega));
            w->wk[(size_t)(h * d + 2 * p) * C] = 1.0f;
        }
        for (int i = 0; i < HB_SYM; i++) {
            w->wv[(size_t)(h * d + i) * C + 1 + i] = 1.0f;
            w->wo[(size_t)(16 * delta + i) * C + h * d + i] = 1.0f / 16.0f; /* back to a one-hot of 1 */
        }
    }
    /* layer 1: the input holds five one-hots (norm sqrt(5)): 10.1 each after the norm */
    w = &m->w.layers[1];
    const int first = 2 * 25; /* content in the first dim of RoPE pairs 25.., which turn < 0.35 rad over 500 positions */
    for (int i = 0; i < 13; i++) /* the "anything else" symbol never matches */
        for (int back = 0; back < 3; back++) {
            const int dim = first + 2 * (back * 13 + i);
            w->wq[(size_t)dim * C + (back == 0 ? 1 : 16 * back) + i] = 6.0f; /* token, 1 back, 2 back at t */
            w->wk[(size_t)dim * C + 16 * (back + 1) + i] = 1.0f;               /* 1, 2, 3 back at j */
        }
    for (int i = 0; i < 10; i++) {
        w->wv[(size_t)i * C + 1 + i] = 1.0f;
        w->wo[(size_t)(64 + i) * C + i] = 1.0f;
        m->w.output[(size_t)('0' + i) * C + 64 + i] = 5.0f;
    }
    /* after "is:" no digit is matched yet: a small constant logit for ' ' beats the leakage */
    m->w.output[(size_t)' ' * C] = 0.1f;
    return 0;
}

static int test_hand_built_model_scores_one(void) {
    da_model m;
    CHECK(!build_retriever(&m));
    CHECK(2 * 25 + 2 * (3 * 13) <= HB_D); /* the content dims stay inside head 0 */
    da_needle_config c;
    da_needle_config_default(&c);
    c.needles = 1, c.queries = 1, c.samples = 4, c.n_contexts = 2, c.contexts[0] = 200, c.contexts[1] = 480;
    da_needle_result r;
    CHECK(!da_needle_eval_model(&m, &c, 0, &r).code);
    printf("     hand-built retriever: %.3f over %ld answers\n", r.overall, r.asked);
    CHECK(r.asked == 40 && r.overall == 1.0);
    /* attention logits quantized to 16 bits (prompt and decoding alike) change nothing */
    CHECK(!da_needle_eval_model(&m, &c, 16, &r).code);
    CHECK(r.overall == 1.0);
    /* the same model with its induction head switched off answers nothing */
    memset(m.w.layers[1].wv, 0, (size_t)HB_C * HB_C * sizeof(float));
    CHECK(!da_needle_eval_model(&m, &c, 0, &r).code);
    CHECK(r.overall == 0.0);
    da_model_free(&m);
    return 0;
}

/* The prompt (the question not included) stays within its context for
 * every needle count, so that the question and the answer fit the 64 bytes
 * that compare and quant-logits leave after it: with one needle the filler
 * used to run past it, and a model of max_seq_len 256 refused the prompt. */
static int test_prompt_fits_context(void) {
    const int contexts[] = {128, 192, 448, 1024};
    for (int ci = 0; ci < 4; ci++)
        for (int needles = 1; needles <= 16; needles++) {
            da_needle_config c;
            da_needle_config_default(&c);
            c.needles = needles, c.queries = 1, c.contexts[0] = contexts[ci];
            for (int di = 0; di < c.n_depths; di++)
                for (int s = 0; s < 8; s++) {
                    uint8_t *text;
                    size_t n;
                    char keys[16][16], values[16][16];
                    da_status st = da_needle_prompt(&c, 0, di, s, &text, &n, keys, values);
                    if (st.code) { /* only when the needle sentences alone (44..46 bytes each) overflow */
                        CHECK(needles * 46 > contexts[ci] && strstr(st.msg, "--needles"));
                        continue;
                    }
                    if (n > (size_t)contexts[ci]) {
                        fprintf(stderr, "  N=%d context %d: %zu bytes\n", needles, contexts[ci], n);
                        return 1;
                    }
                    free(text);
                }
        }
    /* end to end: one needle, context seq - 64 on a model of max_seq_len 256 */
    da_config cfg;
    da_config_default(&cfg);
    cfg.dim = 32, cfg.n_layers = 1, cfg.n_heads = 2, cfg.n_kv_heads = 2, cfg.ffn_hidden = 64, cfg.max_seq_len = 256;
    da_model m;
    CHECK(!da_model_create(&m, &cfg).code);
    da_model_init(&m, 1);
    da_needle_config c;
    da_needle_config_default(&c);
    c.contexts[0] = 256 - 64, c.samples = 8, c.queries = 1;
    da_needle_result r;
    for (int needles = 1; needles <= 4; needles++) {
        c.needles = needles;
        da_status st = da_needle_eval_model(&m, &c, 0, &r);
        if (st.code) fprintf(stderr, "  N=%d: %s\n", needles, st.msg);
        CHECK(!st.code && r.asked == 8L * 5);
    }
    c.needles = 16; /* the most needles cannot fit 192 bytes: a clear error, before any model call */
    da_status st = da_needle_eval_model(&m, &c, 0, &r);
    CHECK(st.code && strstr(st.msg, "needle context of 192 bytes"));
    da_model_free(&m);
    return 0;
}

int main(void) {
    RUN(test_oracle_scores_one);
    RUN(test_prompt_layout);
    RUN(test_model_runs);
    RUN(test_prompt_fits_context);
    RUN(test_hand_built_model_scores_one);
    TH_SUMMARY();
}
