/* NSA's per-query pieces that the efficient kernels (nsa_flash.c) and the
 * decoding step (nsa_decode.c) share: the selection branch of one query and
 * one group, whose rep = H/G heads read each loaded key once, and the
 * importance of the selection blocks. Private to src/attn/nsa*.c. */
#ifndef DA_NSA_ROWS_H
#define DA_NSA_ROWS_H

#include "attn/nsa.h"

/* The keys of query t in the chosen blocks sel (n slots, -1 after the last),
 * as [start, end) runs; returns the number of runs. */
int nsa_sel_runs(int *start, int *end, const int *sel, int t, const nsa_shape *s);

/* Selection branch, forward, for query t and one group:
 *   q:   rep rows of d (the group's heads, adjacent), scaled logits q.k/sqrt(d)
 *   k, v: key rows; key u at k + u*ld
 *   o:   rep rows of d, overwritten; lse: rep values (stride lse_stride), overwritten
 *   sc:  scratch of rep * n * l' floats */
void nsa_slc_row_forward(float *o, float *lse, int lse_stride, const float *q, const float *k, const float *v, int ld,
                         const int *sel, int t, int rep, const nsa_shape *s, float *sc);

/* Its backward: dO (rep rows of d) the gradient of o; D (rep) = rowsum(dO * o);
 * dq (rep rows) +=; dk, dv key rows +=. sc: scratch of rep * n * l' floats. */
void nsa_slc_row_backward(float *dq, float *dk, float *dv, const float *dO, const float *D, const float *lse,
                          int lse_stride, const float *q, const float *k, const float *v, int ld, const int *sel,
                          int t, int rep, const nsa_shape *s, float *sc);

/* imp[0 .. t/l'] = the importance of each selection block for query t: the
 * sum over the rep heads' compressed probabilities p (rep rows, stride
 * p_stride, the first nsa_n_visible(t) entries) of the blocks inside it. */
void nsa_importance(float *imp, const float *p, int p_stride, int rep, int t, const nsa_shape *s);

#endif
