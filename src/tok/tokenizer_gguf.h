/* A tokenizer as GGUF keys, both ways (tokenizer_gguf.c): llama.cpp's
 * tokenizer.ggml.* arrays, and tokenizer.huggingface.json for an exact round
 * trip. Engines' GGUF files (infer/engine_gguf.c) write and read them. */
#ifndef DA_TOK_TOKENIZER_GGUF_H
#define DA_TOK_TOKENIZER_GGUF_H

#include "diffattn/tokenizer.h"
#include "io/gguf.h"

/* The keys of tokenizer.json text json (tok: it, parsed). */
da_status da_gguf_add_tokenizer(da_gguf_writer *w, const char *json, const da_tokenizer *tok);
/* The keys of a model without a tokenizer: vocab ids of which the first 256 are the bytes. */
da_status da_gguf_add_byte_tokenizer(da_gguf_writer *w, int vocab);
/* The tokenizer.json text of a GGUF's tokenizer keys (*json NULL: none):
 * tokenizer.huggingface.json (refused when tokenizer.ggml.tokens or .merges
 * beside it say otherwise), else rebuilt from llama.cpp's arrays. vocab > 0:
 * the model's vocabulary, which tokenizer.ggml.tokens must match (its count
 * compared before the array is read); 0: not checked. */
da_status da_gguf_tokenizer_json(const da_gguf_file *f, int vocab, char **json);

#endif
