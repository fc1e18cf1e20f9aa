/* A model's configuration as GGUF keys, for the GGUF families of the family
 * table (family.h; docs/formats.md):
 *   - general.architecture: the family's tag, "llama" for a softmax model
 *     llama.cpp runs as it is (no sliding window, no head norm), else
 *     "diffattn-" and the variant's name;
 *   - the hyperparameters under "<architecture>." as llama.cpp names them
 *     (the family's key rows: llama.block_count, llama.attention.head_count,
 *     llama.rope.freq_base, ...);
 *   - what llama.cpp has no key for, under "diffattn." (the exact RoPE rule,
 *     the ablations' options, a variant's own fields).
 * diffattn's q/k rows already follow llama.cpp's rotation (GPT-J interleaved
 * pairs, ggml's "normal" RoPE), so no permutation is needed; the DIFF
 * framework's frequencies theta^(-j/(d/2-1)) are Llama's rule at
 * freq_base = theta^(d/(d-2)).
 * Implemented in gguf_config.c and gguf_config_llama.c (llama.cpp's own files). */
#ifndef DA_IO_GGUF_CONFIG_H
#define DA_IO_GGUF_CONFIG_H

#include <stddef.h>

#include "diffattn/model.h"
#include "io/family.h"
#include "io/gguf.h"

/* Every hyperparameter key of c, in its family's layout (da_gguf_arch_of
 * gives general.architecture), then the diffattn.* keys: the exact RoPE rule,
 * the ablations' options (each only when not the default, so that files
 * without them keep their bytes), a variant's own fields. */
void da_gguf_config_write(da_gguf_writer *w, const da_config *c);
/* The configuration of a model GGUF, and its family (*family; the older
 * "diffattn" architecture's has diffattn's own names). Errors name the file
 * and the key. */
da_status da_gguf_config_read(const da_gguf_file *f, da_config *c, const da_family **family);
/* A file of llama.cpp's own (fam: a plain_only family, without diffattn's
 * RoPE keys): every key llama.cpp reads, and its rope_freqs tensor. */
da_status da_gguf_config_llama_cpp(const da_gguf_file *f, const da_family *fam, da_config *c);

/* llama3 RoPE scaling as llama.cpp's rope_freqs tensor: (d/2) factors by
 * which llama.cpp divides each of Llama's unscaled frequencies at
 * <arch>.rope.freq_base. NULL (and *n = 0) when c needs none. malloc'd. */
float *da_gguf_rope_freqs(const da_config *c, int *n);

#endif
