/* Data-parallel training steps over the ranks of dist.h.
 *
 * The global batch B (--batch) is the same on any number of ranks P. Every
 * rank draws all B window offsets of a step from the shared, identically
 * seeded sampler RNG, and keeps the windows j = rank, rank + P, ... (a
 * rank-strided slice: disjoint, and together the same windows a single
 * process would train on). So the RNG, and the checkpoint, do not depend on P.
 *
 * Two reductions:
 *  - the default: each rank runs its B/P windows in --grad-accum micro-batches
 *    of B/(P*A), the float gradients are summed with an allreduce (buckets of
 *    8 MB, up to 16 in flight together) and scaled by 1/(A*P). Equal to one process up
 *    to float summation order.
 *  - --deterministic: every window's gradient is computed alone (a micro-batch
 *    of one) and added exactly, as a 112-bit fixed-point number (two int64
 *    limbs, resolution 2^-64, range 2^31), into an integer accumulator; the
 *    integer allreduce is exact, so the sum is the same bits for any P, any
 *    assignment of windows to ranks and any MPI reduction order. Losses and
 *    gradient-norm partials are summed in a fixed order. One process and P
 *    ranks then train bit-identically.
 *
 * ZeRO-1 (--zero 1): the AdamW moments of rank r cover only its shard
 * [lo, hi) of the flat parameter buffer (chunk-aligned, about n/P). The
 * gradients are reduce-scattered, each rank updates its own shard, and the
 * parameters are all-gathered. */
#ifndef DA_DATA_PARALLEL_H
#define DA_DATA_PARALLEL_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/train.h"

/* Gradient-norm partial sums are taken over chunks of this many parameters,
 * a size that does not depend on P; shards start on chunk boundaries. */
#define DA_NORM_CHUNK 1024

typedef struct {
    int rank, size, deterministic, zero;
    int T;
    int local;       /* windows per step on this rank: batch / size */
    int micro;       /* windows per forward pass (deterministic: 1) */
    int accum;       /* forward passes per step on this rank */
    size_t n;        /* parameters */
    size_t lo, hi;   /* this rank's shard (ZeRO-1); 0, n otherwise */
    size_t *off, *cnt;           /* (size) every rank's shard, in parameters */
    size_t n_chunks;             /* ceil(n / DA_NORM_CHUNK) */
    size_t *c_off, *c_cnt;       /* (size) every rank's chunks */
    double *chunk_sq;            /* (n_chunks) sum of squared gradients per chunk */
    int64_t *acc;                /* deterministic: (2 n) limbs per parameter, (high, low) */
    double *seq_loss;            /* deterministic: (batch) per-window losses in global order */
    int *tokens, *targets;       /* (local, T) this rank's windows of the step */
} da_dp;

/* Plans the split of tc->batch over the ranks and allocates the buffers.
 * The message says which flag to change when the batch does not divide. */
da_status da_dp_create(da_dp *dp, const da_model *m, const da_train_config *tc);
void da_dp_free(da_dp *dp);
/* Batch size da_acts must hold: dp->micro. */

/* ZeRO-1: keeps only this rank's slice of full moments (n_params each). */
da_status da_dp_shard_optimizer(const da_dp *dp, da_adamw *opt);
/* Bytes of AdamW moments this rank holds. */
size_t da_dp_optimizer_bytes(const da_dp *dp);

/* The gradient of one step: samples this rank's windows, runs forward and
 * backward, reduces. On return m->grads[lo, hi) holds the mean gradient over
 * the global batch (the whole buffer without ZeRO), *loss the mean loss,
 * *norm the global gradient norm, and *stop_any is 1 when any rank's stop
 * flag was set (all ranks see the same values). */
da_status da_dp_gradients(da_dp *dp, da_model *m, da_acts *a, const da_data_source *src, da_rng *rng, int stop_local,
                          double *loss, float *norm, int *stop_any);
/* Clip (when clip > 0 and norm > clip), AdamW on the own shard, all-gather
 * the parameters (ZeRO). */
da_status da_dp_update(da_dp *dp, da_model *m, da_adamw *opt, const da_adamw_config *ac, float lr, float clip,
                       float norm);
/* Mean loss over the source's n_windows held-out windows, split over the
 * ranks in chunks of dp->micro windows and summed in chunk order, and the
 * source's score of them (NAN when it has none). */
da_status da_dp_val_loss(da_dp *dp, da_model *m, da_acts *a, const da_data_source *src, long n_windows, float *out,
                         double *accuracy);
/* For a checkpoint: the whole moments on rank 0 in *full. Under ZeRO they
 * are gathered: the first moments into scratch (n_params floats that rank 0
 * may overwrite, e.g. the spent gradients), the second into *owned, which
 * the caller frees. Without ZeRO *full is *opt. */
da_status da_dp_full_moments(const da_dp *dp, da_adamw *opt, float *scratch, da_adamw *full, float **owned);
/* Checks that every rank holds the same parameters (a hash compared across
 * ranks); an error names the step. */
da_status da_dp_check_replicas(const da_dp *dp, const da_model *m, long step);

#endif
