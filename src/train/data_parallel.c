/* Data-parallel training steps (see data_parallel.h). */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/data_parallel.h"
#include "train/optim.h"
#include "parallel/dist.h"

/* ---------------------------------------------------------------- exact sums */

/* The largest |gradient| of one window the fixed-point format holds. */
#define EXACT_RANGE 0x1p31
/* Windows per step the limbs can sum without overflow: |high| < 2^47 and
 * |low| <= 2^48 per window, int64 holds 2^63. */
#define EXACT_MAX_WINDOWS 16384

/* x as round(x * 2^64) split into high * 2^48 + low, both exact in double
 * arithmetic: x * 2^64 is exact (a power of two), trunc(y / 2^48) is exact, and
 * y - high * 2^48 only drops leading bits of y, so it is exact too; the one
 * rounding, llrint of that remainder, is a function of x alone. */
static inline void exact_split(float x, int64_t *high, int64_t *low) {
    double y = (double)x * 0x1p64;
    double h = trunc(y * 0x1p-48);
    *high = (int64_t)h;
    *low = (int64_t)llrint(y - h * 0x1p48);
}

/* acc (2n) += the fixed-point form of g (n). Returns 1 when some |g| is out
 * of range or not finite (nothing is added for those). */
static int exact_add(int64_t *acc, const float *g, size_t n) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (long i = 0; i < (long)n; i++) {
        float x = g[i];
        if (!(fabsf(x) < (float)EXACT_RANGE)) {
            bad = 1;
            continue;
        }
        int64_t h, l;
        exact_split(x, &h, &l);
        acc[2 * i] += h;
        acc[2 * i + 1] += l;
    }
    return bad;
}

/* g (n) = the accumulated sum (2n limbs) divided by count, rounded to float
 * by a fixed sequence of operations on the (identical) integers. */
static void exact_decode(const int64_t *acc, float *g, size_t n, int count) {
    const double inv = 1.0 / count;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < (long)n; i++) {
        double d = (double)acc[2 * i] * 0x1p48 + (double)acc[2 * i + 1];
        g[i] = (float)(d * 0x1p-64 * inv);
    }
}

/* ---------------------------------------------------------------- planning */

void da_dp_free(da_dp *dp) {
    free(dp->off);
    free(dp->c_off);
    free(dp->chunk_sq);
    free(dp->acc);
    free(dp->seq_loss);
    free(dp->tokens);
    free(dp->targets);
    memset(dp, 0, sizeof *dp);
}

da_status da_dp_create(da_dp *dp, const da_model *m, const da_train_config *tc) {
    memset(dp, 0, sizeof *dp);
    dp->rank = da_dist_rank();
    dp->size = da_dist_size();
    dp->deterministic = tc->deterministic;
    dp->zero = tc->zero;
    dp->T = tc->seq;
    dp->n = m->n_params;
    const int P = dp->size, B = tc->batch;
    if (tc->deterministic) {
        if (B % P)
            return da_errorf("batch: %d (the global batch) must be a multiple of the number of ranks, %d, so that "
                             "every rank gets as many windows (try batch %d)",
                             B, P, (B / P + 1) * P);
        if (B > EXACT_MAX_WINDOWS)
            return da_errorf("batch: deterministic training sums at most %d windows per step exactly; batch is %d",
                             EXACT_MAX_WINDOWS, B);
        dp->local = B / P;
        dp->micro = 1;
        dp->accum = dp->local;
    } else {
        if (B % (P * tc->grad_accum))
            return da_errorf("batch: %d (the global batch) must be a multiple of ranks x grad_accum = %d x %d, "
                             "so that every rank runs equal micro-batches (change grad_accum or batch)",
                             B, P, tc->grad_accum);
        dp->local = B / P;
        dp->accum = tc->grad_accum;
        dp->micro = dp->local / dp->accum;
    }
    /* shards: whole norm chunks, as even as chunks allow; without ZeRO
     * everyone's "shard" is everything (the off/cnt tables still describe the
     * chunk split, for nothing) */
    dp->n_chunks = (dp->n + DA_NORM_CHUNK - 1) / DA_NORM_CHUNK;
    dp->off = calloc(2 * (size_t)P, sizeof(size_t));
    dp->c_off = calloc(2 * (size_t)P, sizeof(size_t));
    dp->chunk_sq = calloc(dp->n_chunks, sizeof(double));
    dp->tokens = malloc((size_t)dp->local * dp->T * sizeof(int));
    dp->targets = malloc((size_t)dp->local * dp->T * sizeof(int));
    if (!dp->off || !dp->c_off || !dp->chunk_sq || !dp->tokens || !dp->targets) goto oom;
    dp->cnt = dp->off + P;
    dp->c_cnt = dp->c_off + P;
    for (int r = 0; r < P; r++) {
        size_t c0 = dp->n_chunks * r / P, c1 = dp->n_chunks * (r + 1) / P;
        dp->c_off[r] = c0;
        dp->c_cnt[r] = c1 - c0;
        size_t e0 = c0 * DA_NORM_CHUNK, e1 = c1 * DA_NORM_CHUNK < dp->n ? c1 * DA_NORM_CHUNK : dp->n;
        dp->off[r] = e0;
        dp->cnt[r] = e1 - e0;
        if (2 * dp->cnt[r] > INT_MAX || 2 * dp->off[r] > INT_MAX)
            return da_errorf("the model's %zu parameters make shards too large for one MPI message; use more ranks",
                             dp->n);
    }
    dp->lo = dp->zero ? dp->off[dp->rank] : 0;
    dp->hi = dp->zero ? dp->off[dp->rank] + dp->cnt[dp->rank] : dp->n;
    if (dp->deterministic) {
        dp->acc = malloc(2 * dp->n * sizeof(int64_t));
        dp->seq_loss = malloc((size_t)B * sizeof(double));
        if (!dp->acc || !dp->seq_loss) goto oom;
    }
    return da_ok();
oom:
    da_dp_free(dp);
    return da_errorf("out of memory planning data-parallel buffers (%zu parameters, %d windows per rank)", dp->n,
                     dp->local);
}

da_status da_dp_shard_optimizer(const da_dp *dp, da_adamw *opt) {
    if (!dp->zero || (dp->lo == 0 && dp->hi == dp->n)) return da_ok();
    size_t k = dp->hi - dp->lo;
    float *mm = malloc((k + 1) * sizeof(float)), *vv = malloc((k + 1) * sizeof(float));
    if (!mm || !vv) {
        free(mm);
        free(vv);
        return da_errorf("out of memory sharding the AdamW moments");
    }
    memcpy(mm, opt->m + dp->lo, k * sizeof(float));
    memcpy(vv, opt->v + dp->lo, k * sizeof(float));
    free(opt->m);
    free(opt->v);
    opt->m = mm;
    opt->v = vv;
    opt->n = k;
    return da_ok();
}

size_t da_dp_optimizer_bytes(const da_dp *dp) { return 2 * (dp->hi - dp->lo) * sizeof(float); }

/* ---------------------------------------------------------------- a step */

/* Squared norm of the gradients [lo, hi) by chunks, the chunks summed in
 * order; under ZeRO every rank's chunk partials are gathered first. */
static da_status grad_norm(da_dp *dp, const da_model *m, float *norm) {
    size_t c0 = dp->zero ? dp->c_off[dp->rank] : 0, c1 = dp->zero ? c0 + dp->c_cnt[dp->rank] : dp->n_chunks;
#pragma omp parallel for schedule(static)
    for (long c = (long)c0; c < (long)c1; c++) {
        size_t e0 = (size_t)c * DA_NORM_CHUNK, e1 = e0 + DA_NORM_CHUNK < dp->n ? e0 + DA_NORM_CHUNK : dp->n;
        double s = 0.0;
        for (size_t i = e0; i < e1; i++) s += (double)m->grads[i] * m->grads[i];
        dp->chunk_sq[c] = s;
    }
    if (dp->zero) {
        da_status st = da_dist_allgather_f64(dp->chunk_sq, dp->c_off, dp->c_cnt, "gradient-norm partials");
        if (st.code) return st;
    }
    double s = 0.0;
    for (size_t c = 0; c < dp->n_chunks; c++) s += dp->chunk_sq[c];
    *norm = (float)sqrt(s);
    return da_ok();
}

da_status da_dp_gradients(da_dp *dp, da_model *m, da_acts *a, const da_data_source *src, da_rng *rng, int stop_local,
                          double *loss, float *norm, int *stop_any) {
    const int T = dp->T, P = dp->size, B = dp->local * P;
    da_status st;
    src->next(src->self, rng, B, dp->rank, P, T, dp->tokens, dp->targets);
    /* flags[0]: a stop was requested; flags[1]: a gradient left the exact range */
    int64_t flags[2] = {stop_local != 0, 0};
    if (dp->deterministic) {
        memset(dp->acc, 0, 2 * dp->n * sizeof(int64_t));
        memset(dp->seq_loss, 0, (size_t)B * sizeof(double));
        for (int i = 0; i < dp->local; i++) {
            da_model_zero_grads(m);
            float l = da_forward(m, a, dp->tokens + (size_t)i * T, dp->targets + (size_t)i * T, 1, T);
            da_backward(m, a);
            dp->seq_loss[(size_t)i * P + dp->rank] = l; /* global window index */
            if (exact_add(dp->acc, m->grads, dp->n)) flags[1] = 1;
        }
        /* every entry is non-zero on one rank only: the float sum is exact */
        if ((st = da_dist_allreduce_sum_f64(dp->seq_loss, (size_t)B, "per-window losses")).code) return st;
        if ((st = da_dist_allreduce_max_i64(flags, 2, "stop and range flags")).code) return st;
        double s = 0.0;
        for (int j = 0; j < B; j++) s += dp->seq_loss[j];
        *loss = s / B;
        if (flags[1])
            return da_errorf("deterministic: the gradient of a window has an element beyond 2^31 or not finite "
                             "(loss %g); lower lr or raise warmup",
                             *loss);
        if (dp->zero) {
            size_t off2[P > 0 ? P : 1], cnt2[P > 0 ? P : 1];
            for (int r = 0; r < P; r++) off2[r] = 2 * dp->off[r], cnt2[r] = 2 * dp->cnt[r];
            if ((st = da_dist_reduce_scatter_sum_i64(dp->acc, off2, cnt2, "gradients (exact)")).code) return st;
            exact_decode(dp->acc + 2 * dp->lo, m->grads + dp->lo, dp->hi - dp->lo, B);
        } else {
            if ((st = da_dist_allreduce_sum_i64(dp->acc, 2 * dp->n, "gradients (exact)")).code) return st;
            exact_decode(dp->acc, m->grads, dp->n, B);
        }
    } else {
        da_model_zero_grads(m);
        double small[2] = {0.0, (double)flags[0]}; /* loss sum, stop */
        for (int k = 0; k < dp->accum; k++) {
            size_t o = (size_t)k * dp->micro * T;
            small[0] += da_forward(m, a, dp->tokens + o, dp->targets + o, dp->micro, T);
            da_backward(m, a);
        }
        if ((st = da_dist_allreduce_sum_f64(small, 2, "loss and stop flag")).code) return st;
        flags[0] = small[1] > 0;
        *loss = small[0] / ((double)dp->accum * P);
        if (dp->zero) {
            if ((st = da_dist_reduce_scatter_sum_f32(m->grads, dp->off, dp->cnt, "gradients")).code) return st;
        } else if ((st = da_dist_allreduce_sum_f32(m->grads, dp->n, "gradients")).code) {
            return st;
        }
        const int div = dp->accum * P;
        if (div > 1) {
            const float s = 1.0f / div;
            for (size_t i = dp->lo; i < dp->hi; i++) m->grads[i] *= s;
        }
    }
    *stop_any = flags[0] != 0;
    return grad_norm(dp, m, norm);
}

da_status da_dp_update(da_dp *dp, da_model *m, da_adamw *opt, const da_adamw_config *ac, float lr, float clip,
                       float norm) {
    if (clip > 0 && norm > clip) {
        const float s = clip / norm;
        for (size_t i = dp->lo; i < dp->hi; i++) m->grads[i] *= s;
    }
    da_adamw_step_range(opt, m, ac, lr, dp->lo, dp->hi);
    if (dp->zero) return da_dist_allgather_f32(m->params, dp->off, dp->cnt, "parameters");
    return da_ok();
}

da_status da_dp_val_loss(da_dp *dp, da_model *m, da_acts *a, const da_data_source *src, long n_windows, float *out,
                         double *accuracy) {
    const int c = dp->micro, T = dp->T, V = m->cfg.vocab_size;
    const long n_chunks = (n_windows + c - 1) / c;
    /* (n_chunks) loss x windows per chunk, then the positions scored and the right ones */
    double *vals = calloc((size_t)n_chunks + 2, sizeof(double));
    if (!vals) return da_errorf("out of memory (%ld validation chunks)", n_chunks);
    /* chunk q is rank q % P's; its value is loss x windows, as in the
     * single-process evaluation, and zero on every other rank */
    long right = 0, total = 0;
    for (long q = dp->rank; q < n_chunks; q += dp->size) {
        int b = (int)(n_windows - q * c < c ? n_windows - q * c : c);
        for (int i = 0; i < b; i++)
            src->held_out(src->self, q * c + i, n_windows, T, dp->tokens + (size_t)i * T, dp->targets + (size_t)i * T);
        vals[q] = (double)da_forward(m, a, dp->tokens, dp->targets, b, T) * b;
        if (src->score) src->score(src->self, dp->targets, da_acts_logits(a), b, T, V, &right, &total);
    }
    vals[n_chunks] = (double)total, vals[n_chunks + 1] = (double)right; /* integers: their sum is exact */
    da_status st = da_dist_allreduce_sum_f64(vals, (size_t)n_chunks + 2, "validation losses");
    double sum = 0.0;
    for (long q = 0; q < n_chunks; q++) sum += vals[q];
    *out = (float)(sum / n_windows);
    *accuracy = !src->score ? NAN : vals[n_chunks] > 0 ? vals[n_chunks + 1] / vals[n_chunks] : 0;
    free(vals);
    return st;
}

da_status da_dp_full_moments(const da_dp *dp, da_adamw *opt, float *scratch, da_adamw *full, float **owned) {
    *owned = NULL;
    if (!dp->zero || dp->size == 1) {
        *full = *opt;
        return da_ok();
    }
    memset(full, 0, sizeof *full);
    if (dp->rank == 0) {
        /* the first moments go into the caller's scratch (the gradients,
         * spent after the update), only the second ones need new memory */
        full->n = dp->n;
        full->step = opt->step;
        full->m = scratch;
        if (!(full->v = *owned = malloc(dp->n * sizeof(float))))
            return da_errorf("out of memory gathering the AdamW moments for the checkpoint (%.1f MB)",
                             (double)dp->n * 4 / 1e6);
    }
    da_status st = da_dist_gather_f32(opt->m, full->m, dp->off, dp->cnt, "AdamW first moments");
    if (!st.code) st = da_dist_gather_f32(opt->v, full->v, dp->off, dp->cnt, "AdamW second moments");
    return st;
}

da_status da_dp_check_replicas(const da_dp *dp, const da_model *m, long step) {
    if (dp->size == 1) return da_ok();
    /* FNV-1a over the parameter bytes; max of h and of -h gives both the
     * largest and the smallest hash over the ranks */
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *p = (const unsigned char *)m->params;
    for (size_t i = 0; i < m->n_params * sizeof(float); i++) h = (h ^ p[i]) * 1099511628211ULL;
    int64_t v[2] = {(int64_t)(h >> 1), -(int64_t)(h >> 1)};
    da_status st = da_dist_allreduce_max_i64(v, 2, "comparing parameter hashes");
    if (st.code) return st;
    if (v[0] != -v[1])
        return da_errorf("after step %ld the ranks hold different parameters (the reduction did not give every rank "
                         "the same gradients); rerun with deterministic training",
                         step);
    return da_ok();
}
