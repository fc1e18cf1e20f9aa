/* Fuzz target: a token-id text file (`decode --ids`, `logits --ids`). */
#include "data/ids_file.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("ids.txt", data, size);
    int *ids = NULL, n = 0;
    if (!da_ids_read(path, 50257, &ids, &n).code) {
        for (int i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= 50257) abort();
        free(ids);
    }
    return 0;
}
