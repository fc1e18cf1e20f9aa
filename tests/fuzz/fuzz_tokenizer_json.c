/* Fuzz target: a Hugging Face tokenizer.json. A tokenizer that loads must
 * encode and decode a fixed text losslessly. */
#include "fuzz_util.h"
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("tokenizer.json", data, size);
    da_tokenizer *t;
    if (da_tokenizer_load(&t, path).code) return 0;
    fz_check_roundtrip_and_free(t);
    return 0;
}
