/* Attention shares on needle prompts, on hand-built models whose attention
 * is known in closed form:
 *   - queries of zero: every map is uniform over positions 0..t;
 *   - a "digit pointer": embeddings carry a constant feature and a digit
 *     feature, the first map's query reads the constant one and its key the
 *     digit one (in RoPE's slowest pair, with a theta so large that position
 *     does not matter), with a logit gap of 30 or more: the map is uniform
 *     over the digits seen so far. With one needle the only digits before
 *     the question are the answer span.
 * DIFF2's lambda per token and head comes from lambda_proj reading both
 * features, so it differs between heads and between digit and other rows.
 * The expected shares are then computed here, row by row, in double. */
#include "diffattn.h"
#include "eval/needle_attention.h"
#include "harness.h"

enum { UNIFORM, DIGITS };

/* DIFF2's lambda_proj: row h reads the constant feature with lam_w0(h) and the digit one with LAM_W1. */
static float lam_w0(int h) { return 0.05f * (float)(h + 1) - 0.4f; }
#define LAM_W1 0.15f

/* sigmoid(lambda) of head h at a token with (digit = 1) or without the digit feature, from the
 * attention norm's input (1, digit, 0, ...) of 64 channels, gain 1. */
static double lam_of(int h, int digit) {
    const double rstd = 1.0 / sqrt((1.0 + digit) / 64.0 + 1e-5);
    return 1.0 / (1.0 + exp(-((double)lam_w0(h) * rstd + (double)LAM_W1 * digit * rstd)));
}

static int build(da_model *m, da_arch arch, int kind) {
    da_config cfg;
    da_config_default(&cfg);
    cfg.arch = arch;
    cfg.dim = 64, cfg.n_layers = 2, cfg.ffn_hidden = 64, cfg.max_seq_len = 800;
    cfg.rope_theta = 1e12f; /* the slowest pair turns by 1e-12 rad per position: no position effect */
    cfg.n_heads = cfg.n_kv_heads = arch == DA_ARCH_DIFF ? 2 : 4;
    const int diff2 = arch == DA_ARCH_DIFF2;
    if (da_model_create(m, &cfg).code) return 1;
    const int C = cfg.dim, d = da_head_dim(&cfg);
    for (int v = 0; v < cfg.vocab_size; v++) {
        m->w.tok_embeddings[(size_t)v * C + 0] = 1.0f;
        m->w.tok_embeddings[(size_t)v * C + 1] = v >= '0' && v <= '9';
    }
    for (int i = 0; i < C; i++) m->w.norm[i] = 1.0f;
    for (int l = 0; l < cfg.n_layers; l++) {
        da_layer_weights *w = &m->w.layers[l];
        for (int i = 0; i < C; i++) w->attention_norm[i] = w->ffn_norm[i] = 1.0f;
        if (arch == DA_ARCH_DIFF)
            for (int i = 0; i < 2 * d; i++) w->subln[i] = 1.0f;
        if (diff2)
            for (int h = 0; h < cfg.n_heads; h++) {
                w->lambda_proj[(size_t)h * C + 0] = lam_w0(h);
                w->lambda_proj[(size_t)h * C + 1] = LAM_W1;
            }
        if (kind != DIGITS) continue;
        /* wo and the FFN stay zero: every layer sees the embeddings */
        const int maps = da_arch_maps(arch);
        for (int h = 0; h < cfg.n_heads; h++) {
            const int row = h * maps * d + d - 2; /* the first map's (sub-)head, slowest RoPE pair */
            const int krow = (arch == DA_ARCH_DIFF ? 2 * h * d : h * d) + d - 2; /* KV group h (no GQA here) */
            w->wq[(size_t)row * C + 0] = 2.0f;
            w->wk[(size_t)krow * C + 1] = 2.0f;
        }
    }
    return 0;
}

/* The expected (answer, noise) shares of one prompt, mean over rows, heads and
 * layers, for a map per kind: A1 uniform or on digits, A2 uniform. */
static void expected(const da_model *m, int kind, const da_needle_attention_map *mp, double *ans, double *noise) {
    const int n_ctx = mp->cols, span = mp->span_end - mp->span_begin;
    const int n_noise = n_ctx - (mp->needle_end - mp->needle_begin);
    *ans = *noise = 0;
    const int diff2 = m->cfg.arch == DA_ARCH_DIFF2, heads = diff2 ? m->cfg.n_heads : 1;
    for (int l = 0; l < m->cfg.n_layers; l++)
        for (int h = 0; h < heads; h++)
        for (int r = 0; r < mp->rows; r++) {
            /* row 0 is the space before the answer, rows 1.. its digits */
            const double lambda = diff2 ? lam_of(h, r > 0) : m->cfg.arch == DA_ARCH_DIFF ? da_model_lambda(m, l) : 0.0;
            const int t = mp->first_row + r, n = t + 1, digits = span + r; /* answer digits seen so far: r */
            const double u = 1.0 / n;
            double on, off; /* A1 on a digit (or on any position when uniform), elsewhere */
            if (kind == UNIFORM) on = off = u;
            else on = 1.0 / digits, off = 0;
            const double p_on = on - lambda * u, p_off = off - lambda * u;
            const int n_on = kind == UNIFORM ? n : digits;
            const double mass = n_on * fabs(p_on) + (n - n_on) * fabs(p_off);
            *ans += span * p_on / mass;
            *noise += n_noise * (kind == UNIFORM ? p_on : p_off) / mass;
        }
    *ans /= m->cfg.n_layers * heads * mp->rows;
    *noise /= m->cfg.n_layers * heads * mp->rows;
}

static int check_case(da_arch arch, int kind) {
    da_model m;
    CHECK(!build(&m, arch, kind));
    da_needle_config c;
    da_needle_config_default(&c);
    c.needles = 1, c.queries = 1, c.samples = 2, c.n_depths = 3, c.depths[0] = 0, c.depths[1] = 50, c.depths[2] = 100;
    c.contexts[0] = 600;
    da_needle_attention_result r;
    CHECK(!da_eval_needle_attention(&m, &c, &r).code);
    CHECK(r.prompts == 6);
    double worst = 0, want_all_a = 0, want_all_z = 0;
    for (int di = 0; di < 3; di++) {
        double want_a = 0, want_z = 0;
        for (int s = 0; s < 2; s++) {
            da_needle_attention_map mp;
            CHECK(!da_needle_attention_map_of(&m, &c, 0, di, s, &mp).code);
            double a, z;
            expected(&m, kind, &mp, &a, &z);
            want_a += a / 2, want_z += z / 2;
            free(mp.map);
        }
        worst = fmax(worst, fmax(fabs(r.answer[0][di] - want_a), fabs(r.noise[0][di] - want_z)));
        want_all_a += want_a / 3, want_all_z += want_z / 3;
    }
    worst = fmax(worst, fmax(fabs(r.answer_all - want_all_a), fabs(r.noise_all - want_all_z)));
    printf("     %s %s: answer %.4f (want %.4f), noise %.4f (want %.4f), worst error %.2e\n", da_arch_name(arch),
           kind == UNIFORM ? "uniform" : "digits", r.answer_all, want_all_a, r.noise_all, want_all_z, worst);
    CHECK(worst < 1e-4);
    CHECK(r.digits_all == 0.0); /* the LM head is zero: every argmax is token 0, never a digit */
    if (kind == DIGITS) CHECK(r.answer_all > 0.5); /* attention made to point at the needle finds it */
    da_model_free(&m);
    return 0;
}

static int test_uniform_diff(void) { return check_case(DA_ARCH_DIFF, UNIFORM); }
static int test_uniform_softmax(void) { return check_case(DA_ARCH_SOFTMAX, UNIFORM); }
static int test_digits_diff(void) { return check_case(DA_ARCH_DIFF, DIGITS); }
static int test_digits_softmax(void) { return check_case(DA_ARCH_SOFTMAX, DIGITS); }
static int test_uniform_diff2(void) { return check_case(DA_ARCH_DIFF2, UNIFORM); }
static int test_digits_diff2(void) { return check_case(DA_ARCH_DIFF2, DIGITS); }

/* The map of one prompt: the softmax digit pointer puts 1/(7 + r) on each
 * answer digit in row r, and nothing elsewhere in the context. */
static int test_map_rows(void) {
    da_model m;
    CHECK(!build(&m, DA_ARCH_SOFTMAX, DIGITS));
    da_needle_config c;
    da_needle_config_default(&c);
    c.needles = 1, c.queries = 1, c.contexts[0] = 400;
    da_needle_attention_map mp;
    CHECK(!da_needle_attention_map_of(&m, &c, 0, 2, 0, &mp).code);
    CHECK(mp.rows == 7 && mp.cols > 300 && mp.span_end - mp.span_begin == 7);
    CHECK(mp.needle_begin < mp.span_begin && mp.span_end < mp.needle_end);
    for (int r = 0; r < mp.rows; r++)
        for (int j = 0; j < mp.cols; j++) {
            const double want = j >= mp.span_begin && j < mp.span_end ? 1.0 / (7 + r) : 0.0;
            CHECK(fabs(mp.map[(size_t)r * mp.cols + j] - want) < 1e-5);
        }
    free(mp.map);
    /* a prompt longer than the model is an error that says so */
    c.contexts[0] = 4000;
    da_status st = da_needle_attention_map_of(&m, &c, 0, 0, 0, &mp);
    CHECK(st.code && strstr(st.msg, "max_seq_len"));
    da_model_free(&m);
    return 0;
}

int main(void) {
    RUN(test_uniform_diff);
    RUN(test_uniform_softmax);
    RUN(test_digits_diff);
    RUN(test_digits_softmax);
    RUN(test_uniform_diff2);
    RUN(test_digits_diff2);
    RUN(test_map_rows);
    TH_SUMMARY();
}
