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
    const int C = c->dim, Ckv = da_attn_kv_cols(c), A = da_attn_out_cols(c); /* A = n_heads * d: dim by default */
    t[Q] = attn_in("q_proj.weight", 2 * A, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, A);
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

/* The per-token lambdas the kernels see: the sigmoid's, or with a ramp (lambda_hold) a scaled
 * copy kept past the shared saved activations, (B, T, H), for the backward too. */
static const float *ramped_lam(const attn_train_ctx *x, int fill) {
    const float scale = da_attn_lambda_scale(x->cfg);
    if (scale == 1.0f) return x->proj[LAMBDA_PROJ];
    attn_shape cap = x->shape;
    cap.B = x->cap_B;
    cap.T = x->cap_T;
    float *lam = x->saved + attn_saved_floats(&cap, &LAYOUT, x->flash, 0);
    const size_t n = (size_t)x->shape.B * x->shape.T * x->shape.n_heads;
    if (fill)
        for (size_t i = 0; i < n; i++) lam[i] = scale * x->proj[LAMBDA_PROJ][i];
    return lam;
}

static void diff2_forward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    const float *lam = ramped_lam(x, 1);
    if (x->flash)
        at->flash_forward(x->out, sv.o1, sv.o2, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, lam, &LAYOUT, s,
                          x->scratch);
    else
        at->diff2_forward(x->out, sv.att, x->proj[Q], x->proj[K], x->proj[V], lam, s, x->scratch);
}

static void diff2_backward(const attn_train_ctx *x) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, 0);
    const float *lam = ramped_lam(x, 0);
    if (x->flash)
        at->flash_backward(x->dproj[Q], x->dproj[K], x->dproj[V], NULL, x->dproj[LAMBDA_PROJ], x->dout, x->out, sv.o1,
                           sv.o2, sv.lse, x->proj[Q], x->proj[K], x->proj[V], 0.0f, lam, &LAYOUT, s, x->scratch);
    else
        at->diff2_backward(x->dproj[Q], x->dproj[K], x->dproj[V], x->dproj[LAMBDA_PROJ], x->dout, sv.att, x->proj[Q],
                           x->proj[K], x->proj[V], lam, s, x->scratch);
    const float scale = da_attn_lambda_scale(x->cfg);
    if (scale != 1.0f) /* d loss / d sigmoid = scale * d loss / d the scaled lambda */
        for (size_t i = 0, n = (size_t)s->B * s->T * s->n_heads; i < n; i++) x->dproj[LAMBDA_PROJ][i] *= scale;
}

static size_t diff2_train_floats(const attn_shape *cap, int flash) {
    return attn_saved_floats(cap, &LAYOUT, flash, 0) + (size_t)cap->B * cap->T * cap->n_heads;
}

static void diff2_decode_head(const attn_decode_head *x) {
    /* both query heads against the group's one K; V is d wide */
    const int d = x->d, h = x->h, g = x->g, len = x->len;
    const float scale = 1.0f / sqrtf((float)d), lam = da_attn_lambda_scale(x->cfg) * x->lam[h];
    float *A1 = x->att, *A2 = A1 + x->slots;
    x->kv->scores(x->kv->self, A1, x->q + (size_t)(2 * h) * d, g * d, x->p0, len, scale);
    x->kv->scores(x->kv->self, A2, x->q + (size_t)(2 * h + 1) * d, g * d, x->p0, len, scale);
    for (int i = 0; i < len; i++) A1[i] -= lam * A2[i];
    x->kv->mix(x->kv->self, x->o + (size_t)h * d, A1, g * d, x->p0, len, d);
}

/* QK^T: 2 flops per key per query column (2*dim, the 2H query heads); PV: 2
 * maps x 2 per key per value column (dim): twice softmax's at the same heads. */
static double diff2_flops(const da_config *c, int T) {
    const double keys = attn_mean_keys(c, T), C = da_attn_out_cols(c);
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
    .head_dim_option = 1,
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
