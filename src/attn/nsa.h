/* NSA, Native Sparse Attention (DeepSeek 2025, arXiv 2502.11089), as
 * diffattn specifies it: three branches over one query, each with its own
 * keys and values, mixed per head by sigmoid gates.
 *
 * Notation: B sequences of T tokens, H query heads of size d, G KV heads;
 * query head h reads group g = h / (H / G). l = block (compression block
 * length), s = stride, l' = select (selection block length), n = topn
 * (selection blocks per query, the three forced ones included), w = window.
 *
 *   compression: block i covers tokens i*s .. i*s+l-1 and is visible to query
 *     t iff i*s + l - 1 <= t. Kc_i = Wck . flatten(k_cmp[i*s .. i*s+l-1] + pe_k),
 *     Vc_i likewise with Wcv, pe_v (flatten row-major over (position,
 *     channel); Wck, Wcv shared by the groups). o_cmp = softmax(q Kc^T /
 *     sqrt(d)) Vc over the visible blocks, 0 when none is.
 *   selection: block j covers tokens j*l' .. j*l'+l'-1, j = 0 .. t/l'. Its
 *     importance for (t, g) sums, over g's heads and the visible compressed
 *     blocks lying wholly inside it, their compressed probabilities. Block 0,
 *     t/l' and t/l' - 1 are forced; the rest follow by importance (ties to the
 *     lower index) up to n. o_slc = softmax attention over the chosen blocks'
 *     tokens <= t with k_slc, v_slc. The choice carries no gradient.
 *   window: o_win = softmax attention over keys t-w+1 .. t (k_win, v_win).
 *   o_h = gate[h*3+0] o_cmp + gate[h*3+1] o_slc + gate[h*3+2] o_win.
 *
 * Layouts (row-major):
 *   q, out, o_*:           (B, T, H*d), head h at columns h*d; q RoPE'd
 *   k_*, v_*:              (B, T, G*d), group g at columns g*d; k_slc, k_win RoPE'd, k_cmp not
 *   gate:                  (B, T, H*3), after the sigmoid, index h*3 + c (cmp, slc, win)
 *   wck, wcv:              (d, l*d);  pe_k, pe_v: (l, d)
 *   kc, vc:                (B, Nc, G*d), the compressed keys and values, Nc = nsa_n_compressed(T)
 *   sel:                   (B, T, G, n) the chosen selection blocks, ascending, -1 after the last
 *
 * Gradients: the activations' (dq, dk_*, dv_*, dgate) are overwritten; the
 * parameters' (dwck, dwcv, dpe_k, dpe_v) are accumulated (+=). */
#ifndef DA_NSA_H
#define DA_NSA_H

#include <stddef.h>

#include "diffattn/core.h"
#include "diffattn/exec.h"

#define NSA_MAX_TOPN 1024 /* n's upper bound (the config's range) */

typedef struct {
    int B, T;
    int H, G, d;
    int block, stride, select, topn, window; /* l, s, l', n, w */
    int n_threads;                           /* OpenMP threads the scratch was sized for */
} nsa_shape;

/* The attention's inputs: layouts above. */
typedef struct {
    const float *q, *k_cmp, *v_cmp, *k_slc, *v_slc, *k_win, *v_win, *gate;
    const float *wck, *wcv, *pe_k, *pe_v;
} nsa_inputs;

/* Their gradients: the activations' overwritten, the parameters' +=. */
typedef struct {
    float *dq, *dk_cmp, *dv_cmp, *dk_slc, *dv_slc, *dk_win, *dv_win, *dgate;
    float *dwck, *dwcv, *dpe_k, *dpe_v;
} nsa_grads;

/* What a forward keeps for its backward (sizes: nsa_saved_floats).
 *   kc, vc:              (B, Nc, G*d)
 *   o_cmp, o_slc, o_win: (B, T, H*d), each branch's output before the gates
 *   sel:                 (B, T, G, n)
 *   flash:     lse:      (B, T, H, 3) each branch's log-sum-exp of logits (-inf: no key)
 *   reference: att_cmp:  (B, H, T, Nc); att_slc, att_win: (B, H, T, T), the maps */
typedef struct {
    float *kc, *vc, *o_cmp, *o_slc, *o_win;
    int *sel;
    float *lse;
    float *att_cmp, *att_slc, *att_win;
} nsa_saved;

/* The row stride of a transposed key cache of n keys: n rounded up to 1024,
 * plus 16, so that the channels' rows (read together, one cache line each)
 * never fall into the same cache sets, as a power-of-two stride would. */
static inline int nsa_ldT(int n) { return (n + 1023) / 1024 * 1024 + 16; }

/* Compressed blocks of a sequence of T tokens: (T - l) / s + 1, or 0 when T < l. */
static inline int nsa_n_compressed(const nsa_shape *s, int T) {
    return T >= s->block ? (T - s->block) / s->stride + 1 : 0;
}
/* Compressed blocks query t sees. */
static inline int nsa_n_visible(const nsa_shape *s, int t) { return nsa_n_compressed(s, t + 1); }

/* The selection block compressed block i lies wholly inside, or -1. */
static inline int nsa_owner_block(const nsa_shape *s, int i) {
    const int j = i * s->stride / s->select;
    return i * s->stride + s->block - 1 <= j * s->select + s->select - 1 ? j : -1;
}

/* The blocks query t chooses from imp[0 .. t/l'] (its group's importance):
 * the forced ones, then by importance, ties to the lower index, at most n;
 * written ascending to chosen (n slots, -1 after the last). Returns the count. */
int nsa_choose_blocks(int *chosen, const float *imp, int t, const nsa_shape *s);

/* kc: (B, Nc, G*d) = Wc . flatten(kv[block] + pe) per block and group; kv: (B, T, G*d). */
void nsa_compress_forward(float *kc, const float *kv, const float *wc, const float *pe, const nsa_shape *s);
/* dkv: (B, T, G*d) +=; dwc: (d, l*d) +=; dpe: (l, d) +=; dkc: (B, Nc, G*d). */
void nsa_compress_backward(float *dkv, float *dwc, float *dpe, const float *dkc, const float *kv, const float *wc,
                           const float *pe, const nsa_shape *s);

/* Floats of each saved buffer (the maps only for the reference kernel). */
size_t nsa_saved_floats_kv(const nsa_shape *s);  /* kc or vc */
size_t nsa_saved_floats_out(const nsa_shape *s); /* o_cmp, o_slc or o_win */
size_t nsa_saved_ints_sel(const nsa_shape *s);   /* sel */
size_t nsa_saved_floats_lse(const nsa_shape *s); /* lse */
size_t nsa_saved_floats_att(const nsa_shape *s); /* att_cmp + att_slc + att_win together */

/* Reference kernels: every map stored (O(T^2) memory), loops as the text reads.
 * out: (B, T, H*d). Fills sv->kc, vc, o_*, sel, att_*. */
void nsa_reference_forward(float *out, const nsa_inputs *in, nsa_saved *sv, const nsa_shape *s);
/* dout: (B, T, H*d). Fills every pointer of g (see above); scratch: nsa_reference_scratch_floats. */
void nsa_reference_backward(const nsa_grads *g, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                            const nsa_shape *s, float *scratch);
size_t nsa_reference_scratch_floats(const nsa_shape *s);

/* Scratch floats of the efficient kernels (nsa_kernels below). */
size_t nsa_flash_scratch_floats(const nsa_shape *s);

/* The decoding cache of one layer and one sequence (B = 1); keys transposed
 * (channel k = g*d + c of a token in row k), values as rows:
 *   k_slc: (G*d, nsa_ldT(max_T)), v_slc: (max_T, G*d)  every token (the selection may pick any block)
 *   k_win: (G*d, nsa_ldT(w)),     v_win: (w, G*d)      a ring: token t at column / row t % w
 *   k_raw, v_raw: (l, G*d)                     a ring of the last l tokens' k_cmp, v_cmp
 *   kc: (G*d, nsa_ldT(max_T/s + 1)), vc: (max_T/s + 1, G*d)  the compressed blocks, appended as each completes
 * Floats per layer: nsa_cache_floats. */
typedef struct {
    float *k_slc, *v_slc, *k_win, *v_win, *k_raw, *v_raw, *kc, *vc;
    int max_T, n_tokens, n_blocks;
} nsa_cache;

size_t nsa_cache_floats(const nsa_shape *s, int max_T);
/* Lays the cache out in mem (nsa_cache_floats floats), empty. */
void nsa_cache_init(nsa_cache *c, float *mem, const nsa_shape *s, int max_T);
size_t nsa_decode_scratch_floats(const nsa_shape *s, int max_T);

/* The hot kernels, compiled once per instruction-set level (nsa_variant.c). */
typedef struct {
    da_isa isa; /* the level this table's code was compiled for */
    /* The efficient kernels: cost ~ T * (T/s + n*l' + w) per head, memory
     * linear in T; a group's heads share each loaded key. The forward fills
     * sv->kc, vc, o_*, sel, lse (no maps). scratch: nsa_flash_scratch_floats. */
    void (*flash_forward)(float *out, const nsa_inputs *in, nsa_saved *sv, const nsa_shape *s, float *scratch);
    void (*flash_backward)(const nsa_grads *g, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                           const nsa_shape *s, float *scratch);
    /* One token at position c->n_tokens: appends its keys and values (the
     * input rows: q (H*d), k_*, v_* (G*d), gate (H*3)), completes a compressed
     * block when one ends here, and writes out (H*d). scratch:
     * nsa_decode_scratch_floats. The caller keeps n_tokens < max_T. */
    void (*decode_step)(float *out, nsa_cache *c, const nsa_inputs *in, const nsa_shape *s, float *scratch);
} nsa_kernels;

/* The table of level isa, or of the best level below it that this CPU runs. */
const nsa_kernels *nsa_kernels_of(da_isa isa);

/* Floating-point operations of one forward (multiply-add = 2) of the
 * attention core, projections excluded; the backward is about twice that. */
double nsa_forward_flops(const nsa_shape *s);

#endif
