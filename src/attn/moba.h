/* MoBA, Mixture of Block Attention (Kimi 2025, arXiv 2502.13189), as diffattn
 * specifies it (docs/model.md): softmax's heads, each query attending to the
 * keys of a few blocks. Private to src/attn/moba*.c.
 *
 * Notation: B sequences of T tokens, H query heads of size d, G KV groups;
 * head h reads group g = h / (H / G). Bk = the block length, k = the blocks
 * per query. Query t lies in block c = t / Bk. Each earlier block j < c
 * (complete, since j < c) scores s_j = q_t . mean(k[j Bk .. j Bk + Bk - 1]);
 * the query attends, with softmax(q k^T / sqrt(d)), to the keys <= t of
 * {c} and the k - 1 best-scoring earlier blocks (ties to the lower j; all of
 * them when there are fewer). The choice carries no gradient.
 *
 * Layouts (row-major):
 *   q, out:   (B, T, H*d), head h at columns h*d, after RoPE
 *   k, v:     (B, T, G*d), group g at columns g*d, k after RoPE
 *   km:       (B, T/Bk, G*d) the means of the complete blocks' keys
 *   sel:      (B, T, H, k) the chosen blocks of each (query, head), ascending, -1 after the last
 *   lse:      (B, T, H) flash: each row's log-sum-exp of its logits
 *   att:      (B, H, T, T) reference: the maps, 0 outside the chosen keys
 * Gradients dq, dk, dv are overwritten. */
#ifndef DA_MOBA_H
#define DA_MOBA_H

#include <stddef.h>

#include "diffattn/exec.h"

typedef struct {
    int B, T, H, G, d;
    int block, topk; /* Bk, k */
    int n_threads;   /* OpenMP threads the scratch was sized for */
} moba_shape;

/* The blocks of which query t chooses, from score[0 .. c-1] (c = t / Bk): c
 * and the k - 1 best earlier ones, ties to the lower index; written ascending
 * to sel (k slots, -1 after the last). Returns the count. The training
 * kernels, the decoding cache and the analysis hooks all choose through it. */
int moba_choose(int *sel, const float *score, int c, int k);

/* mean: (d) = the mean of the n rows of k (stride ld): summed in row order, then divided by n,
 * the same order in every caller, so that training, decoding and analysis choose alike. */
void moba_block_mean(float *mean, const float *k, size_t ld, int n, int d);

/* A block's score q . mean: the products summed in channel order, each
 * product rounded before its sum, so that the training kernels (vectorised
 * over the blocks, moba_kernels.c), decoding and analysis score alike at
 * every instruction-set level and choose the same blocks. */
float moba_score_dot(const float *q, const float *mean, int d);

/* Queries per tile of the flash kernels: a tile lies in one block, so its
 * rows share their current block and most of their chosen earlier ones. */
#define MOBA_BR 64

size_t moba_select_scratch_floats(const moba_shape *s);
/* One thread's tile buffers (moba_kernels.c's tile_ws), and all threads' together. */
size_t moba_tile_floats(const moba_shape *s);
size_t moba_kernel_scratch_floats(const moba_shape *s);

/* The hot kernels, compiled once per instruction-set level (moba_variant.c). */
typedef struct {
    da_isa isa; /* the level this table's code was compiled for */
    /* a . b over d floats: the key logits of decoding and analysis (block
     * scores go through moba_score_dot). */
    float (*dot)(const float *a, const float *b, int d);
    /* km, then sel for every (b, t, h). scratch: moba_select_scratch_floats. */
    void (*select)(int *sel, float *km, const float *q, const float *k, const moba_shape *s, float *scratch);
    /* The efficient kernels: each query reads only its chosen keys, a tile
     * of queries one chosen block at a time, as small matrix products; the
     * backward recomputes the probabilities from lse. scratch: moba_kernel_scratch_floats. */
    void (*flash_forward)(float *out, float *lse, const float *q, const float *k, const float *v, const int *sel,
                          const moba_shape *s, float *scratch);
    void (*flash_backward)(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                           const float *q, const float *k, const float *v, const int *sel, const moba_shape *s,
                           float *scratch);
    /* The reference kernels: the dense maps (att), zero outside the chosen keys, kept for the backward. */
    void (*reference_forward)(float *out, float *att, const float *q, const float *k, const float *v,
                              const int *sel, const moba_shape *s, float *scratch);
    void (*reference_backward)(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                               const float *k, const float *v, const moba_shape *s, float *scratch);
} moba_kernels;

/* The table of level isa, or of the best level below it that this CPU runs. */
const moba_kernels *moba_kernels_of(da_isa isa);

#endif
