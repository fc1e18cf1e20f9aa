/* DIFF V2 as a variant (microsoft/unilm Diff-Transformer-V2,
 * multihead_flashdiffv2.py): head i has two d-wide query heads (q sub-heads
 * 2i, 2i+1) against its KV group's one K and d-wide V, and
 *     out_i = softmax(Q1 K^T/sqrt(d)) V - lam_t softmax(Q2 K^T/sqrt(d)) V,
 * lam_t = sigmoid(x_t . lambda_proj[i]) per token and head; no head norm.
 * q is 2*dim wide; n_heads equals softmax's at equal --heads. */
#include <math.h>

#include "attn/variant.h"
#include "attn/variant_common.h"

enum { Q, K, V, OUT, LAMBDA_PROJ, N_TENSORS };

static int diff2_tensors(const da_config *c, attn_tensor *t) {
    const int C = c->dim, Ckv = attn_kv_cols(c);
    t[Q] = attn_in("q_proj.weight", 2 * C, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, C);
    /* torch's nn.Linear default, which the official module keeps (it sets no
     * init of its own): sigmoid(lambda) starts near 0.5, +-0.14 per token.
     * Stays f32 in a GGUF: n_heads rows, a few hundredths of the layer. */
    t[LAMBDA_PROJ] = attn_in("lambda_proj.weight", c->n_heads, C, 0, ATTN_VIEW_LAM);
    t[LAMBDA_PROJ].init = ATTN_INIT_FAN_IN_UNIFORM;
    t[LAMBDA_PROJ].quantizable = 0;
    t[LAMBDA_PROJ].act = ATTN_ACT_SIGMOID;
    return N_TENSORS;
}

static const attn_layout LAYOUT = {2, 0, 1};

static void diff2_forward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    if (x->flash)
        at->flash_forward(x->out, sv.o1, sv.o2, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, x->proj[LAMBDA_PROJ],
                          &LAYOUT, s, x->scratch);
    else
        at->diff2_forward(x->out, sv.att, x->proj[Q], x->proj[K], x->proj[V], x->proj[LAMBDA_PROJ], s, x->scratch);
}

static void diff2_backward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    if (x->flash)
        at->flash_backward(x->dproj[Q], x->dproj[K], x->dproj[V], NULL, x->dproj[LAMBDA_PROJ], x->dout, x->out, sv.o1,
                           sv.o2, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, x->proj[LAMBDA_PROJ], &LAYOUT, s,
                           x->scratch);
    else
        at->diff2_backward(x->dproj[Q], x->dproj[K], x->dproj[V], x->dproj[LAMBDA_PROJ], x->dout, sv.att, x->proj[Q],
                           x->proj[K], x->proj[V], x->proj[LAMBDA_PROJ], s, x->scratch);
}

static size_t diff2_train_floats(const attn_shape *cap, int flash) {
    return attn_saved_floats(cap, &LAYOUT, flash, 0);
}

static void diff2_decode_head(const attn_decode_head *x) {
    /* both query heads against the group's one K; V is d wide */
    const int d = x->d, h = x->h, g = x->g, len = x->len;
    const float scale = 1.0f / sqrtf((float)d), lam = x->lam[h];
    float *A1 = x->att, *A2 = A1 + x->slots;
    x->kv->scores(x->kv->self, A1, x->q + (size_t)(2 * h) * d, g * d, x->p0, len, scale);
    x->kv->scores(x->kv->self, A2, x->q + (size_t)(2 * h + 1) * d, g * d, x->p0, len, scale);
    for (int i = 0; i < len; i++) A1[i] -= lam * A2[i];
    x->kv->mix(x->kv->self, x->o + (size_t)h * d, A1, g * d, x->p0, len, d);
}

/* QK^T: 2 flops per key per query column (2*dim, the 2H query heads); PV: 2
 * maps x 2 per key per value column (dim): twice softmax's at the same heads. */
static double diff2_flops(const da_config *c, int T) {
    const double keys = attn_mean_keys(c, T), C = c->dim;
    return 3.0 * (2.0 * keys * 2.0 * C + 2.0 * keys * 2.0 * C);
}

const attn_variant attn_diff2 = {
    .arch = DA_ARCH_DIFF2,
    .name = "diff2",
    .label = "DIFF2",
    .about = "DIFF V2: lambda per token from lambda_proj, K and V shared by the two maps",
    .maps = 2,
    .heads_per_diff_head = 2,
    .sub_heads_per_head = 1,
    .layout = {2, 0, 1},
    .compared = 1,
    .baseline = 0,
    .hf_class = NULL,
    .hf = 0,
    .gguf = 1,
    .tensors = diff2_tensors,
    .train_floats = diff2_train_floats,
    .forward = diff2_forward,
    .backward = diff2_backward,
    .decode_head = diff2_decode_head,
    .logit_maps = da_attn_maps_logit_maps,
    .logits = da_attn_maps_logits,
    .attention_row = da_attn_maps_row,
    .attn_flops_per_token = diff2_flops,
    .heads_note = " (output heads; 2x query heads)",
    .head_dim_note = "",
    .extra_params_note = "the second queries and lambda_proj",
    .lambda_note = " (sigmoid(x . lambda_proj) over tokens and heads)",
    .map_note = "DIFF2 (A1 - sigmoid(lambda_t) A2)",
};
