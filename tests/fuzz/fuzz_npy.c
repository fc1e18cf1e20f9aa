/* Fuzz target: a .npy file (float32 arrays: parity fixtures, dumps). */
#include "fuzz_util.h"
#include "io/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("array.npy", data, size);
    float *v = NULL;
    int ndim = 0;
    int64_t shape[DA_NPY_MAX_DIMS];
    if (!da_npy_read_f32(path, &v, &ndim, shape).code) {
        size_t n = 1;
        for (int i = 0; i < ndim; i++) n *= (size_t)shape[i];
        volatile float sink = 0;
        if (n) sink += v[0] + v[n - 1]; /* the whole array was allocated */
        (void)sink;
        free(v);
    }
    return 0;
}
