/* The Differential Transformer (V1) as a variant: head i has two query and
 * key sub-heads (Q1, Q2 = q sub-heads 2i, 2i+1; K1, K2 = k sub-heads 2g,
 * 2g+1 of its KV group g) and a 2d-wide value; its output is
 *     RMSNorm_subln((softmax(Q1 K1^T/sqrt(d)) - lambda softmax(Q2 K2^T/sqrt(d))) V) * (1 - lambda_init)
 * with lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2) + lambda_init,
 * one per layer. The paper's ablations (Table 6) are model options:
 * head_norm off drops RMSNorm_subln (no subln tensor) and the (1 - lambda_init)
 * factor; lambda_init X replaces the depth schedule in every layer. */
#include <math.h>

#include "attn/diff.h"
#include "attn/variant.h"
#include "attn/variant_common.h"
#include "core/profile.h"

enum { Q = DIFF_Q, K = DIFF_K, V = DIFF_V, OUT = DIFF_OUT, LQ1 = DIFF_LQ1, LK1 = DIFF_LK1, LQ2 = DIFF_LQ2,
       LK2 = DIFF_LK2, SUBLN = DIFF_SUBLN, N_TENSORS = DIFF_N_TENSORS };
enum { C_LAMBDA = DIFF_C_LAMBDA, C_POST = DIFF_C_POST, C_INIT = DIFF_C_INIT };

int attn_diff_tensors(const da_config *c, int q_rows, attn_tensor *t) {
    /* A = n_heads * 2d: dim unless head_dim is set */
    const int C = c->dim, Ckv = da_attn_kv_cols(c), d = da_attn_head_dim(c), A = da_attn_out_cols(c);
    t[Q] = attn_in("q_proj.weight", q_rows, C, 1, ATTN_VIEW_Q);
    t[K] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
    t[V] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    t[OUT] = attn_out_proj(C, A);
    t[LQ1] = attn_param_vector("lambda_q1", d, ATTN_INIT_NORMAL, 0.1f); /* the paper's init */
    t[LK1] = attn_param_vector("lambda_k1", d, ATTN_INIT_NORMAL, 0.1f);
    t[LQ2] = attn_param_vector("lambda_q2", d, ATTN_INIT_NORMAL, 0.1f);
    t[LK2] = attn_param_vector("lambda_k2", d, ATTN_INIT_NORMAL, 0.1f);
    t[SUBLN] = attn_param_vector("subln.weight", 2 * d, ATTN_INIT_ONES, 0.0f);
    return da_attn_head_norm_on(c) ? N_TENSORS : SUBLN; /* the head norm's gain is the last tensor */
}

static int diff_tensors(const da_config *c, attn_tensor *t) { return attn_diff_tensors(c, da_attn_out_cols(c), t); }

static da_status diff_validate(const da_config *c) {
    if (!c->head_dim && c->dim % (2 * c->n_heads))
        return da_errorf("dim: %d is not divisible by 2*n_heads=%d (each DIFF head holds two sub-heads)", c->dim,
                         2 * c->n_heads);
    return da_ok();
}

void attn_diff_lambda_consts(const da_config *c, float init, const float *const *w, float *consts) {
    const int d = da_attn_head_dim(c);
    float a = 0, b = 0;
    for (int i = 0; i < d; i++) {
        a += w[LQ1][i] * w[LK1][i];
        b += w[LQ2][i] * w[LK2][i];
    }
    /* a ramp (lambda_hold) scales the weight the maps see, and so the lambda vectors' gradient */
    consts[C_LAMBDA] = da_attn_lambda_scale(c) * (expf(a) - expf(b) + init);
    consts[C_POST] = da_attn_head_norm_on(c) ? 1.0f - init : 1.0f;
    consts[C_INIT] = init;
}

static void diff_layer_consts(const da_config *c, int layer, const float *const *w, float *consts) {
    attn_diff_lambda_consts(c, da_attn_layer_lambda_init(c, layer), w, consts);
}

static const attn_layout LAYOUT = {2, 1, 2};

void attn_diff_maps_forward(const attn_train_ctx *x, const float *q) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, s->head_norm);
    const float lambda = x->consts[C_LAMBDA];
    /* without the head norm the kernel writes the output itself */
    float *opre = s->head_norm ? sv.opre : x->out;
    const float *subln = s->head_norm ? x->w[SUBLN] : NULL;
    if (x->flash) {
        at->flash_forward(opre, sv.o1, sv.o2, sv.lse, q, x->proj[K], x->proj[V], lambda, NULL, &LAYOUT, s,
                          x->scratch);
        if (s->head_norm)
            DA_PROF(x->exec->prof_s, DA_PROF_HEAD_NORM,
                    at->head_norm_forward(x->out, sv.sub_rstd, opre, subln, x->consts[C_POST],
                                          s->B * s->T * s->n_heads, 2 * s->d));
    } else {
        at->diff_forward(x->out, opre, sv.sub_rstd, sv.att, q, x->proj[K], x->proj[V], subln, lambda,
                         x->consts[C_INIT], s, x->scratch);
    }
}

static void diff_forward(const attn_train_ctx *x) {
    diff_layer_consts(x->cfg, x->layer, (const float *const *)x->w, x->consts);
    attn_diff_maps_forward(x, x->proj[Q]);
}

/* d lambda_full -> the four lambda vectors: lambda = exp(q1.k1) - exp(q2.k2) + init. */
static void lambda_backward(const attn_train_ctx *x, float dlambda) {
    float *const *w = x->w, *const *g = x->g;
    const int d = x->shape.d;
    float a = 0, b = 0;
    for (int i = 0; i < d; i++) {
        a += w[LQ1][i] * w[LK1][i];
        b += w[LQ2][i] * w[LK2][i];
    }
    dlambda *= da_attn_lambda_scale(x->cfg);
    float e1 = expf(a) * dlambda, e2 = expf(b) * dlambda;
    for (int i = 0; i < d; i++) {
        g[LQ1][i] += e1 * w[LK1][i];
        g[LK1][i] += e1 * w[LQ1][i];
        g[LQ2][i] -= e2 * w[LK2][i];
        g[LK2][i] -= e2 * w[LQ2][i];
    }
}

void attn_diff_maps_backward(const attn_train_ctx *x, const float *q, float *dq) {
    const attn_shape *s = &x->shape;
    const da_attn_ops *at = da_attn_ops_of(x->exec->isa);
    attn_saved sv = attn_saved_layout(x, &LAYOUT, s->head_norm);
    const float lambda = x->consts[C_LAMBDA];
    const float *opre = s->head_norm ? sv.opre : x->out, *subln = s->head_norm ? x->w[SUBLN] : NULL;
    float *dsubln = s->head_norm ? x->g[SUBLN] : NULL;
    float dlambda = 0.0f;
    if (x->flash) {
        const float *dopre = x->dout;
        if (s->head_norm) {
            /* the head norm's input gradient lives past the flash kernel's scratch */
            float *dn = x->scratch + da_flash_scratch_size(s, &LAYOUT);
            DA_PROF(x->exec->prof_s, DA_PROF_HEAD_NORM,
                    at->head_norm_backward(dn, dsubln, x->dout, opre, sv.sub_rstd, subln, x->consts[C_POST],
                                           s->B * s->T * s->n_heads, 2 * s->d));
            dopre = dn;
        }
        at->flash_backward(dq, x->dproj[K], x->dproj[V], &dlambda, NULL, dopre, opre, sv.o1, sv.o2,
                           sv.lse, q, x->proj[K], x->proj[V], lambda, NULL, &LAYOUT, s, x->scratch);
    } else {
        at->diff_backward(dq, x->dproj[K], x->dproj[V], dsubln, &dlambda, x->dout, opre, sv.sub_rstd,
                          sv.att, q, x->proj[K], x->proj[V], subln, lambda, x->consts[C_INIT], s,
                          x->scratch);
    }
    lambda_backward(x, dlambda);
}

static void diff_backward(const attn_train_ctx *x) { attn_diff_maps_backward(x, x->proj[Q], x->dproj[Q]); }

size_t attn_diff_train_floats(const attn_shape *cap, int flash) {
    return attn_saved_floats(cap, &LAYOUT, flash, cap->head_norm);
}

size_t attn_diff_scratch_floats(const attn_shape *s, int flash) {
    return attn_kernel_scratch(s, &LAYOUT, flash) + (flash && s->head_norm ? (size_t)s->B * s->T * s->C : 0);
}

void attn_diff_decode_pair(const attn_decode_head *x, const float *q1, const float *q2) {
    const int d = x->d, d2 = 2 * d, h = x->h, g = x->g, len = x->len;
    const float scale = 1.0f / sqrtf((float)d), lambda = x->consts[C_LAMBDA], post = x->consts[C_POST];
    const float *subln = da_attn_head_norm_on(x->cfg) ? x->w[SUBLN] : NULL;
    float *A1 = x->att, *A2 = A1 + x->slots;
    x->kv->scores(x->kv->self, A1, q1, 2 * g * d, x->p0, len, scale);
    x->kv->scores(x->kv->self, A2, q2, (2 * g + 1) * d, x->p0, len, scale);
    for (int i = 0; i < len; i++) A1[i] -= lambda * A2[i];
    float *oh = x->o + (size_t)h * d2;
    x->kv->mix(x->kv->self, oh, A1, g * d2, x->p0, len, d2);
    if (!subln) return; /* head_norm off */
    float ss = 0.0f;
    for (int i = 0; i < d2; i++) ss += oh[i] * oh[i];
    const float r = 1.0f / sqrtf(ss / d2 + DA_SUBLN_EPS);
    for (int i = 0; i < d2; i++) oh[i] = oh[i] * r * subln[i] * post;
}

static void diff_decode_head(const attn_decode_head *x) {
    attn_diff_decode_pair(x, x->q + (size_t)(2 * x->h) * x->d, x->q + (size_t)(2 * x->h + 1) * x->d);
}

double attn_diff_flops(const da_config *c, int T) {
    const double keys = attn_mean_keys(c, T), C = da_attn_out_cols(c);
    return 3.0 * (2.0 * keys * C + 2.0 * keys * 2.0 * C);
}

const attn_variant attn_diff = {
    .arch = DA_ARCH_DIFF,
    .name = "diff",
    .label = "DIFF",
    .about = "Differential Transformer",
    .maps = 2,
    .heads_per_diff_head = 1,
    .sub_heads_per_head = 2,
    .layout = {2, 1, 2},
    .per_layer_lambda = 1,
    .head_norm_option = 2,
    .lambda_init_option = 1,
    .head_dim_option = 1,
    .compared = 1,
    .baseline = 0,
    .hf_class = "DiffLlamaForCausalLM",
    .hf = 1,
    .gguf = 1,
    .tensors = diff_tensors,
    .validate = diff_validate,
    .layer_consts = diff_layer_consts,
    .train_floats = attn_diff_train_floats,
    .scratch_floats = attn_diff_scratch_floats,
    .forward = diff_forward,
    .backward = diff_backward,
    .decode_head = diff_decode_head,
    .logit_maps = da_attn_maps_logit_maps,
    .logits = da_attn_maps_logits,
    .attention_row = da_attn_maps_row,
    .attn_flops_per_token = attn_diff_flops,
    .heads_note = " (differential)",
    .head_dim_note = " (per sub-head; values 2x)",
    .extra_params_note = "",
    .lambda_note = "",
    .map_note = "DIFF (A1 - lambda A2)",
};
