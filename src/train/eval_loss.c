/* Validation loss over fixed windows (da_eval_loss in diffattn/train.h), through the one window loop. */
#include <math.h>

#include "train/eval_loss.h"

da_status da_eval_loss(da_model *m, const da_text_data *data, int T, long n_windows, int batch, da_attn_kernel kernel,
                       da_eval_loss_result *r) {
    if (n_windows < 1 || batch < 1) return da_errorf("--windows and --batch must be positive");
    if (T > m->cfg.max_seq_len) return da_errorf("--seq %d exceeds the model's max_seq_len %d", T, m->cfg.max_seq_len);
    if (data->vocab_size > m->cfg.vocab_size)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size,
                         m->cfg.vocab_size);
    if (data->n_val < (size_t)T + 1)
        return da_errorf("the validation split holds %zu tokens, too few for windows of %d", data->n_val, T);
    da_model_scorer ms = {m, NULL};
    da_status st = da_acts_create_ex(&ms.a, &m->cfg, batch, T, kernel, NULL);
    if (st.code) return st;
    const da_window_set set = da_val_windows(data);
    const da_window_scorer sc = da_model_window_scorer(&ms);
    double loss;
    if (!(st = da_window_loss(&set, n_windows, T, batch, &sc, NULL, &loss)).code) {
        r->loss = (float)loss;
        r->ppl = exp(r->loss);
        r->windows = n_windows;
        r->tokens = n_windows * T;
    }
    da_acts_free(ms.a);
    return st;
}
