/* Grouped differential attention (GDA, arXiv 2510.06949), the attention of
 * Motif-2-12.7B; with one signal head per group it is Motif-2.6B's DIFF V1.
 *
 * S = n_heads signal heads form G = gda_noise_heads groups (0: G = S) of
 * gr = S / G signal heads and one noise head. q_proj holds the S + G d-wide
 * query heads striped group by group, [s_1 .. s_gr, n], so signal head h of
 * group j = h / gr is q head j (gr + 1) + h % gr and the group's noise head is
 * q head j (gr + 1) + gr. K and V are n_kv_heads interleaved pairs: pair g
 * holds K sub-heads 2g (signal maps) and 2g + 1 (noise maps) and a 2d-wide
 * value, V columns [2d g, 2d (g + 1)); the groups map onto the pairs as GQA
 * (pair g = h / (S / n_kv_heads)). Each signal head's output, 2d wide, is
 *     subln(A_signal V - lambda A_noise V) * (1 - lambda_init)
 * with DIFF's lambda = exp(lambda_q1 . lambda_k1) - exp(lambda_q2 . lambda_k2)
 * + lambda_init, one per layer, and Motif's schedule lambda_init =
 * 0.8 - 0.6 exp(-0.3 (l - 1)) at 0-based layer l (DIFF's at depth l - 1;
 * --lambda-init replaces it). out_proj reads S * 2d columns.
 *
 * The kernels are DIFF's (diff.h): each signal head's query pair [q_signal,
 * q_noise] is gathered into DIFF's layout, and the backward adds the pair's
 * gradient back, the noise part summed over the group's signal heads. */
#include <math.h>
#include <string.h>

#include "attn/diff.h"
#include "attn/variant.h"
#include "attn/variant_common.h"

static int noise_heads(const da_config *c) { return c->gda_noise_heads > 0 ? c->gda_noise_heads : c->n_heads; }

/* The q heads (d-wide, in q_proj's order) that signal head h reads: its own, its group's noise head. */
static void query_heads(const da_config *c, int h, int *signal, int *noise) {
    const int gr = c->n_heads / noise_heads(c), j = h / gr;
    *signal = j * (gr + 1) + h % gr;
    *noise = j * (gr + 1) + gr;
}

static int gda_tensors(const da_config *c, attn_tensor *t) {
    return attn_diff_tensors(c, (c->n_heads + noise_heads(c)) * da_attn_head_dim(c), t);
}

/* One K/V pair per group, as Motif-2-12.7B has (groups that do not divide the heads are gda_validate's to name). */
static int gda_default_kv_heads(const da_config *c) {
    const int G = noise_heads(c);
    return G <= c->n_heads && c->n_heads % G == 0 ? G : c->n_heads;
}

static da_status gda_validate(const da_config *c) {
    const int S = c->n_heads, G = noise_heads(c);
    if (G > S || S % G)
        return da_errorf("gda_noise_heads: %d must divide n_heads=%d (each noise head serves n_heads/G signal heads)",
                         G, S);
    if (G % c->n_kv_heads)
        return da_errorf("n_kv_heads: %d K/V pairs must divide gda_noise_heads=%d (the groups share the pairs as "
                         "GQA)", c->n_kv_heads, G);
    return da_ok();
}

static void gda_layer_consts(const da_config *c, int layer, const float *const *w, float *consts) {
    attn_diff_lambda_consts(c, da_attn_layer_lambda_init(c, layer), w, consts); /* Motif's schedule: shift 1 */
}

/* The expanded query (B, T, S * 2d), DIFF's layout, past DIFF's saved floats. */
static float *expanded_query(const attn_train_ctx *x) {
    attn_shape cap = x->shape;
    cap.B = x->cap_B;
    cap.T = x->cap_T;
    return x->saved + attn_diff_train_floats(&cap, x->flash);
}

static void gda_forward(const attn_train_ctx *x) {
    const da_config *c = x->cfg;
    const int S = c->n_heads, G = noise_heads(c), d = x->shape.d, Cq = (S + G) * d;
    const size_t BT = (size_t)x->shape.B * x->shape.T;
    gda_layer_consts(c, x->layer, (const float *const *)x->w, x->consts);
    if (G == S) { /* DIFF V1: q is in DIFF's layout already */
        attn_diff_maps_forward(x, x->proj[DIFF_Q]);
        return;
    }
    float *qe = expanded_query(x);
    const float *q = x->proj[DIFF_Q];
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < S; h++) {
            int sig, noi;
            query_heads(c, h, &sig, &noi);
            memcpy(qe + (r * S + h) * 2 * d, q + r * Cq + (size_t)sig * d, (size_t)d * sizeof(float));
            memcpy(qe + (r * S + h) * 2 * d + d, q + r * Cq + (size_t)noi * d, (size_t)d * sizeof(float));
        }
    attn_diff_maps_forward(x, qe);
}

static void gda_backward(const attn_train_ctx *x) {
    const da_config *c = x->cfg;
    const int S = c->n_heads, G = noise_heads(c), d = x->shape.d, Cq = (S + G) * d;
    const size_t BT = (size_t)x->shape.B * x->shape.T;
    if (G == S) {
        attn_diff_maps_backward(x, x->proj[DIFF_Q], x->dproj[DIFF_Q]);
        return;
    }
    float *dqe = x->scratch + attn_diff_scratch_floats(&x->shape, x->flash);
    attn_diff_maps_backward(x, expanded_query(x), dqe);
    float *dq = x->dproj[DIFF_Q];
    memset(dq, 0, BT * Cq * sizeof(float));
    for (size_t r = 0; r < BT; r++)
        for (int h = 0; h < S; h++) {
            int sig, noi;
            query_heads(c, h, &sig, &noi);
            const float *src = dqe + (r * S + h) * 2 * d;
            float *ds = dq + r * Cq + (size_t)sig * d, *dn = dq + r * Cq + (size_t)noi * d;
            for (int i = 0; i < d; i++) {
                ds[i] = src[i];
                dn[i] += src[d + i];
            }
        }
}

static size_t gda_train_floats(const attn_shape *cap, int flash) {
    return attn_diff_train_floats(cap, flash) + (size_t)cap->B * cap->T * cap->C;
}

static size_t gda_scratch_floats(const attn_shape *s, int flash) {
    return attn_diff_scratch_floats(s, flash) + (size_t)s->B * s->T * s->C;
}

static void gda_decode_head(const attn_decode_head *x) {
    int sig, noi;
    query_heads(x->cfg, x->h, &sig, &noi);
    attn_diff_decode_pair(x, x->q + (size_t)sig * x->d, x->q + (size_t)noi * x->d);
}

/* Analysis: every query head is a map (the signal heads' and the noise heads'). */
static int gda_logit_maps(const da_config *c) { return c->n_heads + noise_heads(c); }

/* q head s (q_proj's order) reads K sub-head 2g of its pair g, or 2g + 1 for a noise head. */
static int gda_logits(const attn_probe *p, int s, int t, int j0, float *out) {
    const da_config *c = p->cfg;
    const int G = noise_heads(c), gr = c->n_heads / G, d = da_attn_head_dim(c);
    const int Cq = (c->n_heads + G) * d;
    const int group = s / (gr + 1), pair = group / (G / c->n_kv_heads), ks = 2 * pair + (s % (gr + 1) == gr);
    return da_attn_probe_dots(p, p->q + (size_t)t * Cq + (size_t)s * d, ks, d, t, j0, out);
}

static void softmax_row(float *a, int lo, int t) {
    float mx = -INFINITY;
    for (int j = lo; j <= t; j++) mx = a[j] > mx ? a[j] : mx;
    double sum = 0;
    for (int j = lo; j <= t; j++) sum += a[j] = expf(a[j] - mx);
    for (int j = lo; j <= t; j++) a[j] = (float)(a[j] / sum);
}

/* Signal head h's map minus lambda times its group's noise map, over the row's absolute mass. */
static void gda_attention_row(const attn_probe *p, int h, int t, float *row, float *tmp) {
    const da_config *c = p->cfg;
    const int lo = attn_first_key(t, c->window);
    int sig, noi;
    query_heads(c, h, &sig, &noi);
    for (int j = 0; j < lo; j++) row[j] = tmp[j] = 0.0f;
    gda_logits(p, sig, t, lo, row + lo);
    gda_logits(p, noi, t, lo, tmp + lo);
    softmax_row(row, lo, t);
    softmax_row(tmp, lo, t);
    double mass = 0;
    for (int j = 0; j <= t; j++) mass += fabsf(row[j] -= p->lambda * tmp[j]);
    for (int j = 0; j <= t; j++) row[j] = mass > 0 ? (float)(row[j] / mass) : 0.0f;
}

const attn_variant attn_gda = {
    .arch = DA_ARCH_GDA,
    .name = "gda",
    .label = "GDA",
    .about = "grouped differential attention: each group's noise map subtracted from its signal heads' maps",
    .maps = 2,
    .heads_per_diff_head = 1,
    .sub_heads_per_head = 2,
    .layout = {2, 1, 2},
    .per_layer_lambda = 1,
    .head_norm_option = 2,
    .lambda_init_option = 1,
    .lambda_depth_shift = 1,
    .head_dim_option = 1,
    .compared = 0,
    .baseline = 0,
    .hf_class = "MotifForCausalLM",
    .hf = 1,
    .gguf = 1,
    .field_prefix = "gda_",
    .default_kv_heads = gda_default_kv_heads,
    .tensors = gda_tensors,
    .validate = gda_validate,
    .layer_consts = gda_layer_consts,
    .train_floats = gda_train_floats,
    .scratch_floats = gda_scratch_floats,
    .forward = gda_forward,
    .backward = gda_backward,
    .decode_head = gda_decode_head,
    .logit_maps = gda_logit_maps,
    .logits = gda_logits,
    .attention_row = gda_attention_row,
    .attn_flops_per_token = attn_diff_flops,
    .heads_note = " (signal heads)",
    .head_dim_note = " (per query head; values 2x)",
    .extra_params_note = "",
    .lambda_note = "",
    .map_note = "GDA (A_signal - lambda A_noise of its group)",
};
