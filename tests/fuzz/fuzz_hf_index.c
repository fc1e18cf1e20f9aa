/* Fuzz target: a sharded Hugging Face folder, through the loader every
 * command uses for a folder: config.json, model.safetensors.index.json and
 * two shards, a.safetensors and b.safetensors. The input is config.json, a
 * NUL byte, the index, a NUL byte, a u32 (little-endian) length n, n bytes
 * of a.safetensors, then b.safetensors. */
#include "diffattn.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *end = data + size, *cfg = data;
    const uint8_t *nul1 = memchr(cfg, 0, size);
    const uint8_t *index = nul1 ? nul1 + 1 : end;
    const uint8_t *nul2 = memchr(index, 0, (size_t)(end - index));
    const uint8_t *shards = nul2 ? nul2 + 1 : end;
    uint32_t n_a = 0;
    if (end - shards >= 4) memcpy(&n_a, shards, 4), shards += 4;
    if (n_a > (size_t)(end - shards)) n_a = (uint32_t)(end - shards);
    fz_write("config.json", cfg, (size_t)((nul1 ? nul1 : end) - cfg));
    fz_write("model.safetensors.index.json", index, (size_t)((nul2 ? nul2 : end) - index));
    fz_write("a.safetensors", shards, n_a);
    fz_write("b.safetensors", shards + n_a, (size_t)(end - shards) - n_a);
    da_model m;
    if (!da_model_load(&m, fz_dir()).code) da_model_free(&m);
    return 0;
}
