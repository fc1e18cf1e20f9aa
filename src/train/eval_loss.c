/* Validation loss over fixed windows (see eval_loss.h). */
#include <math.h>
#include <stdlib.h>

#include "train/eval_loss.h"

float da_eval_val_loss(da_model *m, da_acts *a, const da_text_data *data, long n_windows, int T, int micro,
                       int *tokens, int *targets) {
    double total = 0.0;
    long done = 0;
    while (done < n_windows) {
        int b = (int)(n_windows - done < micro ? n_windows - done : micro);
        for (int i = 0; i < b; i++)
            da_text_data_val_window(data, done + i, n_windows, T, tokens + (size_t)i * T, targets + (size_t)i * T);
        total += (double)da_forward(m, a, tokens, targets, b, T) * b;
        done += b;
    }
    return (float)(total / n_windows);
}

da_status da_eval_loss(da_model *m, const da_text_data *data, int T, long n_windows, int batch, da_attn_kernel kernel,
                       da_eval_loss_result *r) {
    if (n_windows < 1 || batch < 1) return da_errorf("--windows and --batch must be positive");
    if (T > m->cfg.max_seq_len) return da_errorf("--seq %d exceeds the model's max_seq_len %d", T, m->cfg.max_seq_len);
    if (data->vocab_size > m->cfg.vocab_size)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size,
                         m->cfg.vocab_size);
    if (data->n_val < (size_t)T + 1)
        return da_errorf("the validation split holds %zu tokens, too few for windows of %d", data->n_val, T);
    da_acts *a;
    da_status st = da_acts_create_ex(&a, &m->cfg, batch, T, kernel, NULL);
    if (st.code) return st;
    int *tok = malloc((size_t)batch * T * sizeof(int)), *tgt = malloc((size_t)batch * T * sizeof(int));
    if (!tok || !tgt) st = da_errorf("out of memory");
    else {
        double total = 0.0;
        for (long done = 0; done < n_windows && !st.code;) {
            const int b = (int)(n_windows - done < batch ? n_windows - done : batch);
            for (int i = 0; i < b; i++)
                da_text_data_val_window(data, done + i, n_windows, T, tok + (size_t)i * T, tgt + (size_t)i * T);
            const float loss = da_forward(m, a, tok, tgt, b, T);
            if (!isfinite(loss))
                st = da_errorf("eval loss: windows %ld..%ld: the loss is %g; the model's numbers are not finite", done,
                               done + b - 1, (double)loss);
            total += (double)loss * b;
            done += b;
        }
        r->loss = (float)(total / n_windows);
        r->ppl = exp(r->loss);
        r->windows = n_windows;
        r->tokens = n_windows * T;
    }
    free(tok);
    free(tgt);
    da_acts_free(a);
    return st;
}
