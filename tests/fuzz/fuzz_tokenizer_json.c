/* Fuzz target: a Hugging Face tokenizer.json. A tokenizer that loads must
 * encode and decode a fixed text losslessly. */
#include "fuzz_util.h"
#include "tok/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fz_write("tokenizer.json", data, size);
    da_tokenizer *t;
    if (da_tokenizer_load(&t, path).code) return 0;
    static const char text[] = "Hello, world!\n\n  caf\xc3\xa9 <|endoftext|> 123\xff\xfe x";
    int *ids = NULL;
    size_t n_ids = 0, cap = 0, n_out = 0, out_cap = 0;
    uint8_t *out = NULL;
    if (da_tokenizer_encode(t, (const uint8_t *)text, sizeof text - 1, &ids, &n_ids, &cap).code) abort();
    if (da_tokenizer_decode(t, ids, n_ids, &out, &n_out, &out_cap).code) abort();
    if (n_out != sizeof text - 1 || memcmp(out, text, n_out)) abort(); /* byte-level BPE is lossless */
    free(ids);
    free(out);
    da_tokenizer_free(t);
    return 0;
}
