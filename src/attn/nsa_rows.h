/* Private to src/attn/nsa*.c: the sizes that the per-level kernels
 * (nsa_variant.c: nsa_rows.c, nsa_flash.c, nsa_decode.c) and the code compiled
 * once (nsa_common.c) both need. */
#ifndef DA_NSA_ROWS_H
#define DA_NSA_ROWS_H

#include "attn/nsa.h"

#define NSA_BR 128 /* queries per tile of the efficient kernels: more of them share each chosen block's GEMMs */

/* Floats of one thread's part of the efficient kernels' scratch. */
size_t nsa_flash_scratch_per_thread(const nsa_shape *s);
/* The widest score row of the efficient kernels' dense branches: max(Nc, w + NSA_BR - 1). */
int nsa_flash_max_cols(const nsa_shape *s);
/* A row of the efficient kernels' selection logits: a slot of l' per chosen block, min(n, T/l' + 1) slots. */
int nsa_slot_cols(const nsa_shape *s);
/* Keys one branch of a decoding step may read: max(max_T/s + 1, n*l', w). */
int nsa_decode_cols(const nsa_shape *s, int max_T);

#endif
