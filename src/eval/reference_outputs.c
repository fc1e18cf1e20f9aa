/* The model's numbers on one token sequence, written for comparison with a
 * reference implementation (tools/reference.py): logits and gradients. */
#include <stdio.h>
#include <stdlib.h>

#include "data/ids_file.h"
#include "eval/eval.h"
#include "io/npy.h"
#include "io/safetensors.h"

/* Loads the model and the ids, checking the length against max_seq_len. */
static da_status load_inputs(const char *model_path, const char *ids_path, da_model *m, int **ids, int *T,
                             int min_len, const da_load_opts *load) {
    da_status st = da_model_load_any_with(m, model_path, load);
    if (st.code) return st;
    st = da_ids_read(ids_path, m->cfg.vocab_size, ids, T);
    if (!st.code && *T < min_len)
        st = da_errorf("%s: %d id(s); at least %d needed", ids_path, *T, min_len);
    if (!st.code && *T - (min_len - 1) > m->cfg.max_seq_len)
        st = da_errorf("%s: %d ids exceed the model's max_seq_len %d", ids_path, *T, m->cfg.max_seq_len);
    if (st.code) {
        free(*ids);
        *ids = NULL;
        da_model_free(m);
    }
    return st;
}

/* The logits of the inference engine, which runs a GGUF as quantized. */
da_status da_eval_write_logits(const char *model_path, const char *ids_path, const char *out_path,
                               const da_load_opts *load) {
    da_engine *e = NULL;
    da_session *s = NULL;
    int *ids = NULL, T = 0;
    const float *logits = NULL;
    const char *inputs[2] = {model_path, ids_path};
    da_status st = da_check_outputs_not_inputs(&out_path, 1, inputs, 2);
    if (st.code) return st;
    st = da_engine_load_with(&e, model_path, load);
    const da_config *c = e ? da_engine_config(e) : NULL;
    if (!st.code) st = da_ids_read(ids_path, c->vocab_size, &ids, &T);
    if (!st.code && T < 1) st = da_errorf("%s: no ids; at least 1 needed", ids_path);
    if (!st.code && T > c->max_seq_len)
        st = da_errorf("%s: %d ids exceed the model's max_seq_len %d", ids_path, T, c->max_seq_len);
    da_session_opts so = da_session_opts_default();
    so.max_T = T;
    if (!st.code && !(st = da_session_create(&s, e, &so)).code && !(st = da_session_feed(s, ids, T, 1, &logits)).code) {
        int64_t shape[2] = {T, c->vocab_size};
        st = da_npy_write_f32(out_path, logits, 2, shape);
    }
    da_session_free(s);
    da_engine_free(e);
    free(ids);
    return st;
}

da_status da_eval_write_grads(const char *model_path, const char *ids_path, const char *out_path, float *loss,
                              const da_load_opts *load) {
    da_model m;
    int *ids, T;
    const char *inputs[2] = {model_path, ids_path};
    da_status st = da_check_outputs_not_inputs(&out_path, 1, inputs, 2);
    if (st.code) return st;
    st = load_inputs(model_path, ids_path, &m, &ids, &T, 2, load);
    if (st.code) return st;
    da_acts *a = NULL;
    da_st_write_tensor *ts = NULL;
    if ((st = da_model_alloc_grads(&m)).code || (st = da_acts_create(&a, &m.cfg, 1, T - 1)).code) goto done;
    *loss = da_forward(&m, a, ids, ids + 1, 1, T - 1);
    da_backward(&m, a);
    ts = calloc((size_t)m.n_tensors + 1, sizeof *ts);
    if (!ts) {
        st = da_errorf("out of memory");
        goto done;
    }
    for (int i = 0; i < m.n_tensors; i++) {
        const da_tensor *t = &m.tensors[i];
        ts[i] = (da_st_write_tensor){t->name, t->ndim, {t->shape[0], t->shape[1]}, m.grads + t->offset};
    }
    ts[m.n_tensors] = (da_st_write_tensor){"loss", 0, {0}, loss};
    st = da_st_write(out_path, ts, m.n_tensors + 1, NULL, NULL, 0);
done:
    free(ts);
    da_acts_free(a);
    free(ids);
    da_model_free(&m);
    return st;
}
