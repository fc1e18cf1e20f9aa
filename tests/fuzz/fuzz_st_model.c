/* Fuzz target: a model file (safetensors with the configuration in
 * __metadata__), through the loader every command uses. */
#include "diffattn.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("model.safetensors", data, size);
    da_model m;
    da_status st = da_model_load(&m, path);
    if (!st.code) da_model_free(&m);
    return 0;
}
