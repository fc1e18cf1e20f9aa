/* Private to src/attn/nsa*.c: the sizes that the per-level kernels
 * (nsa_variant.c: nsa_rows.c, nsa_flash.c, nsa_decode.c) and the code compiled
 * once (nsa_common.c) both need. */
#ifndef DA_NSA_ROWS_H
#define DA_NSA_ROWS_H

#include "attn/attention.h"
#include "attn/nsa.h"

#define NSA_BR 128 /* queries per tile of the efficient kernels: more of them share each chosen block's GEMMs */

/* Floats of one thread's part of the efficient kernels' scratch. */
size_t nsa_flash_scratch_per_thread(const nsa_shape *s);
/* The window branch runs on the flash kernels (flash_attention.h) as softmax attention with a window of w:
 * this shape and layout. */
static const attn_layout NSA_WINDOW_LAYOUT = {1, 1, 1};
attn_shape nsa_window_shape(const nsa_shape *s);
/* Where the window's part of the efficient kernels' scratch starts, and its floats: the flash kernels'
 * scratch, their log-sum-exp (B, H, T), and the backward's dO and dQ (B, T, H*d each). */
size_t nsa_flash_window_offset(const nsa_shape *s);
size_t nsa_flash_window_floats(const nsa_shape *s);
/* Where the efficient kernels' transposed keys and values start (after the window's part), and their
 * floats: k_slc, v_slc as (B, G*d, nsa_ldT(T)) each, Kc, Vc as (B, G*d, nsa_ldT(Nc)) each. */
size_t nsa_flash_planes_offset(const nsa_shape *s);
size_t nsa_flash_planes_floats(const nsa_shape *s);
/* Floats of the efficient kernels' per-thread operand buffer (nsa_flash.c's bt). */
size_t nsa_flash_bt_floats(const nsa_shape *s);
/* The widest score row of the efficient kernels' compression branch: Nc. */
int nsa_flash_max_cols(const nsa_shape *s);
/* A row of the efficient kernels' selection logits: a slot of l' per chosen block, min(n, T/l' + 1) slots. */
int nsa_slot_cols(const nsa_shape *s);
/* Keys one branch of a decoding step may read: max(max_T/s + 1, n*l', w). */
int nsa_decode_cols(const nsa_shape *s, int max_T);

#endif
