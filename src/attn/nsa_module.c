/* NSA (Native Sparse Attention, DeepSeek 2025, arXiv 2502.11089) as a
 * variant: its tensors and initialisation, the training forward and backward
 * through nsa.h's kernels, its own decoding cache, the analysis hooks and its
 * FLOPs. The computation is nsa.h's; docs/model.md states it in full.
 *
 * The gates' product x . Wg^T comes from the model's matmul without an
 * activation; the forward adds gate.bias and takes the sigmoid itself (and
 * the backward goes back through both), so that the bias needs nothing of
 * the model.
 *
 * With nsa_shared_kv the three branches read one key and one value product
 * (k_proj, RoPE'd, and v_proj): compression then pools RoPE'd keys, as MoBA's
 * block means and fla-org's NSA do. The kernels see the same rows three
 * times; the backward sums the three branches' gradients. */
#include <math.h>
#include <string.h>

#include "attn/nsa.h"
#include "attn/variant.h"
#include "attn/variant_common.h"

/* The roles of the tensors; with a K/V pair per branch, also their checkpoint order (the table). */
enum { Q, K_CMP, V_CMP, K_SLC, V_SLC, K_WIN, V_WIN, CMP_K, CMP_V, PE_K, PE_V, GATE, GATE_B, OUT, N_TENSORS };

/* The tensor of each role with one shared K/V projection: q_proj, k_proj, v_proj, then as above from cmp_k. */
static const int SHARED_SLOT[N_TENSORS] = {0, 1, 2, 1, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9};

/* The index in c's tensors of role r. */
static int slot(const da_config *c, int r) { return c->nsa_shared_kv ? SHARED_SLOT[r] : r; }

static int nsa_head_dim(const da_config *c) { return c->dim / c->n_heads; }

static int nsa_tensors(const da_config *c, attn_tensor *t) {
    const int C = c->dim, Ckv = da_attn_kv_cols(c), d = nsa_head_dim(c), l = c->nsa_block;
    int n = 0;
    t[n++] = attn_in("q_proj.weight", C, C, 1, ATTN_VIEW_Q);
    if (c->nsa_shared_kv) {
        t[n++] = attn_in("k_proj.weight", Ckv, C, 1, ATTN_VIEW_K);
        t[n++] = attn_in("v_proj.weight", Ckv, C, 0, ATTN_VIEW_V);
    } else {
        t[n++] = attn_in("k_cmp.weight", Ckv, C, 0, ATTN_VIEW_NONE); /* no RoPE: compression sees raw keys */
        t[n++] = attn_in("v_cmp.weight", Ckv, C, 0, ATTN_VIEW_NONE);
        t[n++] = attn_in("k_slc.weight", Ckv, C, 1, ATTN_VIEW_K);
        t[n++] = attn_in("v_slc.weight", Ckv, C, 0, ATTN_VIEW_V);
        t[n++] = attn_in("k_win.weight", Ckv, C, 1, ATTN_VIEW_NONE);
        t[n++] = attn_in("v_win.weight", Ckv, C, 0, ATTN_VIEW_NONE);
    }
    /* the compression MLPs: 2-D, decayed; read by the kernels, so f32 */
    attn_tensor *ck = &t[n++];
    *ck = attn_param_vector("cmp_k.weight", d, ATTN_INIT_VARIANT, 0.0f);
    ck->cols = l * d;
    ck->decay = 1;
    t[n] = *ck;
    snprintf(t[n].name, sizeof t[n].name, "cmp_v.weight");
    n++;
    attn_tensor *pk = &t[n++];
    *pk = attn_param_vector("cmp_pe_k", l, ATTN_INIT_ZEROS, 0.0f);
    pk->cols = d;
    t[n] = *pk;
    snprintf(t[n].name, sizeof t[n].name, "cmp_pe_v");
    n++;
    /* the gates' logits (bias and sigmoid here); few rows, kept f32 in a GGUF */
    t[n] = attn_in("gate.weight", 3 * c->n_heads, C, 0, ATTN_VIEW_NONE);
    t[n++].quantizable = 0;
    t[n++] = attn_param_vector("gate.bias", 3 * c->n_heads, ATTN_INIT_VARIANT, 0.0f);
    t[n++] = attn_out_proj(C, C);
    return n; /* slot(c, OUT) + 1 */
}

/* cmp_k, cmp_v: mean pooling, W[c, p*d + c] = 1/l; gate.bias: -ln 2, every gate near 1/3. */
static void nsa_init_tensor(const da_config *c, int j, float *w) {
    const int d = nsa_head_dim(c), l = c->nsa_block;
    if (j == slot(c, CMP_K) || j == slot(c, CMP_V)) {
        memset(w, 0, (size_t)d * l * d * sizeof(float));
        for (int ch = 0; ch < d; ch++)
            for (int p = 0; p < l; p++) w[(size_t)ch * l * d + (size_t)p * d + ch] = 1.0f / (float)l;
    } else if (j == slot(c, GATE_B)) {
        for (int i = 0; i < 3 * c->n_heads; i++) w[i] = -logf(2.0f);
    }
}

static da_status nsa_validate(const da_config *c) {
    if (c->nsa_stride < 1) return da_errorf("nsa_stride: %d must be >= 1", c->nsa_stride);
    if (c->nsa_block < c->nsa_stride)
        return da_errorf("nsa_block: %d must be >= nsa_stride=%d (1 <= s <= l <= l')", c->nsa_block, c->nsa_stride);
    if (c->nsa_select < c->nsa_block)
        return da_errorf("nsa_select: %d must be >= nsa_block=%d (1 <= s <= l <= l')", c->nsa_select, c->nsa_block);
    if (c->nsa_topn < 3 || c->nsa_topn > NSA_MAX_TOPN)
        return da_errorf("nsa_topn: %d must be in 3..%d (the three forced blocks included)", c->nsa_topn, NSA_MAX_TOPN);
    if (c->nsa_window < 1) return da_errorf("nsa_window: %d must be >= 1", c->nsa_window);
    if (c->window > 0)
        return da_errorf("window: %d does not apply to --arch nsa (its window branch is --nsa-window)", c->window);
    return da_ok();
}

static nsa_shape shape_of(const da_config *c, int B, int T, int n_threads) {
    nsa_shape s = {B,           T,           c->n_heads,       c->n_kv_heads, nsa_head_dim(c), c->nsa_block,
                   c->nsa_stride, c->nsa_select, c->nsa_topn, c->nsa_window, n_threads};
    return s;
}

static nsa_shape shape_of_attn(const attn_shape *a) { return shape_of(a->cfg, a->B, a->T, a->n_threads); }

/* The saved activations (nsa.h's nsa_saved, plus the gates after their sigmoid, (B, T, 3H)), carved
 * from base for shape s; returns the floats used (base NULL: counting). */
static size_t carve(nsa_saved *sv, float **gate, float *base, const nsa_shape *s, int flash) {
    size_t used = 0;
#define TAKE(n) (used += (n), base ? base + used - (n) : NULL)
    sv->kc = TAKE(nsa_saved_floats_kv(s));
    sv->vc = TAKE(nsa_saved_floats_kv(s));
    sv->o_cmp = TAKE(nsa_saved_floats_out(s));
    sv->o_slc = TAKE(nsa_saved_floats_out(s));
    sv->o_win = TAKE(nsa_saved_floats_out(s));
    sv->sel = (int *)(void *)TAKE(nsa_saved_ints_sel(s)); /* an int per float slot */
    sv->lse = flash ? TAKE(nsa_saved_floats_lse(s)) : NULL;
    const size_t n_att = flash ? 0 : nsa_saved_floats_att(s), per_map = (size_t)s->B * s->H * s->T;
    float *att = TAKE(n_att);
    sv->att_cmp = att;
    sv->att_slc = att ? att + per_map * nsa_n_compressed(s, s->T) : NULL;
    sv->att_win = att ? sv->att_slc + per_map * s->T : NULL;
    *gate = TAKE((size_t)s->B * s->T * 3 * s->H);
#undef TAKE
    return used;
}

static size_t nsa_train_floats(const attn_shape *cap, int flash) {
    nsa_saved sv;
    float *gate;
    const nsa_shape s = shape_of_attn(cap);
    return carve(&sv, &gate, NULL, &s, flash);
}

static size_t kernel_scratch_floats(const nsa_shape *s, int flash) {
    return flash ? nsa_flash_scratch_floats(s) : nsa_reference_scratch_floats(s);
}

/* With shared K/V, after the kernels' scratch: the selection's and the window's d k, d v (B, T, G*d) each,
 * summed into the shared products' afterwards. */
static size_t shared_kv_floats(const nsa_shape *s) { return 4 * (size_t)s->B * s->T * s->G * s->d; }

static size_t nsa_scratch_floats(const attn_shape *a, int flash) {
    const nsa_shape s = shape_of_attn(a);
    return kernel_scratch_floats(&s, flash) + (a->cfg->nsa_shared_kv ? shared_kv_floats(&s) : 0);
}

/* x's saved activations for its capacity shape; *s: this call's shape. */
static void saved_of(const attn_train_ctx *x, nsa_saved *sv, float **gate, nsa_shape *s) {
    nsa_shape cap = shape_of(x->cfg, x->cap_B, x->cap_T, x->shape.n_threads);
    carve(sv, gate, x->saved, &cap, x->flash);
    *s = shape_of_attn(&x->shape);
}

static nsa_inputs inputs_of(const da_config *c, float *const *proj, float *const *w, const float *gate) {
#define P(r) proj[slot(c, r)]
#define W(r) w[slot(c, r)]
    nsa_inputs in = {P(Q), P(K_CMP), P(V_CMP), P(K_SLC), P(V_SLC), P(K_WIN), P(V_WIN),
                     gate, W(CMP_K), W(CMP_V), W(PE_K),  W(PE_V)};
#undef P
#undef W
    return in;
}

static float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

static void nsa_forward(const attn_train_ctx *x) {
    nsa_saved sv;
    float *gate;
    nsa_shape s;
    saved_of(x, &sv, &gate, &s);
    const size_t n = (size_t)s.B * s.T, H3 = 3 * (size_t)s.H;
    const float *bias = x->w[slot(x->cfg, GATE_B)], *logit = x->proj[slot(x->cfg, GATE)];
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < H3; i++) gate[r * H3 + i] = sigmoid(logit[r * H3 + i] + bias[i]);
    const nsa_inputs in = inputs_of(x->cfg, x->proj, x->w, gate);
    if (x->flash) nsa_kernels_of(x->exec->isa)->flash_forward(x->out, &in, &sv, &s, x->scratch);
    else nsa_reference_forward(x->out, &in, &sv, &s);
}

static void nsa_backward(const attn_train_ctx *x) {
    nsa_saved sv;
    float *gate;
    nsa_shape s;
    saved_of(x, &sv, &gate, &s);
    const da_config *c = x->cfg;
    const nsa_inputs in = inputs_of(c, x->proj, x->w, gate);
    float *const *d = x->dproj, *const *g = x->g;
#define D(r) d[slot(c, r)]
#define G(r) g[slot(c, r)]
    nsa_grads gr = {D(Q),     D(K_CMP), D(V_CMP), D(K_SLC), D(V_SLC), D(K_WIN),
                    D(V_WIN), D(GATE),  G(CMP_K), G(CMP_V), G(PE_K),  G(PE_V)};
    float *dgate = D(GATE), *dbias = G(GATE_B);
#undef D
#undef G
    const size_t n = (size_t)s.B * s.T, H3 = 3 * (size_t)s.H, nkv = n * s.G * s.d;
    float *extra = x->scratch + kernel_scratch_floats(&s, x->flash);
    if (c->nsa_shared_kv) gr.dk_slc = extra, gr.dv_slc = extra + nkv, gr.dk_win = extra + 2 * nkv,
                          gr.dv_win = extra + 3 * nkv;
    if (x->flash) nsa_kernels_of(x->exec->isa)->flash_backward(&gr, x->dout, &in, &sv, &s, x->scratch);
    else nsa_reference_backward(&gr, x->dout, &in, &sv, &s, x->scratch);
    if (c->nsa_shared_kv)
        for (size_t i = 0; i < nkv; i++) {
            gr.dk_cmp[i] += gr.dk_slc[i] + gr.dk_win[i];
            gr.dv_cmp[i] += gr.dv_slc[i] + gr.dv_win[i];
        }
    /* d gate -> d its logits (through the sigmoid), and the bias's share */
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < H3; i++) {
            const float gv = gate[r * H3 + i];
            dgate[r * H3 + i] *= gv * (1.0f - gv);
            dbias[i] += dgate[r * H3 + i];
        }
}

/* ---------------------------------------------------------------- decoding: nsa.h's cache */

static size_t nsa_cache_floats_of(const da_config *c, int max_T) {
    const nsa_shape s = shape_of(c, 1, max_T, 1);
    return nsa_cache_floats(&s, max_T);
}

static size_t nsa_cache_scratch(const da_config *c, int max_T) {
    const nsa_shape s = shape_of(c, 1, max_T, 1);
    return nsa_decode_scratch_floats(&s, max_T) + 3 * (size_t)c->n_heads;
}

static void nsa_cache_step(const attn_cache_step *x) {
    const da_config *c = x->cfg;
    const nsa_shape s = shape_of(c, 1, x->max_T, 1);
    nsa_cache cache;
    nsa_cache_init(&cache, x->cache, &s, x->max_T);
    cache.n_tokens = x->pos; /* the layout is fixed by max_T; the counts follow from the position */
    cache.n_blocks = nsa_n_compressed(&s, x->pos);
    float *gate = x->scratch, *scratch = gate + 3 * c->n_heads;
    const float *logit = x->proj[slot(c, GATE)], *bias = x->w[slot(c, GATE_B)];
    for (int i = 0; i < 3 * c->n_heads; i++) gate[i] = sigmoid(logit[i] + bias[i]);
    float *const *p = (float *const *)x->proj, *const *w = (float *const *)x->w;
    const nsa_inputs in = inputs_of(c, p, w, gate);
    nsa_kernels_of(da_exec_default().isa)->decode_step(x->out, &cache, &in, &s, scratch);
}

/* docs/model.md: 4 G d (2n + 2 floor(n/s) + 2 + 2w + 2l) bytes per layer. */
static double nsa_cache_bytes(const da_config *c, int n) {
    const double Gd = (double)da_attn_kv_cols(c);
    return 4.0 * Gd * (2.0 * n + 2.0 * (n / c->nsa_stride) + 2.0 + 2.0 * c->nsa_window + 2.0 * c->nsa_block);
}

/* A step reads the keys and values of its visible compressed blocks, of at most n l' chosen tokens and of the
 * window. */
static double nsa_cache_read_bytes(const da_config *c, long n) {
    const double Gd = (double)da_attn_kv_cols(c), cmp = n >= c->nsa_block ? (n - c->nsa_block) / c->nsa_stride + 1 : 0;
    const double slc = (double)c->nsa_topn * c->nsa_select, win = c->nsa_window;
    return 8.0 * Gd * (cmp + (slc < n ? slc : n) + (win < n ? win : n));
}

/* ---------------------------------------------------------------- analysis: the three branches of a head */

enum { BR_CMP, BR_SLC, BR_WIN };

typedef struct {
    nsa_shape s;
    nsa_saved sv;
    const float *gate, *q;
    float scale;
} probe_view;

static probe_view view_of(const attn_probe *p) {
    probe_view v;
    float *gate;
    v.s = shape_of(p->cfg, 1, p->T, 1);
    carve(&v.sv, &gate, (float *)p->saved, &v.s, 1);
    v.gate = gate;
    v.q = p->proj[slot(p->cfg, Q)];
    v.scale = 1.0f / sqrtf((float)v.s.d);
    return v;
}

static int nsa_logit_maps(const da_config *c) { return 3 * c->n_heads; }

static float dot_row(const float *a, const float *b, int d) {
    float acc = 0;
    for (int e = 0; e < d; e++) acc += a[e] * b[e];
    return acc;
}

/* Branch br of head h at query t: its keys' logits to out, in the order of their positions; returns their count. */
static int branch_logits(const attn_probe *p, const probe_view *v, int h, int br, int t, float *out) {
    const nsa_shape *s = &v->s;
    const int d = s->d, G = s->G, g = h / (s->H / G), Gd = G * d;
    const float *q = v->q + (size_t)t * s->H * d + (size_t)h * d;
    int n = 0;
    if (br == BR_CMP) {
        for (int i = 0; i < nsa_n_visible(s, t); i++, n++) {
            out[n] = v->scale * dot_row(q, v->sv.kc + (size_t)i * Gd + (size_t)g * d, d);
        }
    } else if (br == BR_SLC) {
        const int *sel = v->sv.sel + ((size_t)t * G + g) * s->topn;
        for (int k = 0; k < s->topn && sel[k] >= 0; k++)
            for (int j = sel[k] * s->select; j < (sel[k] + 1) * s->select && j <= t; j++, n++) {
                out[n] = v->scale * dot_row(q, p->proj[slot(p->cfg, K_SLC)] + (size_t)j * Gd + (size_t)g * d, d);
            }
    } else {
        for (int j = t - s->window + 1 > 0 ? t - s->window + 1 : 0; j <= t; j++, n++) {
            out[n] = v->scale * dot_row(q, p->proj[slot(p->cfg, K_WIN)] + (size_t)j * Gd + (size_t)g * d, d);
        }
    }
    return n;
}

static int nsa_logits(const attn_probe *p, int map, int t, int j0, float *out) {
    (void)j0;
    const probe_view v = view_of(p);
    return branch_logits(p, &v, map / 3, map % 3, t, out);
}

/* The gated sum of the three branches' maps over tokens; a compressed block's
 * probability is spread evenly over its l tokens (its key starts as their mean). */
static void nsa_attention_row(const attn_probe *p, int h, int t, float *row, float *tmp) {
    const probe_view v = view_of(p);
    const nsa_shape *s = &v.s;
    memset(row, 0, (size_t)(t + 1) * sizeof(float));
    for (int br = 0; br < 3; br++) {
        /* tmp: the branch's logits, then its unnormalised probabilities */
        const int n = branch_logits(p, &v, h, br, t, tmp);
        float mx = -INFINITY;
        for (int k = 0; k < n; k++) mx = tmp[k] > mx ? tmp[k] : mx;
        double sum = 0;
        for (int k = 0; k < n; k++) sum += tmp[k] = expf(tmp[k] - mx);
        const float gv = v.gate[(size_t)t * 3 * s->H + (size_t)h * 3 + br];
        if (br == BR_CMP) {
            for (int i = 0; i < n; i++)
                for (int q = 0; q < s->block; q++) row[i * s->stride + q] += gv * (float)(tmp[i] / sum) / s->block;
        } else if (br == BR_SLC) {
            const int *sel = v.sv.sel + ((size_t)t * s->G + h / (s->H / s->G)) * s->topn;
            int k = 0;
            for (int b = 0; b < s->topn && sel[b] >= 0; b++)
                for (int j = sel[b] * s->select; j < (sel[b] + 1) * s->select && j <= t; j++)
                    row[j] += gv * (float)(tmp[k++] / sum);
        } else {
            const int j0 = t - s->window + 1 > 0 ? t - s->window + 1 : 0;
            for (int j = j0; j <= t; j++) row[j] += gv * (float)(tmp[j - j0] / sum);
        }
    }
    double mass = 0;
    for (int j = 0; j <= t; j++) mass += fabsf(row[j]);
    for (int j = 0; j <= t; j++) row[j] = mass > 0 ? (float)(row[j] / mass) : 0.0f;
}

/* Forward + backward (3x nsa_forward_flops) per token. */
static double nsa_flops(const da_config *c, int T) {
    const nsa_shape s = shape_of(c, 1, T, 1);
    return 3.0 * nsa_forward_flops(&s) / T;
}

const attn_variant attn_nsa = {
    .arch = DA_ARCH_NSA,
    .name = "nsa",
    .label = "NSA",
    .about = "Native Sparse Attention: gated compressed, selected and window branches",
    .maps = 3,
    .heads_per_diff_head = 2,
    .sub_heads_per_head = 1,
    .layout = {1, 1, 1},
    .compared = 0,
    .baseline = 0,
    .hf_class = NULL,
    .hf = 0,
    .gguf = 1,
    .field_prefix = "nsa_",
    .tensors = nsa_tensors,
    .validate = nsa_validate,
    .init_tensor = nsa_init_tensor,
    .train_floats = nsa_train_floats,
    .scratch_floats = nsa_scratch_floats,
    .forward = nsa_forward,
    .backward = nsa_backward,
    .cache_floats = nsa_cache_floats_of,
    .cache_scratch_floats = nsa_cache_scratch,
    .cache_step = nsa_cache_step,
    .cache_bytes = nsa_cache_bytes,
    .cache_read_bytes = nsa_cache_read_bytes,
    .exact_logits_only = 1,
    .logit_maps = nsa_logit_maps,
    .logits = nsa_logits,
    .attention_row = nsa_attention_row,
    .attn_flops_per_token = nsa_flops,
    .heads_note = " (query heads, as softmax)",
    .head_dim_note = "",
    .extra_params_note = "two more K/V pairs (none with --nsa-shared-kv), the compression and the gates",
    .lambda_note = "",
    .map_note = "NSA (the gated sum of its compressed, selected and window maps)",
};
