/* Fused causal flash attention, one kernel for every architecture: DIFF
 * (two maps per head, O = A1 V - lambda A2 V), DIFF2 (two maps over one K and
 * a d-wide V, O = A1 V - lam_t A2 V with lam per row) and softmax (one map). Memory
 * is linear in T: probability tiles live in per-thread scratch, and the
 * backward recomputes them from the saved log-sum-exp (FlashAttention-2).
 *
 * Layouts are those of attention.h. Saved for the backward:
 *   lse: (B, H, maps, T), the log-sum-exp of each row of each map;
 *   DIFF, DIFF2: o1, o2: (B, T, C), each head's normalised A1 V and A2 V.
 *   softmax: opre itself is A V. */
#ifndef DA_FLASH_ATTENTION_H
#define DA_FLASH_ATTENTION_H

#include <stddef.h>

#include "attn/attention.h"

#define FLASH_BR 64 /* query rows per tile */
#define FLASH_BC 64 /* keys per tile */

/* Scratch floats of the kernels for a variant of layout lay. */
size_t da_flash_scratch_size(const attn_shape *s, const attn_layout *lay);

/* The part of it each thread works in. */
size_t da_flash_scratch_per_thread(const attn_shape *s, const attn_layout *lay);

/* The kernels are flash_forward and flash_backward of da_attn_ops (attention.h). */

#endif
