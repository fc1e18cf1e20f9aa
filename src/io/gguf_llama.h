/* llama.cpp's GGUF layout for diffattn's models (docs/formats.md):
 *   - the architecture: "llama" for a softmax model llama.cpp runs as it is
 *     (no sliding window), else a name of diffattn's own, "diffattn-" and
 *     the arch's da_arch_name ("diffattn-diff", "diffattn-softmax" for a
 *     windowed softmax model);
 *   - the hyperparameters under "<architecture>." as llama.cpp names them
 *     (llama.block_count, llama.attention.head_count, llama.rope.freq_base, ...);
 *   - llama.cpp's tensor names (token_embd, blk.N.attn_q, ..., output_norm,
 *     output; absent when tied), and for DIFF's own tensors names in the same
 *     style (blk.N.attn_lambda_q1.weight, blk.N.attn_sub_norm.weight, ...);
 *   - what llama.cpp has no key for, under "diffattn." (the exact RoPE rule,
 *     the quantization's activations and calibration).
 * diffattn's q/k rows already follow llama.cpp's rotation (GPT-J interleaved
 * pairs, ggml's "normal" RoPE), so no permutation is needed; the DIFF
 * framework's frequencies theta^(-j/(d/2-1)) are Llama's rule at
 * freq_base = theta^(d/(d-2)). */
#ifndef DA_IO_GGUF_LLAMA_H
#define DA_IO_GGUF_LLAMA_H

#include <stddef.h>

#include "diffattn/model.h"
#include "io/gguf.h"

/* 1 (and *out set) when arch is a name da_gguf_arch_of gives, else 0. */
int da_gguf_arch_parse(const char *arch, da_arch *out);

/* The GGUF name of a diffattn tensor name ("layers.3.attn.q_proj.weight" ->
 * "blk.3.attn_q.weight"), and back. 0 on success, -1 for a name outside the table. */
int da_gguf_name_to_llama(const char *native, char *out, size_t n);
int da_gguf_name_from_llama(const char *name, char *out, size_t n);

/* Every hyperparameter key of c under its architecture's prefix, and the
 * diffattn.* keys that make the RoPE rule exact. */
void da_config_gguf_add_llama(da_gguf_writer *w, const da_config *c);
/* The configuration of a file in this layout (general.architecture arch).
 * diffattn's own RoPE keys are preferred when present; otherwise Llama's rule
 * with <arch>.rope.freq_base and linear scaling. The vocabulary comes from
 * <arch>.vocab_size, else token_embd's rows; tying from output.weight's
 * absence. */
da_status da_config_gguf_get_llama(const da_gguf_file *f, const char *arch, da_config *c);

/* llama3 RoPE scaling as llama.cpp's rope_freqs tensor: (d/2) factors by
 * which llama.cpp divides each of Llama's unscaled frequencies at
 * <arch>.rope.freq_base. NULL (and *n = 0) when c needs none. malloc'd. */
float *da_gguf_rope_freqs(const da_config *c, int *n);

#endif
