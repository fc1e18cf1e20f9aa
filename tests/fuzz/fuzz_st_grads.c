/* Fuzz target: any safetensors file (a grads file, a parity fixture) through
 * the generic reader: every tensor's bytes are read and converted. */
#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("grads.safetensors", data, size);
    da_st_file f;
    if (da_st_open(&f, path).code) return 0;
    for (int i = 0; i < f.n_meta; i++)
        if (da_st_meta_get(&f, f.meta[i].key) == NULL) abort(); /* every stored key is found */
    for (int i = 0; i < f.n_tensors; i++) {
        const da_st_tensor *t = &f.tensors[i];
        if (da_st_find(&f, t->name) == NULL) abort();
        size_t nbytes = t->end - t->begin;
        const unsigned char *p = da_st_data(&f, t);
        volatile unsigned char sink = 0;
        if (nbytes) sink ^= p[0] ^ p[nbytes - 1]; /* inside the file, or ASan says so */
        (void)sink;
        float *out = malloc(t->numel ? t->numel * sizeof(float) : 1);
        if (!out) continue;
        (void)da_st_read_f32(&f, t, out);
        free(out);
    }
    da_st_close(&f);
    return 0;
}
