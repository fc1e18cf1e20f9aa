/* Validation loss with quantized attention logits (quant_logits.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/train.h"
#include "data/text_data.h"
#include "eval/quant_logits.h"
#include "train/window_loss.h"

/* The engine as a scorer: each window from an empty KV cache, the loss summed per token. */
typedef struct {
    da_session *s;
    int V;
} engine_scorer;

static da_status engine_score(void *ctx, long w0, const int *tokens, const int *targets, int b, int T, double *nll,
                              double *sum, double *count) {
    (void)w0;
    engine_scorer *es = ctx;
    for (int i = 0; i < b; i++) {
        const float *logits;
        da_session_reset(es->s);
        da_status st = da_session_feed(es->s, tokens + (size_t)i * T, T, 1, &logits);
        if (st.code) return st;
        for (int t = 0; t < T; t++) {
            const int y = targets[(size_t)i * T + t];
            double *out = nll + (size_t)i * T + t;
            *out = y >= 0 ? da_row_nll(logits + (size_t)t * es->V, es->V, y) : 0.0;
            if (y >= 0) *sum += *out, *count += 1;
        }
    }
    return da_ok();
}

da_status da_eval_loss_logit_bits(const da_engine *e, const da_text_data *data, int T, long n_windows, int logit_bits,
                                  da_eval_loss_result *r) {
    const da_config *mc = da_engine_config(e);
    const int V = mc->vocab_size;
    if (n_windows < 1) return da_errorf("windows = %ld must be positive", n_windows);
    if (T < 1 || T > mc->max_seq_len) return da_errorf("seq %d is out of range (1..max_seq_len=%d)", T, mc->max_seq_len);
    if (data->vocab_size > V)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size, V);
    if (data->n_val < (size_t)T + 1)
        return da_errorf("the validation split holds %zu tokens, too few for windows of %d", data->n_val, T);
    engine_scorer es = {NULL, V};
    da_session_opts o = da_session_opts_default();
    o.logit_bits = logit_bits;
    o.max_T = T;
    da_status st = da_session_create(&es.s, e, &o);
    const da_window_set set = da_val_windows(data);
    const da_window_scorer sc = {&es, engine_score};
    double loss;
    if (!st.code && !(st = da_window_loss(&set, n_windows, T, 1, &sc, NULL, &loss)).code) {
        r->loss = loss;
        r->ppl = exp(r->loss);
        r->windows = n_windows;
        r->tokens = n_windows * T;
    }
    da_session_free(es.s);
    return st;
}

da_status da_needle_fit(da_needle_config *c, int max_seq_len, int needles_given) {
    c->n_contexts = 1;
    c->contexts[0] = max_seq_len - 64 < 1024 ? max_seq_len - 64 : 1024;
    if (c->contexts[0] < 128)
        return da_errorf("max_seq_len %d is too short for needle prompts (at least 192 positions): skip the needle "
                         "evaluation",
                         max_seq_len);
    const int fit = c->contexts[0] / 50 > 0 ? c->contexts[0] / 50 : 1;
    if (!needles_given && c->needles > fit) {
        c->needles = fit;
        if (c->queries > fit) c->queries = fit;
    }
    return da_ok();
}

da_status da_eval_quant_logits(const da_engine *e, const da_text_data *data, const da_quant_logits_config *c,
                               da_quant_logits_result *r) {
    memset(r, 0, sizeof *r);
    if (c->n_bits < 0 || c->n_bits > DA_QL_MAX_BITS)
        return da_errorf("quant-logits: n_bits = %d is out of range (0..%d)", c->n_bits, DA_QL_MAX_BITS);
    r->seq = c->seq ? c->seq : da_engine_config(e)->max_seq_len;
    r->needles = c->needles;
    da_status st = da_ok();
    if (c->needle && c->needles.contexts[0] <= 0)
        st = da_needle_fit(&r->needles, da_engine_config(e)->max_seq_len, c->needles_given);
    const int total = (c->n_bits + 1) * (c->needle ? 2 : 1);
    int done = 0;
    char what[64];
    da_eval_loss_result l;
    for (int i = -1; i < c->n_bits && !st.code; i++) {
        const int bits = i < 0 ? 0 : c->bits[i];
        snprintf(what, sizeof what, bits ? "loss, %d-bit logits" : "loss, exact logits", bits);
        if (c->on_progress) c->on_progress(c->progress_ctx, what, done++, total);
        if (!(st = da_eval_loss_logit_bits(e, data, r->seq, c->windows, bits, &l)).code)
            *(i < 0 ? &r->exact_loss : &r->loss[i]) = l.loss;
    }
    da_needle_result nr;
    for (int i = -1; i < c->n_bits && !st.code && c->needle; i++) {
        const int bits = i < 0 ? 0 : c->bits[i];
        snprintf(what, sizeof what, bits ? "needles, %d-bit logits" : "needles, exact logits", bits);
        if (c->on_progress) c->on_progress(c->progress_ctx, what, done++, total);
        if (!(st = da_needle_eval_engine(e, &r->needles, bits, &nr)).code)
            *(i < 0 ? &r->needle_exact : &r->needle[i]) = nr.overall;
    }
    if (!st.code && c->on_progress) c->on_progress(c->progress_ctx, "done", done, total);
    return st;
}
