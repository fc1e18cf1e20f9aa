/* Fuzz target: a Hugging Face model folder (config.json beside
 * model.safetensors), through the loader every command uses for a folder.
 * The input is config.json, a NUL byte, then model.safetensors (without a
 * NUL, the folder holds no weights and only the configuration is read). */
#include "diffattn.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_cfg = nul ? (size_t)(nul - data) : size;
    fz_write("model.safetensors", nul ? nul + 1 : data, nul ? size - n_cfg - 1 : 0);
    const char *cfg_path = fz_write("config.json", data, n_cfg);
    (void)cfg_path;
    da_model m;
    if (!da_model_load(&m, fz_dir()).code) da_model_free(&m);
    return 0;
}
