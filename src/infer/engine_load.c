/* Loading an engine or a model from a file of either format: a GGUF through
 * engine_gguf.c, a safetensors checkpoint or Hugging Face folder through a
 * da_model. Kept apart from engine_weights.c, which the GGUF reader builds
 * on, so that the two do not call each other. */
#include <stdlib.h>
#include <string.h>

#include "infer/engine.h"
#include "io/checkpoint.h"
#include "io/gguf.h"

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

da_status da_model_load_any_with(da_model *m, const char *path, const da_load_opts *o) {
    if (!da_gguf_is_gguf(path)) return da_model_load_with(m, path, o);
    memset(m, 0, sizeof *m);
    da_engine e;
    da_status st = da_engine_load_gguf(&e, path);
    if (st.code) return st;
    if ((o && o->allow_nonfinite) || !(st = da_engine_check_finite(&e, path)).code) st = da_engine_to_model(&e, m);
    da_engine_release(&e);
    return st;
}
