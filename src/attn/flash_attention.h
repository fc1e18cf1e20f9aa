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

/* kind: an attn_kind (0 softmax, 1 DIFF, 2 DIFF2). */
size_t flash_scratch_size(const attn_shape *s, int kind);

/* opre: (B, T, C) = per head sum_m c_m A_m V with c = (1, -lambda) for DIFF,
 * (1, -lam[b, t, h]) for DIFF2 (lam: (B, T, H); NULL otherwise), (1) for
 * softmax. o1, o2 (DIFF, DIFF2; else NULL) and lse are saved. */
void flash_attention_forward(float *opre, float *o1, float *o2, float *lse, const float *q, const float *k,
                             const float *v, float lambda, const float *lam, int kind, const attn_shape *s,
                             float *scratch);

/* dq, dk, dv overwritten; *dlambda overwritten (DIFF; may be NULL
 * otherwise); dlam: (B, T, H) overwritten with d loss / d lam (DIFF2; NULL
 * otherwise). dopre: (B, T, C), the gradient of opre. */
void flash_attention_backward(float *dq, float *dk, float *dv, float *dlambda, float *dlam, const float *dopre,
                              const float *opre, const float *o1, const float *o2, const float *lse,
                              const float *q, const float *k, const float *v, float lambda, const float *lam,
                              int kind, const attn_shape *s, float *scratch);

#endif
