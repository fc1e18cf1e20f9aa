/* Fuzz target: GPT-2's tokenizer files. The input is encoder.json, a NUL
 * byte, then vocab.bpe (no NUL: vocab.bpe is empty). */
#include "fuzz_util.h"
#include "fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_enc = nul ? (size_t)(nul - data) : size;
    fz_write("vocab.bpe", nul ? nul + 1 : data, nul ? size - n_enc - 1 : 0);
    const char *path = fz_write("encoder.json", data, n_enc);
    da_tokenizer *t;
    if (da_tokenizer_load(&t, path).code) return 0;
    fz_check_roundtrip_and_free(t);
    return 0;
}
