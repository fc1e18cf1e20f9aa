/* The softmax baseline as a variant: per head, softmax(Q K^T / sqrt(d)) V;
 * twice DIFF's heads at equal parameters. Layout (attention.h): head i is q
 * columns [d*i, d*(i+1)), its KV group g = i / n_rep the same columns of k, v. */
#include <math.h>

#include "attn/variant.h"
#include "attn/variant_common.h"
#include "core/profile.h"

enum { Q, K, V, OUT, N_TENSORS };

static int softmax_tensors(const da_config *c, attn_tensor *t) {
    const int C = c->dim, Ckv = attn_kv_cols(c);
    t[Q] = attn_in("q_proj.weight", C, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, C);
    return N_TENSORS;
}

static const attn_layout LAYOUT = {1, 1, 1};

static void softmax_forward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    if (x->flash)
        at->flash_forward(x->out, NULL, NULL, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, NULL, &LAYOUT, s,
                          x->scratch);
    else
        at->softmax_forward(x->out, sv.att, x->proj[Q], x->proj[K], x->proj[V], s);
}

static void softmax_backward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    if (x->flash)
        at->flash_backward(x->dproj[Q], x->dproj[K], x->dproj[V], NULL, NULL, x->dout, x->out, NULL, NULL, sv.lse,
                           x->proj[Q], x->proj[K], x->proj[V], 0.0f, NULL, &LAYOUT, s, x->scratch);
    else
        at->softmax_backward(x->dproj[Q], x->dproj[K], x->dproj[V], x->dout, sv.att, x->proj[Q], x->proj[K],
                             x->proj[V], s, x->scratch);
}

static size_t softmax_train_floats(const attn_shape *cap, int flash) {
    return attn_saved_floats(cap, &LAYOUT, flash, 0);
}

static void softmax_decode_head(const attn_decode_head *x) {
    const int d = x->d;
    const float scale = 1.0f / sqrtf((float)d);
    x->kv->scores(x->kv->self, x->att, x->q + (size_t)x->h * d, x->g * d, x->p0, x->len, scale);
    x->kv->mix(x->kv->self, x->o + (size_t)x->h * d, x->att, x->g * d, x->p0, x->len, d);
}

/* QK^T: 2 flops per key per query column (dim); PV: 2 per key per value column (dim). */
static double softmax_flops(const da_config *c, int T) {
    const double keys = attn_mean_keys(c, T), C = c->dim;
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
    .compared = 1,
    .baseline = 1,
    .hf_class = "LlamaForCausalLM",
    .hf = 1,
    .gguf = 1,
    .tensors = softmax_tensors,
    .train_floats = softmax_train_floats,
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
