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
    const char *pre; /* llama.cpp's tokenizer.ggml.pre: "gpt-2" for GPT-2's pattern, NULL for another */
} da_tok_ggml;

/* The GGUF form of tokenizer.json text (which loaded as a tokenizer). */
da_status da_tok_ggml_from_json(da_tok_ggml *g, const char *json, size_t n);
/* tokenizer.json text (malloc'd) from the GGUF form; name is used in messages.
 * Only GPT-2's pre-tokeniser can be rebuilt: another needs the file's
 * tokenizer.huggingface.json. */
da_status da_tok_ggml_to_json(const da_tok_ggml *g, const char *name, char **json);

void da_tok_ggml_free(da_tok_ggml *g);

#endif
