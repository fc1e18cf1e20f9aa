/* Fuzz target: a GGUF file, through the container parser (from memory) and
 * the inference engine's loader that `sample`, `eval` and `info` use. */
#include "fuzz_util.h"
#include "io/gguf.h"
#include "diffattn/generate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    da_gguf_file f;
    if (!da_gguf_parse(&f, "fuzz.gguf", copy, size).code) {
        for (int i = 0; i < f.n_kv && i < 64; i++) /* the finds are linear: a few */
            if (da_gguf_kv_find(&f, f.kv[i].key) != &f.kv[i]) abort(); /* keys are unique */
        for (int i = 0; i < f.n_tensors; i++) {
            const da_gguf_tensor *t = &f.tensors[i];
            if (i < 64 && da_gguf_tensor_find(&f, t->name) != t) abort();
            const unsigned char *p = da_gguf_data(&f, t);
            volatile unsigned char sink = 0;
            if (t->nbytes) sink ^= p[0] ^ p[t->nbytes - 1];
            (void)sink;
        }
        int64_t iv;
        float fv;
        int bv;
        const char *sv;
        (void)da_gguf_get_int(&f, "diffattn.dim", &iv);
        (void)da_gguf_get_f32(&f, "diffattn.norm_eps", &fv);
        (void)da_gguf_get_bool(&f, "diffattn.tie_embeddings", &bv);
        (void)da_gguf_get_str(&f, "general.architecture", &sv);
        da_gguf_close(&f);
    }
    const char *path = fz_write("model.gguf", data, size);
    da_engine *e;
    if (!da_engine_load(&e, path).code) da_engine_free(e);
    return 0;
}
