/* Fuzz target: the tokenizer of a GGUF (tokenizer.ggml.* arrays, and
 * tokenizer.huggingface.json checked against them), parsed from memory
 * without a model. A tokenizer that loads must encode and decode a fixed
 * text losslessly. */
#include "fuzz_tok.h"
#include "fuzz_util.h"
#include "infer/engine.h"
#include "tok/tokenizer_gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) return 0;
    memcpy(copy, data, size);
    da_gguf_file f;
    if (da_gguf_parse(&f, "fuzz.gguf", copy, size).code) return 0; /* takes copy */
    char *json = NULL;
    da_status st = da_gguf_tokenizer_json(&f, 0, &json);
    da_gguf_close(&f);
    if (st.code || !json) return 0;
    da_tokenizer *t;
    st = da_tokenizer_from_json(&t, json, strlen(json), "fuzz.gguf");
    free(json);
    if (!st.code) fz_check_roundtrip_and_free(t);
    return 0;
}
