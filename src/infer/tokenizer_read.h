/* Reading a tokenizer from any file (tokenizer_read.c). */
#ifndef DA_INFER_TOKENIZER_READ_H
#define DA_INFER_TOKENIZER_READ_H

#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"

/* The tokenizer of path, whatever it is: a tokenizer file or folder
 * (tokenizer.json, GPT-2's encoder.json with vocab.bpe beside it), or a
 * model's as sample takes it: a Hugging Face folder's tokenizer.json, else
 * the tokenizer the model file carries (a safetensors model's __metadata__, a
 * GGUF's tokenizer.* keys: tok/tokenizer_gguf.h), else tokenizer files saved
 * beside an older model; checked against the model's vocabulary. lo: the model's load options
 * (NULL: the defaults). *out is NULL, and the status ok, for a model that
 * carries none. */
da_status da_tokenizer_read(const char *path, const da_load_opts *lo, da_tokenizer **out);

#endif
