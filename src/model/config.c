/* Model configuration: the schema table, defaults, derived sizes, and validation. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "attn/variant.h"
#include "diffattn/model.h"
#include "ops/ops.h"

/* Upper bounds keep every size product within int range and memory sane. */
#define DA_MAX_DIM 65536
#define DA_MAX_LAYERS 1024
#define DA_MAX_VOCAB (1 << 24)
#define DA_MAX_SEQ (1 << 20)
#define DA_MAX_HEAD_DIM 1024 /* d; the DIFF head rows are 2d wide */

/* da_arch order, the variant table's names (da_arch_parse checks the two agree) */
static const char *const ARCH_NAMES[] = {"diff", "softmax", "diff2", "nsa", "moba", "gda", NULL};
_Static_assert(sizeof ARCH_NAMES / sizeof ARCH_NAMES[0] == DA_ARCH_N + 1, "ARCH_NAMES out of step with da_arch");
_Static_assert(sizeof(da_arch) == sizeof(int), "DA_FIELD_ENUM stores an int");
static const char *const ROPE_FREQ_NAMES[] = {"diff", "llama", NULL};
static const char *const ROPE_SCALE_NAMES[] = {"none", "linear", "llama3", NULL};
_Static_assert(sizeof(da_rope_freq) == sizeof(int) && sizeof(da_rope_scale) == sizeof(int),
               "DA_FIELD_ENUM stores an int");
static const char *const HEAD_NORM_NAMES[] = {"auto", "on", "off", NULL}; /* auto: the variant's default */
_Static_assert(sizeof(da_head_norm) == sizeof(int) && DA_HEAD_NORM_OFF == 2, "HEAD_NORM_NAMES out of step");
static const char *const MLP_NAMES[] = {"swiglu", "polynorm", NULL};
_Static_assert(sizeof(da_mlp) == sizeof(int) && DA_MLP_POLYNORM == 1, "MLP_NAMES out of step");
static const char *const LAMBDA_INIT_NAMES[] = {"depth", NULL}; /* the spelling of 0 */

#define F(key, flag, field, type, def, lo, hi, bounds, help) \
    {key, flag, offsetof(da_config, field), type, def, lo, hi, bounds, DA_RESUME_FIXED, 1, help, NULL}

/* Metadata order is this order; every field is stored (window only when > 0)
 * and fixed for a run (the parameters' shapes, or what they were trained on,
 * depend on it). */
const da_field da_config_fields[DA_CONFIG_N_FIELDS] = {
    {"arch", "arch", offsetof(da_config, arch), DA_FIELD_ENUM, DA_ARCH_DIFF, 0, DA_ARCH_N - 1, "[]", DA_RESUME_FIXED, 1,
     "diff (Differential Transformer), diff2 (DIFF V2), softmax (the baseline), nsa (Native Sparse Attention), "
     "moba (Mixture of Block Attention) or gda (grouped differential attention)",
     ARCH_NAMES},
    F("dim", "dim", dim, DA_FIELD_INT, 256, 1, DA_MAX_DIM, "[]", "model width"),
    F("n_layers", "layers", n_layers, DA_FIELD_INT, 4, 1, DA_MAX_LAYERS, "[]", "number of blocks"),
    F("n_heads", "heads", n_heads, DA_FIELD_INT, 4, 1, DA_MAX_DIM, "[]",
      "DIFF heads; --arch softmax gets twice as many plain heads, for equal parameters, and --arch diff2 as "
      "many output heads as softmax (each with two query heads); --arch nsa and moba as softmax; --arch gda: its "
      "signal heads"),
    F("n_kv_heads", "kv-heads", n_kv_heads, DA_FIELD_INT, 0, 0, DA_MAX_DIM, "[]",
      "KV groups in DIFF heads (GQA; 0 = --heads, plain MHA); doubled for softmax, diff2, nsa and moba; "
      "--arch gda: its K/V pairs (0 = one per group)"),
    F("vocab_size", "vocab", vocab_size, DA_FIELD_INT, 256, 1, DA_MAX_VOCAB, "[]", "vocabulary size (256 = bytes)"),
    F("ffn_hidden", "ffn", ffn_hidden, DA_FIELD_INT, 0, 0, 8 * DA_MAX_DIM, "[]",
      "SwiGLU hidden size (0 = 8*dim/3 rounded up to a multiple of 64)"),
    /* below 1e-10 (rms_norm_eps 1e-45 was accepted) a zero row's rstd overflows: every logit NaN */
    F("norm_eps", "norm-eps", norm_eps, DA_FIELD_FLOAT, 1e-5, 1e-10, 1, "[)", "RMSNorm epsilon"),
    F("rope_theta", "rope-theta", rope_theta, DA_FIELD_FLOAT, 10000, 1, INFINITY, "()", "RoPE base"),
    F("max_seq_len", "seq", max_seq_len, DA_FIELD_INT, 256, 1, DA_MAX_SEQ, "[]",
      "context length (the model's max_seq_len)"),
    F("tie_embeddings", "tie-embeddings", tie_embeddings, DA_FIELD_BOOL, 0, 0, 1, "[]",
      "share the LM head with the token embedding"),
    {"window", "window", offsetof(da_config, window), DA_FIELD_INT, 0, 0, DA_MAX_SEQ, "[]", DA_RESUME_FIXED,
     DA_STORED_UNLESS_DEFAULT, "sliding-window attention: each token sees the last N keys, itself included (0 = all)",
     NULL},
    /* the RoPE rule: models from Hugging Face use llama frequencies and its rope_scaling */
#define R(key, flag, field, type, def, lo, hi, bounds, help, names)                                              \
    {key, flag, offsetof(da_config, field), type, def, lo, hi, bounds, DA_RESUME_FIXED, DA_STORED_UNLESS_DEFAULT, \
     help, names}
    R("rope_freq", "rope-freq", rope_freq, DA_FIELD_ENUM, DA_ROPE_FREQ_DIFF, 0, 1, "[]",
      "RoPE frequencies: diff (theta^(-j/(d/2-1)), the DIFF framework's) or llama (theta^(-2j/d))", ROPE_FREQ_NAMES),
    R("rope_scaling", "rope-scaling", rope_scaling, DA_FIELD_ENUM, DA_ROPE_SCALE_NONE, 0, 2, "[]",
      "RoPE scaling (Hugging Face's rope_scaling): none, linear or llama3", ROPE_SCALE_NAMES),
    R("rope_factor", "rope-factor", rope_factor, DA_FIELD_FLOAT, 1, 1e-3, 1e6, "[]",
      "linear and llama3 scaling: frequencies / factor", NULL),
    R("rope_low_freq_factor", "rope-low-freq-factor", rope_low_freq_factor, DA_FIELD_FLOAT, 1, 1e-3, 1e6, "[]",
      "llama3 scaling: wavelengths above original/this are divided by the factor", NULL),
    R("rope_high_freq_factor", "rope-high-freq-factor", rope_high_freq_factor, DA_FIELD_FLOAT, 4, 1e-3, 1e6, "[]",
      "llama3 scaling: wavelengths below original/this are kept", NULL),
    R("rope_original_max_pos", "rope-original-max-pos", rope_original_max_pos, DA_FIELD_INT, 8192, 1, DA_MAX_SEQ, "[]",
      "llama3 scaling: the original context length (original_max_position_embeddings)", NULL),
    /* the paper's Table 6 ablations */
    R("head_norm", "head-norm", head_norm, DA_FIELD_ENUM, DA_HEAD_NORM_DEFAULT, 0, 2, "[]",
      "per-head RMSNorm of the attention output (the paper's GroupNorm): on or off; default on for diff (off also "
      "drops the (1 - lambda_init) factor), off for softmax (on: one d-wide gain shared by the heads); auto: the "
      "arch's; diff2 has none",
      HEAD_NORM_NAMES),
    R("head_dim", "head-dim", head_dim, DA_FIELD_INT, 0, 0, DA_MAX_HEAD_DIM, "[]",
      "d, the query/key (sub-)head size, as Hugging Face's head_dim (0 = dim / heads, or dim / (2 heads) for "
      "diff); set, the attention is n_heads * d wide rather than dim (diffattn convert's preserve recipe)",
      NULL),
    /* a ramp's state: convert sets it, and training sets it every step (--lambda-ramp), so on train it is
     * a new model's start only */
    {"lambda_hold", "lambda-hold", offsetof(da_config, lambda_hold), DA_FIELD_FLOAT, 0, 0, 1, "[]",
     DA_RESUME_IGNORED, DA_STORED_UNLESS_DEFAULT,
     "diff, diff2: the share of the second map's weight held back, (1 - this) * lambda; training sets it each step "
     "from --lambda-ramp", NULL},
    R("lambda_init", "lambda-init", lambda_init, DA_FIELD_FLOAT, 0, 0, 1, "[)",
      "diff: lambda_init (and the (1 - lambda_init) factor): depth (0.8 - 0.6 exp(-0.3 layer)) or a number in "
      "(0, 1) for every layer",
      LAMBDA_INIT_NAMES),
    R("mlp", "mlp", mlp, DA_FIELD_ENUM, DA_MLP_SWIGLU, 0, 1, "[]",
      "the MLP's gate: swiglu (silu(x W1) * x W3) or polynorm (PolyNorm(x W1) * x W3, PolyNorm(u) = w0 n(u^3) + "
      "w1 n(u^2) + w2 n(u) + b with n the RMS normalisation of a row)",
      MLP_NAMES),
#undef R
    /* NSA's own (stored for --arch nsa only, at every value: da_config_field_written). The ranges admit 0,
     * the value of a configuration other archs build field by field; NSA's variant checks 1 <= s <= l <= l',
     * n >= 3 and w >= 1 */
#define N(key, flag, field, def, lo, hi, help) \
    {key, flag, offsetof(da_config, field), DA_FIELD_INT, def, lo, hi, "[]", DA_RESUME_FIXED, 1, help, NULL}
    N("nsa_block", "nsa-block", nsa_block, 32, 0, 4096, "NSA: l, the length of a compression block"),
    N("nsa_stride", "nsa-stride", nsa_stride, 16, 0, 4096, "NSA: s, the stride of compression blocks (s <= l)"),
    N("nsa_select", "nsa-select", nsa_select, 64, 0, 65536, "NSA: l', the length of a selection block (l <= l')"),
    N("nsa_topn", "nsa-topn", nsa_topn, 16, 0, 1024, "NSA: n, the selection blocks per query, the three forced ones "
      "(the first, the current and the one before) included (n >= 3)"),
    N("nsa_window", "nsa-window", nsa_window, 512, 0, DA_MAX_SEQ, "NSA: w, the keys of the sliding-window branch"),
    /* added after NSA files were written: stored only when set, so those files keep their bytes and meaning */
    {"nsa_shared_kv", "nsa-shared-kv", offsetof(da_config, nsa_shared_kv), DA_FIELD_BOOL, 0, 0, 1, "[]",
     DA_RESUME_FIXED, DA_STORED_UNLESS_DEFAULT,
     "NSA: one K and one V projection (k_proj, v_proj) read by all three branches instead of a pair each; "
     "compression then pools the RoPE'd keys", NULL},
    /* MoBA's own, as NSA's (its variant checks B >= 1, k >= 1) */
    N("moba_block", "moba-block", moba_block, 64, 0, DA_MAX_SEQ, "MoBA: B, the length of a key block"),
    N("moba_topk", "moba-topk", moba_topk, 4, 0, 65536, "MoBA: k, the blocks a query attends to, its own included"),
    /* GDA's own (its variant checks that G divides --heads and --kv-heads divides G) */
    N("gda_noise_heads", "noise-heads", gda_noise_heads, 0, 0, DA_MAX_DIM,
      "GDA: G, the noise heads, one per group of --heads/G signal heads (0 = --heads: DIFF V1)"),
#undef N
};
_Static_assert(sizeof da_config_fields / sizeof da_config_fields[0] == DA_CONFIG_N_FIELDS,
               "da_config_fields out of step with DA_CONFIG_N_FIELDS");
#undef F

void da_config_default(da_config *c) {
    memset(c, 0, sizeof *c);
    da_fields_default(da_config_fields, DA_CONFIG_N_FIELDS, c);
    c->n_kv_heads = c->n_heads;
    c->ffn_hidden = da_default_ffn_hidden(c->dim);
}

double da_kv_cache_bytes(const da_config *c, int n) {
    const attn_variant *v = da_attn_variant_of(c->arch);
    if (v->cache_bytes) return v->cache_bytes(c, n);
    const int kept = c->window > 0 && c->window < n ? c->window : n;
    return 2.0 * sizeof(float) * (double)kept * da_attn_kv_cols(c);
}

int da_config_field_of_variant(int i) {
    for (int a = 0; a < DA_ARCH_N; a++) {
        const char *p = da_attn_variant_at(a)->field_prefix;
        if (p && !strncmp(da_config_fields[i].key, p, strlen(p))) return 1;
    }
    return 0;
}

int da_config_field_of_arch(const da_config *c, int i) {
    const char *own = da_attn_variant_of(c->arch)->field_prefix;
    return da_config_field_of_variant(i) && own && !strncmp(da_config_fields[i].key, own, strlen(own));
}

int da_config_field_written(const da_config *c, int i) {
    const da_field *f = &da_config_fields[i];
    if (da_config_field_of_variant(i) && !da_config_field_of_arch(c, i)) return 0;
    if (f->stored != DA_STORED_UNLESS_DEFAULT) return 1;
    da_config def;
    da_fields_default(da_config_fields, DA_CONFIG_N_FIELDS, &def);
    return !da_field_equal(f, c, &def);
}

int da_default_ffn_hidden(int dim) {
    int h = (8 * dim + 2) / 3;
    return (h + 63) / 64 * 64;
}

float da_lambda_init(int depth) { return da_attn_lambda_init(depth); }

float da_config_lambda_init(const da_config *c, int layer) { return da_attn_layer_lambda_init(c, layer); }

int da_config_head_norm(const da_config *c) { return da_attn_head_norm_on(c); }

int da_head_dim(const da_config *c) { return da_attn_head_dim(c); }

float da_lambda_ramp_factor(long step, long ramp) {
    if (ramp <= 0 || step >= ramp) return 1.0f;
    return step <= 0 ? 0.0f : (float)((double)step / (double)ramp);
}

int da_q_dim(const da_config *c) {
    attn_tensor t[ATTN_MAX_TENSORS];
    da_attn_tensors(c, t);
    return t[da_attn_tensor_with_view(c, ATTN_VIEW_Q)].rows;
}

int da_arch_maps(da_arch a) { return da_attn_variant_of(a)->maps; }

const char *da_arch_name(da_arch a) { return da_attn_variant_of(a)->name; }

int da_arch_parse(const char *s, da_arch *out) {
    for (int i = 0; i < DA_ARCH_N; i++)
        if (!strcmp(s, da_attn_variant_at(i)->name)) {
            *out = (da_arch)i;
            return 0;
        }
    return -1;
}

da_arch_info da_arch_describe(da_arch a) {
    const attn_variant *v = da_attn_variant_of(a);
    da_arch_info i = {v->name,       v->label,         v->about,         v->maps,         v->per_layer_lambda,
                      v->hf,         v->hf_class,      v->heads_note,    v->head_dim_note, v->extra_params_note,
                      v->lambda_note, v->baseline,      v->compared,       v->map_note,
                      v->exact_logits_only};
    return i;
}

da_arch da_arch_baseline(void) {
    for (int a = 0; a < DA_ARCH_N; a++)
        if (da_attn_variant_at(a)->baseline) return (da_arch)a;
    return (da_arch)0;
}

int da_arch_compare_defaults(da_arch *out) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++) /* the others, then the baseline */
        for (int a = 0; a < DA_ARCH_N; a++)
            if (da_attn_variant_at(a)->compared && da_attn_variant_at(a)->baseline == pass) out[n++] = (da_arch)a;
    return n;
}

const char *da_arch_names_join(char *out, size_t size, const da_arch *a, int n, const char *sep) {
    size_t used = 0;
    out[0] = 0;
    for (int i = 0; i < n && used < size; i++) {
        const int w = snprintf(out + used, size - used, "%s%s", i ? sep : "", da_arch_name(a[i]));
        used += w > 0 ? (size_t)w : 0;
    }
    return out;
}

const char *da_arch_names_all(char *out, size_t size, const char *sep) {
    da_arch a[DA_ARCH_N];
    for (int i = 0; i < DA_ARCH_N; i++) a[i] = (da_arch)i;
    return da_arch_names_join(out, size, a, DA_ARCH_N, sep);
}

const char *da_arch_names_default(char *out, size_t size, const char *sep) {
    da_arch a[DA_ARCH_N];
    return da_arch_names_join(out, size, a, da_arch_compare_defaults(a), sep);
}

const char *da_rope_freq_name(da_rope_freq f) { return f == DA_ROPE_FREQ_LLAMA ? "llama" : "diff"; }

int da_rope_freq_parse(const char *s, da_rope_freq *out) {
    for (int i = 0; ROPE_FREQ_NAMES[i]; i++)
        if (!strcmp(s, ROPE_FREQ_NAMES[i])) { *out = (da_rope_freq)i; return 0; }
    return -1;
}

const char *da_rope_scale_name(da_rope_scale s) {
    return (unsigned)s <= DA_ROPE_SCALE_LLAMA3 ? ROPE_SCALE_NAMES[s] : "?";
}

int da_rope_scale_parse(const char *s, da_rope_scale *out) {
    for (int i = 0; ROPE_SCALE_NAMES[i]; i++)
        if (!strcmp(s, ROPE_SCALE_NAMES[i])) { *out = (da_rope_scale)i; return 0; }
    return -1;
}

/* ops/rope.c's rope_freq_spec numbers rules and scalings as these enums do. */
_Static_assert(DA_ROPE_FREQ_LLAMA == 1 && DA_ROPE_SCALE_LINEAR == 1 && DA_ROPE_SCALE_LLAMA3 == 2,
               "rope_freq_spec numbering");

void da_rope_inv_freq_of(const da_config *c, double *inv_freq) {
    rope_freq_spec f = {.rule = (int)c->rope_freq,
                        .scaling = (int)c->rope_scaling,
                        .theta = c->rope_theta,
                        .factor = c->rope_factor,
                        .low_freq_factor = c->rope_low_freq_factor,
                        .high_freq_factor = c->rope_high_freq_factor,
                        .original_max_pos = c->rope_original_max_pos};
    da_rope_inv_freq(inv_freq, da_head_dim(c), &f);
}

void da_rope_tables(const da_config *c, float *cos_tab, float *sin_tab, int T) {
    double inv_freq[DA_MAX_HEAD_DIM / 2];
    da_rope_inv_freq_of(c, inv_freq);
    da_rope_tables_freq(cos_tab, sin_tab, T, da_head_dim(c), inv_freq);
}

void da_rope_at(const da_config *c, long pos, float *cos_row, float *sin_row) {
    double inv_freq[DA_MAX_HEAD_DIM / 2];
    da_rope_inv_freq_of(c, inv_freq);
    for (int j = 0; j < da_head_dim(c) / 2; j++) {
        const double a = (double)pos * inv_freq[j]; /* as da_rope_tables_freq computes it */
        cos_row[j] = (float)cos(a);
        sin_row[j] = (float)sin(a);
    }
}

int da_arch_heads(da_arch a, int diff_heads) { return da_attn_variant_of(a)->heads_per_diff_head * diff_heads; }

da_status da_config_from_diff_heads(da_config *c) {
    /* ranges first, on the counts as given, so a message quotes them */
    da_status st = da_fields_check(da_config_fields, DA_CONFIG_N_FIELDS, c);
    if (st.code) return st;
    if (c->n_kv_heads == 0) c->n_kv_heads = da_attn_default_kv_heads(c);
    c->n_heads = da_arch_heads(c->arch, c->n_heads);
    c->n_kv_heads = da_arch_heads(c->arch, c->n_kv_heads);
    if (c->ffn_hidden == 0) c->ffn_hidden = da_default_ffn_hidden(c->dim);
    if ((st = da_config_validate(c)).code) return st;
    /* the variant's own choice given explicitly is the default: the same file */
    if (c->head_norm != DA_HEAD_NORM_DEFAULT &&
        (c->head_norm == DA_HEAD_NORM_ON) == (da_attn_variant_of(c->arch)->head_norm_option == 2))
        c->head_norm = DA_HEAD_NORM_DEFAULT;
    return da_ok();
}

/* The model options of the paper's ablations apply to the variants that offer them. */
static da_status validate_options(const da_config *c, const attn_variant *v) {
    if (c->head_norm != DA_HEAD_NORM_DEFAULT && !v->head_norm_option)
        return da_errorf("head_norm: --arch %s has no per-head norm option (diff and softmax have; DIFF V2 dropped "
                         "the norm)", v->name);
    if (c->head_dim > 0 && !v->head_dim_option)
        return da_errorf("head_dim: %d is not an option of --arch %s (its heads split dim: leave head_dim 0)",
                         c->head_dim, v->name);
    if (c->lambda_hold != 0.0f && v->maps != 2)
        return da_errorf("lambda_hold: %g applies to the second map of diff and diff2; --arch %s has one map",
                         (double)c->lambda_hold, v->name);
    if (c->lambda_init != 0.0f && !v->lambda_init_option)
        return da_errorf("lambda_init: %g is a diff option; --arch %s has no lambda_init", (double)c->lambda_init,
                         v->name);
    return da_ok();
}

/* The relations between fields; each field's own range is in the table. */
da_status da_config_validate(const da_config *c) {
    da_status st = da_fields_check(da_config_fields, DA_CONFIG_N_FIELDS, c);
    if (st.code) return st;
    if (c->n_heads > c->dim) return da_errorf("n_heads: %d exceeds dim=%d", c->n_heads, c->dim);
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return da_errorf("n_kv_heads: %d must divide n_heads=%d", c->n_kv_heads, c->n_heads);
    const attn_variant *v = da_attn_variant_of(c->arch);
    if ((st = validate_options(c, v)).code) return st;
    if (v->validate && (st = v->validate(c)).code) return st;
    if (!c->head_dim && c->dim % (c->n_heads * v->sub_heads_per_head))
        return da_errorf("dim: %d is not divisible by n_heads=%d (heads split dim evenly)", c->dim, c->n_heads);
    int d = da_head_dim(c);
    if (d > DA_MAX_HEAD_DIM)
        return da_errorf("head size %d (dim=%d, n_heads=%d, arch=%s) exceeds %d; use more heads", d, c->dim,
                         c->n_heads, da_arch_name(c->arch), DA_MAX_HEAD_DIM);
    if (d < 4 || d % 2)
        return da_errorf("head size %d (dim=%d, n_heads=%d, head_dim=%d, arch=%s) must be even and >= 4 for RoPE; "
                         "use fewer heads",
                         d, c->dim, c->n_heads, c->head_dim, da_arch_name(c->arch));
    if (c->ffn_hidden <= 0) return da_errorf("ffn_hidden: %d must be positive", c->ffn_hidden);
    if (c->rope_scaling == DA_ROPE_SCALE_LLAMA3 && !(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return da_errorf("rope_high_freq_factor: %g must exceed rope_low_freq_factor %g (llama3 scaling)",
                         (double)c->rope_high_freq_factor, (double)c->rope_low_freq_factor);
    return da_ok();
}
