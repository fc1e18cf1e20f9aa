/* Validation loss with quantized attention logits (quant_logits.h). */
#include <math.h>
#include <stdlib.h>

#include "eval/quant_logits.h"

/* -log softmax(row)[target], in double. */
static double row_nll(const float *row, int V, int target) {
    double mx = row[0];
    for (int i = 1; i < V; i++) mx = row[i] > mx ? row[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(row[i] - mx);
    return log(sum) + mx - row[target];
}

da_status da_eval_loss_logit_bits(const da_model *m, const da_text_data *data, int T, long n_windows, int logit_bits,
                                  da_eval_loss_result *r) {
    const int V = m->cfg.vocab_size;
    if (n_windows < 1) return da_errorf("windows = %ld must be positive", n_windows);
    if (T < 1 || T > m->cfg.max_seq_len) return da_errorf("seq %d is out of range (1..max_seq_len=%d)", T, m->cfg.max_seq_len);
    if (data->vocab_size > V)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size, V);
    if (data->n_val < (size_t)T + 1)
        return da_errorf("the validation split holds %zu tokens, too few for windows of %d", data->n_val, T);
    da_engine *e = NULL;
    da_session *s = NULL;
    da_status st = da_engine_from_model(&e, m);
    da_session_opts o = da_session_opts_default();
    o.logit_bits = logit_bits;
    o.max_T = T;
    if (!st.code) st = da_session_create(&s, e, &o);
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
    da_engine_free(e);
    return st;
}
