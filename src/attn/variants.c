/* The table of attention variants, in da_arch order, and the lookups every
 * caller uses instead of naming a variant. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/variant.h"
#include "attn/variant_common.h"

extern const attn_variant attn_diff, attn_softmax, attn_diff2, attn_nsa, attn_moba, attn_gda;

static const attn_variant *const VARIANTS[DA_ARCH_N] = {&attn_diff, &attn_softmax, &attn_diff2, &attn_nsa,
                                                            &attn_moba, &attn_gda};

const attn_variant *da_attn_variant_of(da_arch a) { return (unsigned)a < DA_ARCH_N ? VARIANTS[a] : VARIANTS[0]; }

const attn_variant *da_attn_variant_at(int i) { return i >= 0 && i < DA_ARCH_N ? VARIANTS[i] : NULL; }

int da_attn_tensors(const da_config *c, attn_tensor *out) { return da_attn_variant_of(c->arch)->tensors(c, out); }

int da_attn_default_kv_heads(const da_config *c) {
    const attn_variant *v = da_attn_variant_of(c->arch);
    return v->default_kv_heads ? v->default_kv_heads(c) : c->n_heads;
}

int da_attn_tensor_with_view(const da_config *c, attn_view v) {
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = da_attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (t[i].view == v) return i;
    return -1;
}

int da_attn_out_tensor(const da_config *c) {
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = da_attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (t[i].role == ATTN_OUT) return i;
    return -1;
}

const attn_tensor *da_attn_tensor_named(const da_config *c, const char *full_name, attn_tensor *out) {
    const char *p = strstr(full_name, ".attn.");
    if (strncmp(full_name, "layers.", 7) || !p) return NULL;
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = da_attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (!strcmp(p + 6, t[i].name)) {
            *out = t[i];
            return out;
        }
    return NULL;
}

void da_attn_init_tensor(const da_config *c, const attn_tensor *t, float *w) {
    attn_tensor all[ATTN_MAX_TENSORS];
    const int n = da_attn_tensors(c, all);
    for (int j = 0; j < n; j++)
        if (!strcmp(all[j].name, t->name)) da_attn_variant_of(c->arch)->init_tensor(c, j, w);
}

int da_attn_head_dim(const da_config *c) {
    if (c->head_dim > 0) return c->head_dim;
    if (c->n_heads <= 0) return 0;
    return c->dim / (c->n_heads * da_attn_variant_of(c->arch)->sub_heads_per_head);
}

int da_attn_kv_cols(const da_config *c) {
    return c->n_kv_heads * da_attn_variant_of(c->arch)->layout.v_subheads * da_attn_head_dim(c);
}

int da_attn_out_cols(const da_config *c) {
    return c->n_heads * da_attn_variant_of(c->arch)->layout.v_subheads * da_attn_head_dim(c);
}

attn_shape da_attn_shape_of(const da_config *c, int B, int T, int n_threads) {
    attn_shape s = {B,         T, c->n_heads, c->n_kv_heads, da_attn_head_dim(c), da_attn_out_cols(c),
                    da_attn_kv_cols(c), n_threads, 0, c->window, da_attn_head_norm_on(c), c};
    return s;
}

int da_attn_head_norm_on(const da_config *c) {
    const attn_variant *v = da_attn_variant_of(c->arch);
    if (c->head_norm == DA_HEAD_NORM_DEFAULT) return v->head_norm_option == 2;
    return v->head_norm_option && c->head_norm == DA_HEAD_NORM_ON;
}

float da_attn_lambda_init(int depth) { return 0.8f - 0.6f * expf(-0.3f * (float)depth); }

float da_attn_layer_lambda_init(const da_config *c, int layer) {
    return c->lambda_init > 0.0f ? c->lambda_init
                                 : da_attn_lambda_init(layer - da_attn_variant_of(c->arch)->lambda_depth_shift);
}

size_t da_attn_scratch_floats(const attn_variant *v, const attn_shape *s, int flash) {
    return v->scratch_floats ? v->scratch_floats(s, flash) : attn_kernel_scratch(s, &v->layout, flash);
}

int da_attn_maps_logit_maps(const da_config *c) { return c->n_heads * da_attn_variant_of(c->arch)->layout.maps; }

/* The K sub-head map s of a head reads: map m of head h in KV group g reads
 * sub-head maps*g + m, or g when every map reads the group's one K. */
static int key_sub_head(const attn_layout *lay, int s, int n_rep) {
    const int g = s / lay->maps / n_rep;
    return lay->k_per_map ? lay->maps * g + s % lay->maps : g;
}

int da_attn_maps_logits(const attn_probe *p, int s, int t, int j0, float *out) {
    const da_config *c = p->cfg;
    const attn_layout *lay = &da_attn_variant_of(c->arch)->layout;
    const int n_rep = c->n_heads / c->n_kv_heads, d = da_attn_head_dim(c);
    const int Cq = c->n_heads * lay->maps * d, ks = key_sub_head(lay, s, n_rep);
    return da_attn_probe_dots(p, p->q + (size_t)t * Cq + (size_t)s * d, ks, d, t, j0, out);
}

int da_attn_probe_dots(const attn_probe *p, const float *qv, int ks, int d, int t, int j0, float *out) {
    const int Ckv = da_attn_kv_cols(p->cfg);
    const float scale = 1.0f / sqrtf((float)d);
    for (int j = j0; j <= t; j++) {
        const float *kv = p->k + (size_t)j * Ckv + (size_t)ks * d;
        float dot = 0.0f;
        for (int e = 0; e < d; e++) dot += qv[e] * kv[e];
        out[j - j0] = dot * scale;
    }
    return t - j0 + 1;
}

void da_attn_maps_row(const attn_probe *p, int h, int t, float *row, float *tmp) {
    const da_config *c = p->cfg;
    const int maps = da_attn_variant_of(c->arch)->layout.maps;
    const int lo = attn_first_key(t, c->window);
    for (int mp = 0; mp < maps; mp++) {
        float *a = mp ? tmp : row, mx = -INFINITY;
        for (int j = 0; j < lo; j++) a[j] = 0.0f;
        da_attn_maps_logits(p, maps * h + mp, t, lo, a + lo);
        for (int j = lo; j <= t; j++) mx = a[j] > mx ? a[j] : mx;
        double sum = 0;
        for (int j = lo; j <= t; j++) sum += a[j] = expf(a[j] - mx);
        for (int j = lo; j <= t; j++) a[j] = (float)(a[j] / sum);
    }
    /* the second map's weight: the layer's lambda, or this token's and head's */
    const float lambda = p->lam ? da_attn_lambda_scale(c) * p->lam[(size_t)t * c->n_heads + h] : p->lambda;
    if (maps == 2)
        for (int j = 0; j <= t; j++) row[j] -= lambda * tmp[j];
    double mass = 0;
    for (int j = 0; j <= t; j++) mass += fabsf(row[j]);
    for (int j = 0; j <= t; j++) row[j] = mass > 0 ? (float)(row[j] / mass) : 0.0f;
}
