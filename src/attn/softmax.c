/* The softmax baseline as a variant: per head, softmax(Q K^T / sqrt(d)) V;
 * twice DIFF's heads at equal parameters. Layout (attention.h): head i is q
 * columns [d*i, d*(i+1)), its KV group g = i / n_rep the same columns of k, v.
 * With head_norm on (the paper's "Transformer + GroupNorm"), each head's
 * output row is RMSNorm'd with one d-wide gain subln.weight shared by the
 * heads, no scale. */
#include <math.h>

#include "attn/variant.h"
#include "attn/variant_common.h"
#include "core/profile.h"

enum { Q, K, V, OUT, SUBLN, N_TENSORS };

static int softmax_tensors(const da_config *c, attn_tensor *t) {
    const int C = c->dim, Ckv = da_attn_kv_cols(c), A = da_attn_out_cols(c); /* A = n_heads * d: dim by default */
    t[Q] = attn_in("q_proj.weight", A, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, A);
    t[SUBLN] = attn_param_vector("subln.weight", da_attn_head_dim(c), ATTN_INIT_ONES, 0.0f);
    return da_attn_head_norm_on(c) ? N_TENSORS : SUBLN;
}

static const attn_layout LAYOUT = {1, 1, 1};

static void softmax_forward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, s->head_norm);
    float *opre = s->head_norm ? sv.opre : x->out;
    if (x->flash)
        at->flash_forward(opre, NULL, NULL, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, NULL, &LAYOUT, s,
                          x->scratch);
    else
        at->softmax_forward(opre, sv.att, x->proj[Q], x->proj[K], x->proj[V], s);
    if (s->head_norm)
        DA_PROF(x->exec->prof_s, DA_PROF_HEAD_NORM,
                at->head_norm_forward(x->out, sv.sub_rstd, opre, x->w[SUBLN], 1.0f, s->B * s->T * s->n_heads, s->d));
}

static void softmax_backward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, s->head_norm);
    const float *opre = x->out, *dopre = x->dout;
    if (s->head_norm) {
        /* the head norm's input gradient lives past the kernel's scratch */
        float *dn = x->scratch + attn_kernel_scratch(s, &LAYOUT, x->flash);
        DA_PROF(x->exec->prof_s, DA_PROF_HEAD_NORM,
                at->head_norm_backward(dn, x->g[SUBLN], x->dout, sv.opre, sv.sub_rstd, x->w[SUBLN], 1.0f,
                                       s->B * s->T * s->n_heads, s->d));
        opre = sv.opre;
        dopre = dn;
    }
    if (x->flash)
        at->flash_backward(x->dproj[Q], x->dproj[K], x->dproj[V], NULL, NULL, dopre, opre, NULL, NULL, sv.lse,
                           x->proj[Q], x->proj[K], x->proj[V], 0.0f, NULL, &LAYOUT, s, x->scratch);
    else
        at->softmax_backward(x->dproj[Q], x->dproj[K], x->dproj[V], dopre, sv.att, x->proj[Q], x->proj[K],
                             x->proj[V], s, x->scratch);
}

static size_t softmax_train_floats(const attn_shape *cap, int flash) {
    return attn_saved_floats(cap, &LAYOUT, flash, cap->head_norm);
}

static size_t softmax_scratch_floats(const attn_shape *s, int flash) {
    return attn_kernel_scratch(s, &LAYOUT, flash) + (s->head_norm ? (size_t)s->B * s->T * s->C : 0);
}

static void softmax_decode_head(const attn_decode_head *x) {
    const int d = x->d;
    const float scale = 1.0f / sqrtf((float)d);
    x->kv->scores(x->kv->self, x->att, x->q + (size_t)x->h * d, x->g * d, x->p0, x->len, scale);
    float *oh = x->o + (size_t)x->h * d;
    x->kv->mix(x->kv->self, oh, x->att, x->g * d, x->p0, x->len, d);
    if (!da_attn_head_norm_on(x->cfg)) return;
    const float *w = x->w[SUBLN];
    float ss = 0.0f;
    for (int i = 0; i < d; i++) ss += oh[i] * oh[i];
    const float r = 1.0f / sqrtf(ss / d + DA_SUBLN_EPS);
    for (int i = 0; i < d; i++) oh[i] = oh[i] * r * w[i];
}

/* QK^T: 2 flops per key per query column (dim); PV: 2 per key per value column (dim). */
static double softmax_flops(const da_config *c, int T) {
    const double keys = attn_mean_keys(c, T), C = da_attn_out_cols(c);
    return 3.0 * (2.0 * keys * C + 2.0 * keys * C);
}

const attn_variant attn_softmax = {
    .arch = DA_ARCH_SOFTMAX,
    .name = "softmax",
    .label = "softmax",
    .about = "the baseline",
    .maps = 1,
    .heads_per_diff_head = 2,
    .sub_heads_per_head = 1,
    .layout = {1, 1, 1},
    .head_norm_option = 1,
    .head_dim_option = 1,
    .compared = 1,
    .baseline = 1,
    .hf_class = "LlamaForCausalLM",
    .hf = 1,
    .gguf = 1,
    .tensors = softmax_tensors,
    .train_floats = softmax_train_floats,
    .scratch_floats = softmax_scratch_floats,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .decode_head = softmax_decode_head,
    .logit_maps = da_attn_maps_logit_maps,
    .logits = da_attn_maps_logits,
    .attention_row = da_attn_maps_row,
    .attn_flops_per_token = softmax_flops,
    .heads_note = "",
    .head_dim_note = "",
    .extra_params_note = "",
    .lambda_note = "",
    .map_note = "softmax baseline",
};
