/* A tokenizer inside a model file. safetensors carries the tokenizer.json
 * text as it is; GGUF carries it as llama.cpp's tokenizer.ggml.* arrays
 * (tokens, token types, merges, bos/eos) and, for an exact round trip, the
 * same text under tokenizer.huggingface.json (docs/formats.md). This file
 * converts between the two forms; it works on the JSON only. */
#ifndef DA_TOK_TOKENIZER_EMBED_H
#define DA_TOK_TOKENIZER_EMBED_H

#include <stdint.h>

#include "diffattn/core.h"

/* llama.cpp's token types (gguf-py's TokenType). */
enum { DA_TOKTYPE_NORMAL = 1, DA_TOKTYPE_CONTROL = 3, DA_TOKTYPE_USER_DEFINED = 4, DA_TOKTYPE_UNUSED = 5 };

typedef struct {
    int n_tokens;
    char **tokens;   /* (n_tokens) GPT-2-alphabet text of each id; added tokens as their content */
    int32_t *types;  /* (n_tokens) DA_TOKTYPE_*; ids no entry names are UNUSED, "[PAD<id>]" */
    int n_merges;
    char **merges;   /* (n_merges) "left right", rank order */
    int bos, eos;    /* <|endoftext|>'s id for both (GPT-2's convention), or -1 */
    int add_bos;     /* tokenizer.ggml.add_bos_token: 1, 0, or -1 when absent */
    const char *pre; /* llama.cpp's tokenizer.ggml.pre: "gpt-2", "llama-bpe", "qwen2" or "gpt-4o" for the
                      * patterns of GPT-2, Llama 3, Qwen2/3 and GPT-4o; NULL for another */
} da_tok_ggml;

/* The GGUF form of tokenizer.json text (which loaded as a tokenizer). */
da_status da_tok_ggml_from_json(da_tok_ggml *g, const char *json, size_t n);
/* tokenizer.json text (malloc'd) from the GGUF form, giving the ids
 * llama.cpp's llama_tokenize gives; name is used in messages. The
 * pre-tokenisers rebuilt are llama.cpp's "gpt-2", "llama-bpe" (also
 * "llama3", "llama-v3"), "qwen2" and "gpt-4o" (also "llama4"); another, or
 * none (llama.cpp's "default"), is refused naming it. add_bos 1 becomes a
 * post_processor putting bos first (da_tokenizer_encode_add_special). */
da_status da_tok_ggml_to_json(const da_tok_ggml *g, const char *name, char **json);

void da_tok_ggml_free(da_tok_ggml *g);

#endif
