/* The one model loader: every format diffattn reads (a Hugging Face folder of
 * a family of io/family.h, a GGUF of one, diffattn's safetensors), as an
 * engine (da_engine_load_with), as a da_model in f32 (da_model_load_any_with)
 * or, for what convert and a training start take, in full precision with its
 * tokenizer (da_model_load_float). A GGUF goes through engine_gguf.c, the
 * others through io/'s da_model_load_with. Kept apart from engine_weights.c,
 * which the GGUF reader builds on, so that the two do not call each other. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/formats.h"
#include "infer/engine.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "ops/qblock.h"

/* A safetensors checkpoint is read into a da_model whose parameter buffer
 * becomes the engine's blob (one copy of the weights in memory). */
static da_status load_safetensors(da_engine *e, const char *path, const da_load_opts *o) {
    da_model m;
    da_status st = da_model_load_with(&m, path, o);
    if (st.code) return st;
    if ((st = da_engine_init_from_model(e, &m)).code) {
        da_model_free(&m);
        return da_errorf("%s: %s", path, st.msg);
    }
    e->blob = (unsigned char *)m.params; /* the engine owns the parameters now */
    m.params = NULL;
    da_model_free(&m);
    return da_ok();
}

da_status da_engine_load_with(da_engine **out, const char *path, const da_load_opts *o) {
    *out = calloc(1, sizeof **out);
    if (!*out) return da_errorf("out of memory");
    const int gguf = da_gguf_is_gguf(path), check = !(o && o->allow_nonfinite);
    da_status st = gguf ? da_engine_load_gguf(*out, path) : load_safetensors(*out, path, o);
    if (!st.code && gguf && check && (st = da_engine_check_finite(*out, path)).code) da_engine_release(*out);
    /* sessions run on the default level's kernels (da_session_create), so the layout is chosen for them */
    if (!st.code && (st = da_engine_pack(*out, da_ops_of(da_exec_default().isa))).code) da_engine_release(*out);
    if (!st.code) (*out)->file_bytes = da_model_file_bytes(path); /* a Hugging Face folder's files together */
    if (st.code) {
        free(*out);
        *out = NULL;
    }
    return st;
}

da_status da_engine_load(da_engine **out, const char *path) { return da_engine_load_with(out, path, NULL); }

da_status da_model_load_any(da_model *m, const char *path) { return da_model_load_any_with(m, path, NULL); }

/* A GGUF as a da_model in f32. float_only: its weights must be f32, f16 or bf16, since a converted or trained
 * model would carry the quantization error as if it were weights. */
static da_status load_gguf_model(da_model *m, const char *path, const da_load_opts *o, int float_only) {
    memset(m, 0, sizeof *m);
    da_engine e;
    da_status st = da_engine_load_gguf(&e, path);
    if (st.code) return st;
    for (int i = 0; float_only && i < e.n_tensors && !st.code; i++) {
        const int t = e.t[i].type;
        if (t != DA_QT_F32 && t != DA_QT_F16 && t != DA_QT_BF16)
            st = da_errorf("%s: tensor %s is quantized (%s); convert and train --init take f32, f16 or bf16 "
                           "weights (use the model it was quantized from)",
                           path, e.t[i].name, da_ggml_type_name(t));
    }
    if (!st.code && !(o && o->allow_nonfinite)) st = da_engine_check_finite(&e, path);
    if (!st.code) st = da_engine_to_model(&e, m);
    da_engine_release(&e);
    return st;
}

da_status da_model_load_any_with(da_model *m, const char *path, const da_load_opts *o) {
    return da_gguf_is_gguf(path) ? load_gguf_model(m, path, o, 0) : da_model_load_with(m, path, o);
}

da_status da_model_take_folder_tokenizer(da_model *m, const char *src_path) {
    char path[4200];
    if (m->tokenizer_json || !da_model_tokenizer_path(src_path, path, sizeof path)) return da_ok();
    /* parsed as a load of the written model would parse it, before anything is written */
    da_tokenizer *t = NULL;
    da_status st = da_tokenizer_load(&t, path);
    size_t n = 0;
    const char *json = st.code ? NULL : da_tokenizer_json(t, &n);
    /* The text is carried in the model file's header, escaped: half the
     * header's bound keeps the file loadable whatever the text holds. */
    if (!st.code && n > DA_ST_MAX_HEADER / 2)
        st = da_errorf("%s: %zu bytes, over the %u a model file's header carries for its tokenizer; give a smaller "
                       "one",
                       path, n, DA_ST_MAX_HEADER / 2);
    if (!st.code && !(m->tokenizer_json = strdup(json))) st = da_errorf("%s: out of memory", path);
    da_tokenizer_free(t);
    return st;
}

da_status da_model_load_float(da_model *m, const char *path, const da_load_opts *o) {
    da_status st = da_gguf_is_gguf(path) ? load_gguf_model(m, path, o, 1) : da_model_load_with(m, path, o);
    if (st.code) return st;
    if ((st = da_model_take_folder_tokenizer(m, path)).code) da_model_free(m);
    return st;
}
