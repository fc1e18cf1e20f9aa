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
    FILE *fp = fopen(path, "rb");
    if (!fp) return da_errorf("%s: cannot open", path);
    char *s = NULL;
    long n = -1;
    if (!fseek(fp, 0, SEEK_END) && (n = ftell(fp)) >= 0 && !fseek(fp, 0, SEEK_SET) && (s = malloc((size_t)n + 1)) &&
        fread(s, 1, (size_t)n, fp) == (size_t)n) {
        s[n] = 0;
        m->tokenizer_json = s;
        s = NULL;
    }
    fclose(fp);
    free(s);
    return m->tokenizer_json ? da_ok() : da_errorf("%s: read error", path);
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
