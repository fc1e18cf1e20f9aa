/* MoBA (Mixture of Block Attention, Kimi 2025, arXiv 2502.13189) as a
 * variant: softmax's tensors and heads, so that a softmax model's weights run
 * as MoBA; the block choice and attention of moba.h in training, its own
 * decoding cache, the analysis hooks and its FLOPs. docs/model.md states the
 * computation. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/moba.h"
#include "attn/variant.h"
#include "attn/variant_common.h"

/* softmax's order and names (its checkpoint without the optional head norm) */
enum { Q, K, V, OUT, N_TENSORS };

static int moba_tensors(const da_config *c, attn_tensor *t) {
    const int C = c->dim, Ckv = da_attn_kv_cols(c);
    t[Q] = attn_in("q_proj.weight", C, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, C);
    return N_TENSORS;
}

static da_status moba_validate(const da_config *c) {
    if (c->moba_block < 1) return da_errorf("moba_block: %d must be >= 1 (the keys of a block)", c->moba_block);
    if (c->moba_topk < 1)
        return da_errorf("moba_topk: %d must be >= 1 (the blocks a query attends to, its own included)", c->moba_topk);
    if (c->window > 0)
        return da_errorf("window: %d does not apply to --arch moba (its sparsity is --moba-block and --moba-topk)",
                         c->window);
    return da_ok();
}

static moba_shape shape_of(const da_config *c, int B, int T, int n_threads) {
    const moba_shape s = {B, T, c->n_heads, c->n_kv_heads, c->dim / c->n_heads, c->moba_block, c->moba_topk,
                          n_threads > 0 ? n_threads : 1};
    return s;
}

static moba_shape shape_of_attn(const attn_shape *a) { return shape_of(a->cfg, a->B, a->T, a->n_threads); }

/* The saved activations for shape s: sel (an int per float slot), then lse (flash) or the maps. */
static size_t carve(int **sel, float **lse, float **att, float *base, const moba_shape *s, int flash) {
    const size_t rows = (size_t)s->B * s->T * s->H, n_sel = rows * s->topk;
    const size_t n_more = flash ? rows : (size_t)s->B * s->H * s->T * s->T;
    if (base) {
        *sel = (int *)(void *)base;
        *lse = flash ? base + n_sel : NULL;
        *att = flash ? NULL : base + n_sel;
    }
    return n_sel + n_more;
}

static size_t moba_train_floats(const attn_shape *cap, int flash) {
    const moba_shape s = shape_of_attn(cap);
    return carve(NULL, NULL, NULL, NULL, &s, flash);
}

static size_t km_floats(const moba_shape *s) { return (size_t)s->B * (s->T / s->block) * s->G * s->d; }

static size_t moba_scratch_floats(const attn_shape *a, int flash) {
    (void)flash;
    const moba_shape s = shape_of_attn(a);
    const size_t sel = moba_select_scratch_floats(&s), ker = moba_kernel_scratch_floats(&s);
    return km_floats(&s) + (sel > ker ? sel : ker);
}

typedef struct {
    moba_shape s;
    int *sel;
    float *lse, *att;
} moba_saved;

static moba_saved saved_of(const attn_train_ctx *x) {
    moba_saved v;
    const moba_shape cap = shape_of(x->cfg, x->cap_B, x->cap_T, x->shape.n_threads);
    carve(&v.sel, &v.lse, &v.att, x->saved, &cap, x->flash);
    v.s = shape_of_attn(&x->shape);
    return v;
}

static void moba_forward(const attn_train_ctx *x) {
    moba_saved v = saved_of(x);
    float *km = x->scratch, *rest = km + km_floats(&v.s);
    const moba_kernels *ker = moba_kernels_of(x->exec->isa);
    ker->select(v.sel, km, x->proj[Q], x->proj[K], &v.s, rest);
    if (x->flash) ker->flash_forward(x->out, v.lse, x->proj[Q], x->proj[K], x->proj[V], v.sel, &v.s, rest);
    else ker->reference_forward(x->out, v.att, x->proj[Q], x->proj[K], x->proj[V], v.sel, &v.s, rest);
}

static void moba_backward(const attn_train_ctx *x) {
    moba_saved v = saved_of(x);
    float *rest = x->scratch + km_floats(&v.s);
    const moba_kernels *ker = moba_kernels_of(x->exec->isa);
    if (x->flash)
        ker->flash_backward(x->dproj[Q], x->dproj[K], x->dproj[V], x->dout, x->out, v.lse, x->proj[Q], x->proj[K],
                            x->proj[V], v.sel, &v.s, rest);
    else
        ker->reference_backward(x->dproj[Q], x->dproj[K], x->dproj[V], x->dout, v.att, x->proj[Q], x->proj[K],
                                x->proj[V], &v.s, rest);
}

/* ---------------------------------------------------------------- decoding: keys, values and block sums
 * The cache of one layer: k, v (max_T, G*d) as rows; ks (max_T/Bk + 1, G*d), each
 * block's keys summed as they arrive (row order, as moba_block_mean sums). */

static size_t n_sum_rows(const da_config *c, int max_T) { return (size_t)max_T / c->moba_block + 1; }

static size_t moba_cache_floats(const da_config *c, int max_T) {
    return (size_t)da_attn_kv_cols(c) * (2 * (size_t)max_T + n_sum_rows(c, max_T));
}

static size_t moba_cache_scratch(const da_config *c, int max_T) {
    return (size_t)max_T + n_sum_rows(c, max_T) + (size_t)c->moba_topk + (size_t)(c->dim / c->n_heads);
}

static void moba_cache_step(const attn_cache_step *x) {
    const da_config *c = x->cfg;
    const int Gd = da_attn_kv_cols(c), H = c->n_heads, d = c->dim / H, rep = H / c->n_kv_heads, t = x->pos;
    const int Bk = c->moba_block, K_ = c->moba_topk, cb = t / Bk;
    float *kc = x->cache, *vc = kc + (size_t)x->max_T * Gd, *ks = vc + (size_t)x->max_T * Gd;
    memcpy(kc + (size_t)t * Gd, x->proj[K], (size_t)Gd * sizeof(float));
    memcpy(vc + (size_t)t * Gd, x->proj[V], (size_t)Gd * sizeof(float));
    float *sum = ks + (size_t)cb * Gd;
    if (t % Bk == 0) memset(sum, 0, (size_t)Gd * sizeof(float)); /* the cache is any memory until written */
    for (int e = 0; e < Gd; e++) sum[e] += x->proj[K][e];
    float *p = x->scratch, *score = p + x->max_T, *mean = score + n_sum_rows(c, x->max_T) + K_;
    int *sel = (int *)(void *)(score + n_sum_rows(c, x->max_T));
    const float scale = 1.0f / sqrtf((float)d);
    float (*dot)(const float *, const float *, int) = moba_kernels_of(da_exec_default().isa)->dot;
    for (int h = 0; h < H; h++) {
        const int g = h / rep;
        const float *q = x->proj[Q] + (size_t)h * d;
        for (int j = 0; j < cb; j++) {
            for (int e = 0; e < d; e++) mean[e] = ks[(size_t)j * Gd + (size_t)g * d + e] / (float)Bk;
            score[j] = moba_score_dot(q, mean, d);
        }
        moba_choose(sel, score, cb, K_);
        int n = 0;
        float mx = -INFINITY;
        for (int a = 0; a < K_ && sel[a] >= 0; a++)
            for (int j = sel[a] * Bk; j < (sel[a] + 1) * Bk && j <= t; j++, n++) {
                p[n] = scale * dot(q, kc + (size_t)j * Gd + (size_t)g * d, d);
                mx = p[n] > mx ? p[n] : mx;
            }
        float tot = 0.0f;
        for (int i = 0; i < n; i++) tot += p[i] = expf(p[i] - mx);
        float *o = x->out + (size_t)h * d;
        memset(o, 0, (size_t)d * sizeof(float));
        n = 0;
        for (int a = 0; a < K_ && sel[a] >= 0; a++)
            for (int j = sel[a] * Bk; j < (sel[a] + 1) * Bk && j <= t; j++, n++) {
                const float w = p[n] / tot, *vj = vc + (size_t)j * Gd + (size_t)g * d;
                for (int e = 0; e < d; e++) o[e] += w * vj[e];
            }
    }
}

/* docs/model.md: 4 G d (2n + n/B + 1) bytes per layer. */
static double moba_cache_bytes(const da_config *c, int n) {
    return 4.0 * da_attn_kv_cols(c) * (2.0 * n + (double)(n / c->moba_block) + 1.0);
}

/* A step reads every block sum, and the keys and values of at most k blocks. */
static double moba_cache_read_bytes(const da_config *c, long n) {
    const double kept = (double)c->moba_topk * c->moba_block;
    return 4.0 * da_attn_kv_cols(c) * ((double)(n / c->moba_block) + 2.0 * (kept < n ? kept : n));
}

/* ---------------------------------------------------------------- analysis: a head's chosen keys */

/* The blocks query t of head h chooses, from the probe's q and k, to sel (k slots); returns their count. */
static int probe_choice(const attn_probe *p, int h, int t, int *sel, float *score, float *mean) {
    const da_config *c = p->cfg;
    const int Gd = da_attn_kv_cols(c), d = c->dim / c->n_heads, g = h / (c->n_heads / c->n_kv_heads);
    const int Bk = c->moba_block, cb = t / Bk;
    const float *q = p->q + (size_t)t * c->dim + (size_t)h * d;
    for (int j = 0; j < cb; j++) {
        moba_block_mean(mean, p->k + (size_t)j * Bk * Gd + (size_t)g * d, (size_t)Gd, Bk, d);
        score[j] = moba_score_dot(q, mean, d);
    }
    return moba_choose(sel, score, cb, c->moba_topk);
}

static int moba_logit_maps(const da_config *c) { return c->n_heads; }

/* The chosen keys j >= j0 of query t in head s, in position order: their
 * logits to out, and to row[j] as well when row is not NULL; returns their
 * count. The choice's buffers are the heap's, as t / Bk may be large: 0 when
 * it has none to give. */
static int chosen_logits(const attn_probe *p, int s, int t, int j0, float *out, float *row) {
    const da_config *c = p->cfg;
    const int Gd = da_attn_kv_cols(c), d = c->dim / c->n_heads, g = s / (c->n_heads / c->n_kv_heads);
    const int Bk = c->moba_block;
    float *buf = malloc(((size_t)(t / Bk + 1) + (size_t)c->moba_topk + (size_t)d) * sizeof(float));
    if (!buf) return 0;
    float *score = buf, *mean = score + t / Bk + 1; /* then k ints of sel */
    int *sel = (int *)(void *)(mean + d);
    const int nb = probe_choice(p, s, t, sel, score, mean);
    const float *q = p->q + (size_t)t * c->dim + (size_t)s * d, scale = 1.0f / sqrtf((float)d);
    float (*dot)(const float *, const float *, int) = moba_kernels_of(da_exec_default().isa)->dot;
    int n = 0;
    for (int a = 0; a < nb; a++)
        for (int j = sel[a] * Bk; j < (sel[a] + 1) * Bk && j <= t; j++) {
            if (j < j0) continue;
            const float lg = scale * dot(q, p->k + (size_t)j * Gd + (size_t)g * d, d);
            out[n++] = lg;
            if (row) row[j] = lg;
        }
    free(buf);
    return n;
}

static int moba_logits(const attn_probe *p, int s, int t, int j0, float *out) {
    return chosen_logits(p, s, t, j0, out, NULL);
}

/* The softmax over the chosen keys, zero elsewhere (its mass is 1). */
static void moba_attention_row(const attn_probe *p, int h, int t, float *row, float *tmp) {
    for (int j = 0; j <= t; j++) row[j] = -INFINITY;
    const int n = chosen_logits(p, h, t, 0, tmp, row);
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) mx = tmp[i] > mx ? tmp[i] : mx;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += expf(tmp[i] - mx);
    for (int j = 0; j <= t; j++) row[j] = n ? (float)(expf(row[j] - mx) / sum) : 0.0f;
}

/* Per token, forward + backward (3x the forward): the block scores (2 flops per
 * channel per earlier block) and the attention over the chosen keys (QK^T and PV). */
static double moba_flops(const da_config *c, int T) {
    const double C = c->dim;
    const long Bk = c->moba_block, K_ = c->moba_topk;
    double keys = 0, blocks = 0;
    for (long t = 0; t < T; t++) {
        const long cb = t / Bk, earlier = cb < K_ - 1 ? cb : K_ - 1;
        keys += (double)(earlier * Bk + t - cb * Bk + 1);
        blocks += (double)cb;
    }
    return 3.0 * (2.0 * C * blocks + 4.0 * C * keys) / T;
}

const attn_variant attn_moba = {
    .arch = DA_ARCH_MOBA,
    .name = "moba",
    .label = "MoBA",
    .about = "Mixture of Block Attention: softmax over the own block and the top-k earlier blocks by mean key",
    .maps = 1,
    .heads_per_diff_head = 2,
    .sub_heads_per_head = 1,
    .layout = {1, 1, 1},
    .compared = 0,
    .baseline = 0,
    .hf_class = NULL,
    .hf = 0,
    .gguf = 1,
    .field_prefix = "moba_",
    .tensors = moba_tensors,
    .validate = moba_validate,
    .train_floats = moba_train_floats,
    .scratch_floats = moba_scratch_floats,
    .forward = moba_forward,
    .backward = moba_backward,
    .cache_floats = moba_cache_floats,
    .cache_scratch_floats = moba_cache_scratch,
    .cache_step = moba_cache_step,
    .cache_bytes = moba_cache_bytes,
    .cache_read_bytes = moba_cache_read_bytes,
    .exact_logits_only = 1,
    .logit_maps = moba_logit_maps,
    .logits = moba_logits,
    .attention_row = moba_attention_row,
    .attn_flops_per_token = moba_flops,
    .heads_note = " (query heads, as softmax)",
    .head_dim_note = "",
    .extra_params_note = "",
    .lambda_note = "",
    .map_note = "MoBA (softmax over the chosen blocks' keys)",
};
