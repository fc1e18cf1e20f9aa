/* A model file of any format diffattn reads, in full precision, with its
 * tokenizer (da_model_load_float: what convert and a training start take),
 * and diffattn convert. Here, above model/, because a GGUF is read through
 * the engine's loader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/generate.h"
#include "infer/engine.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "ops/qblock.h"

/* A GGUF source in full precision: its weights must be f32, f16 or bf16, since
 * a converted or trained model would carry the quantization error as if it were weights. */
static da_status load_gguf_float(da_model *m, const char *path, const da_load_opts *o) {
    da_engine e;
    da_status st = da_engine_load_gguf(&e, path);
    if (st.code) return st;
    for (int i = 0; i < e.n_tensors && !st.code; i++) {
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

da_status da_model_take_folder_tokenizer(da_model *m, const char *src_path) {
    char path[4200];
    if (m->tokenizer_json || !da_model_tokenizer_path(src_path, path, sizeof path)) return da_ok();
    /* The text is carried in the model file's header, escaped: half the
     * header's bound keeps the file loadable whatever the text holds. */
    char *json = NULL;
    size_t n = 0;
    da_status st = da_read_regular(path, DA_ST_MAX_HEADER / 2, &json, &n);
    if (st.code) return da_errorf("%s (a model file carries its tokenizer in its header; give a smaller one)", st.msg);
    /* parsed as a load of the written model would parse it, before anything is written */
    da_tokenizer *t = NULL;
    st = da_tokenizer_from_json(&t, json, n, path);
    da_tokenizer_free(t);
    if (st.code) {
        free(json);
        return st;
    }
    m->tokenizer_json = json;
    return da_ok();
}

da_status da_model_load_float(da_model *m, const char *path, const da_load_opts *o) {
    da_status st = da_gguf_is_gguf(path) ? load_gguf_float(m, path, o) : da_model_load_with(m, path, o);
    if (st.code) return st;
    if ((st = da_model_take_folder_tokenizer(m, path)).code) da_model_free(m);
    return st;
}

da_status da_model_convert_file(const char *src_path, da_arch to, da_convert_recipe r, uint64_t seed,
                                const char *out_path, const da_load_opts *o) {
    const char *outs[1] = {out_path}, *ins[1] = {src_path};
    da_status st = da_check_outputs_not_inputs(outs, 1, ins, 1);
    if (st.code) return st;
    da_model src, dst;
    if ((st = da_model_load_float(&src, src_path, o)).code) return st;
    st = da_model_convert(&src, to, r, seed, &dst);
    da_model_free(&src);
    if (st.code) return da_errorf("%s: %s", src_path, st.msg);
    st = da_model_save(&dst, out_path);
    da_model_free(&dst);
    return st;
}
