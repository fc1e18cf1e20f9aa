/* Validation loss with quantized attention logits (quant_logits.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"
#include "eval/quant_logits.h"

/* -log softmax(row)[target], in double. */
static double row_nll(const float *row, int V, int target) {
    double mx = row[0];
    for (int i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(row[i] - mx);
    return log(sum) + mx - row[target];
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
    da_session *s = NULL;
    da_session_opts o = da_session_opts_default();
    o.logit_bits = logit_bits;
    o.max_T = T;
    da_status st = da_session_create(&s, e, &o);
    int *tok = malloc((size_t)T * sizeof(int)), *tgt = malloc((size_t)T * sizeof(int));
    if (!st.code && (!tok || !tgt)) st = da_errorf("out of memory");
    double total = 0.0;
    for (long w = 0; w < n_windows && !st.code; w++) {
        da_text_data_val_window(data, w, n_windows, T, tok, tgt);
        const float *logits;
        da_session_reset(s);
        if ((st = da_session_feed(s, tok, T, 1, &logits)).code) break;
        for (int t = 0; t < T; t++) total += row_nll(logits + (size_t)t * V, V, tgt[t]);
    }
    if (!st.code) {
        r->loss = total / ((double)n_windows * T);
        r->ppl = exp(r->loss);
        r->windows = n_windows;
        r->tokens = n_windows * T;
    }
    free(tok);
    free(tgt);
    da_session_free(s);
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
