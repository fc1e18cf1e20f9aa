/* diffattn logits and diffattn grads: the model's numbers on one sequence,
 * written for comparison with a reference implementation. */
#include <stdio.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "data/ids_file.h"
#include "io/npy.h"
#include "io/safetensors.h"

/* Loads the model and the ids, checking the length against max_seq_len. */
static da_status load_inputs(const char *model_path, const char *ids_path, da_model *m, int **ids, int *T,
                             int min_len) {
    da_status st = da_model_load_any(m, model_path);
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

int cmd_logits(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors, or .gguf: run quantized)", 0},
        {"ids", OPT_STR, &ids_path, "text file of whitespace-separated token ids (one sequence)", 0},
        {"out", OPT_STR, &out, ".npy file to write: float32 [T, vocab]", 0},
    };
    const char *req[] = {"model", "ids", "out", NULL};
    int rc = cli_parse("logits", "Writes the logits at every position of a token sequence.", argc, argv, opts, 3, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    /* the numbers of the inference engine, which runs a GGUF as quantized */
    da_engine *e = NULL;
    da_session *s = NULL;
    int *ids = NULL, T = 0;
    const float *logits = NULL;
    da_status st = da_engine_load(&e, model);
    if (!st.code) st = da_ids_read(ids_path, da_engine_config(e)->vocab_size, &ids, &T);
    if (!st.code && T < 1) st = da_errorf("%s: no ids; at least 1 needed", ids_path);
    if (!st.code && T > da_engine_config(e)->max_seq_len)
        st = da_errorf("%s: %d ids exceed the model's max_seq_len %d", ids_path, T, da_engine_config(e)->max_seq_len);
    da_session_opts so = da_session_opts_default();
    so.max_T = T;
    if (!st.code && !(st = da_session_create(&s, e, &so)).code && !(st = da_session_feed(s, ids, T, 1, &logits)).code) {
        int64_t shape[2] = {T, da_engine_config(e)->vocab_size};
        st = da_npy_write_f32(out, logits, 2, shape);
    }
    da_session_free(s);
    da_engine_free(e);
    free(ids);
    return st.code ? cli_fail(st.msg) : 0;
}

int cmd_grads(int argc, char **argv) {
    const char *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"ids", OPT_STR, &ids_path, "text file of whitespace-separated token ids (one sequence, T >= 2)", 0},
        {"out", OPT_STR, &out, "safetensors file to write: each parameter's gradient under its name, plus `loss`", 0},
    };
    const char *req[] = {"model", "ids", "out", NULL};
    int rc = cli_parse("grads",
                       "Writes the gradient of the mean cross-entropy of predicting ids[1..T-1] from ids[0..T-2].",
                       argc, argv, opts, 3, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_model m;
    int *ids, T;
    da_status st = load_inputs(model, ids_path, &m, &ids, &T, 2);
    if (st.code) return cli_fail(st.msg);
    da_acts *a = NULL;
    da_st_write_tensor *ts = NULL;
    if ((st = da_model_alloc_grads(&m)).code || (st = da_acts_create(&a, &m.cfg, 1, T - 1)).code) goto done;
    float loss = da_forward(&m, a, ids, ids + 1, 1, T - 1);
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
    ts[m.n_tensors] = (da_st_write_tensor){"loss", 0, {0}, &loss};
    st = da_st_write(out, ts, m.n_tensors + 1, NULL, NULL, 0);
    if (!st.code) printf("loss %.6f\n", (double)loss);
done:
    free(ts);
    da_acts_free(a);
    free(ids);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}
