/* What the variants' own files share: tensor descriptions, and the layout of
 * the saved activations of the shared map kernels of attention.h: the maps
 * of the reference kernel, or the flash kernel's log-sum-exp and per-map
 * outputs. Internal to src/attn/. */
#ifndef DA_ATTN_VARIANT_COMMON_H
#define DA_ATTN_VARIANT_COMMON_H

#include <stdio.h>
#include <string.h>

#include "attn/flash_attention.h"
#include "attn/variant.h"

/* An ATTN_IN matrix [rows, cols], N(0, 0.02^2), decayed and quantizable. */
static inline attn_tensor attn_in(const char *name, int rows, int cols, int rope, attn_view view) {
    attn_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.rows = rows;
    t.cols = cols;
    t.role = ATTN_IN;
    t.init = ATTN_INIT_NORMAL;
    t.std = 0.02f;
    t.decay = 1;
    t.quantizable = 1;
    t.rope = rope;
    t.view = view;
    return t;
}

/* out_proj.weight [rows, cols], GPT-2's residual init. */
static inline attn_tensor attn_out_proj(int rows, int cols) {
    attn_tensor t = attn_in("out_proj.weight", rows, cols, 0, ATTN_VIEW_NONE);
    t.role = ATTN_OUT;
    t.init = ATTN_INIT_RESIDUAL;
    return t;
}

/* A parameter vector of n values read by the kernels, not decayed, f32. */
static inline attn_tensor attn_param_vector(const char *name, int n, attn_init init, float std) {
    attn_tensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.rows = n;
    t.role = ATTN_PARAM;
    t.init = init;
    t.std = std;
    return t;
}

/* The saved activations of the shared kernels, carved from attn_train_ctx.saved. */
typedef struct {
    float *att;      /* reference kernel: (B, H, maps, T, T) */
    float *lse;      /* flash kernel: (B, H, maps, T) */
    float *o1, *o2;  /* flash kernel, two maps: (B, T, C) each map's normalised A V */
    float *opre;     /* with a head norm: (B, T, C) the kernel's output before it */
    float *sub_rstd; /* with a head norm: (B, T, H) its rstd */
} attn_saved;

/* Carves base for a (B, T) = cap shape; returns the floats used (base may be NULL: counting). */
static inline size_t attn_saved_carve(attn_saved *sv, float *base, const attn_shape *cap, const attn_layout *lay,
                                      int flash, int head_norm) {
    const size_t B = cap->B, T = cap->T, H = cap->n_heads, C = cap->C, BT = B * T, maps = lay->maps;
    size_t used = 0;
#define TAKE(n) (used += (n), base ? base + used - (n) : NULL)
    sv->att = flash ? NULL : TAKE(B * H * maps * T * T);
    sv->lse = flash ? TAKE(B * H * maps * T) : NULL;
    sv->o1 = flash && maps == 2 ? TAKE(BT * C) : NULL;
    sv->o2 = flash && maps == 2 ? TAKE(BT * C) : NULL;
    sv->opre = head_norm ? TAKE(BT * C) : NULL;
    sv->sub_rstd = head_norm ? TAKE(BT * H) : NULL;
#undef TAKE
    return used;
}

static inline size_t attn_saved_floats(const attn_shape *cap, const attn_layout *lay, int flash, int head_norm) {
    attn_saved sv;
    return attn_saved_carve(&sv, NULL, cap, lay, flash, head_norm);
}

/* x's saved activations, laid out for its capacity shape. */
static inline attn_saved attn_saved_layout(const attn_train_ctx *x, const attn_layout *lay, int head_norm) {
    attn_shape cap = x->shape;
    cap.B = x->cap_B;
    cap.T = x->cap_T;
    attn_saved sv;
    attn_saved_carve(&sv, x->saved, &cap, lay, x->flash, head_norm);
    return sv;
}

/* The shared kernels' scratch: flash's, or the reference kernels'. */
static inline size_t attn_kernel_scratch(const attn_shape *s, const attn_layout *lay, int flash) {
    return flash ? da_flash_scratch_size(s, lay) : da_attn_scratch_size(s);
}

/* Keys a query sees on average over a T-token sequence: (T+1)/2, or with a
 * window W < T the mean of min(t, W) over t = 1..T. */
static inline double attn_mean_keys(const da_config *c, int T) {
    double keys = (T + 1) / 2.0, W = c->window;
    if (W > 0 && W < T) keys = (W * (W + 1) / 2.0 + (T - W) * W) / T;
    return keys;
}

#endif
