/* Model configuration: the schema table, defaults, derived sizes, and validation. */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "diffattn/model.h"

/* Upper bounds keep every size product within int range and memory sane. */
#define DA_MAX_DIM 65536
#define DA_MAX_LAYERS 1024
#define DA_MAX_VOCAB (1 << 24)
#define DA_MAX_SEQ (1 << 20)
#define DA_MAX_HEAD_DIM 1024 /* d; the DIFF head rows are 2d wide */

static const char *const ARCH_NAMES[] = {"diff", "softmax", "diff2", NULL}; /* da_arch order */
_Static_assert(sizeof(da_arch) == sizeof(int), "DA_FIELD_ENUM stores an int");

#define F(key, flag, field, type, def, lo, hi, bounds, help) \
    {key, flag, offsetof(da_config, field), type, def, lo, hi, bounds, DA_RESUME_FIXED, 1, help, NULL}

/* Metadata order is this order; every field is stored (window only when > 0)
 * and fixed for a run (the parameters' shapes, or what they were trained on,
 * depend on it). */
const da_field da_config_fields[DA_CONFIG_N_FIELDS] = {
    {"arch", "arch", offsetof(da_config, arch), DA_FIELD_ENUM, DA_ARCH_DIFF, 0, 2, "[]", DA_RESUME_FIXED, 1,
     "diff (Differential Transformer), diff2 (DIFF V2) or softmax (the baseline)", ARCH_NAMES},
    F("dim", "dim", dim, DA_FIELD_INT, 256, 1, DA_MAX_DIM, "[]", "model width"),
    F("n_layers", "layers", n_layers, DA_FIELD_INT, 4, 1, DA_MAX_LAYERS, "[]", "number of blocks"),
    F("n_heads", "heads", n_heads, DA_FIELD_INT, 4, 1, DA_MAX_DIM, "[]",
      "DIFF heads; --arch softmax gets twice as many plain heads, for equal parameters, and --arch diff2 as "
      "many output heads as softmax (each with two query heads)"),
    F("n_kv_heads", "kv-heads", n_kv_heads, DA_FIELD_INT, 0, 0, DA_MAX_DIM, "[]",
      "KV groups in DIFF heads (GQA; 0 = --heads, plain MHA); doubled for softmax and diff2"),
    F("vocab_size", "vocab", vocab_size, DA_FIELD_INT, 256, 1, DA_MAX_VOCAB, "[]", "vocabulary size (256 = bytes)"),
    F("ffn_hidden", "ffn", ffn_hidden, DA_FIELD_INT, 0, 0, 8 * DA_MAX_DIM, "[]",
      "SwiGLU hidden size (0 = 8*dim/3 rounded up to a multiple of 64)"),
    F("norm_eps", "norm-eps", norm_eps, DA_FIELD_FLOAT, 1e-5, 0, 1, "()", "RMSNorm epsilon"),
    F("rope_theta", "rope-theta", rope_theta, DA_FIELD_FLOAT, 10000, 1, INFINITY, "()", "RoPE base"),
    F("max_seq_len", "seq", max_seq_len, DA_FIELD_INT, 256, 1, DA_MAX_SEQ, "[]",
      "context length (the model's max_seq_len)"),
    F("tie_embeddings", "tie-embeddings", tie_embeddings, DA_FIELD_BOOL, 0, 0, 1, "[]",
      "share the LM head with the token embedding"),
    {"window", "window", offsetof(da_config, window), DA_FIELD_INT, 0, 0, DA_MAX_SEQ, "[]", DA_RESUME_FIXED,
     DA_STORED_UNLESS_DEFAULT, "sliding-window attention: each token sees the last N keys, itself included (0 = all)",
     NULL},
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

int da_default_ffn_hidden(int dim) {
    int h = (8 * dim + 2) / 3;
    return (h + 63) / 64 * 64;
}

float da_lambda_init(int depth) { return 0.8f - 0.6f * expf(-0.3f * (float)depth); }

int da_head_dim(const da_config *c) {
    if (c->n_heads <= 0) return 0;
    return c->arch == DA_ARCH_DIFF ? c->dim / c->n_heads / 2 : c->dim / c->n_heads;
}

int da_q_dim(const da_config *c) { return c->arch == DA_ARCH_DIFF2 ? 2 * c->dim : c->dim; }

int da_arch_maps(da_arch a) { return a == DA_ARCH_SOFTMAX ? 1 : 2; }

const char *da_arch_name(da_arch a) {
    return a == DA_ARCH_DIFF ? "diff" : a == DA_ARCH_DIFF2 ? "diff2" : "softmax";
}

int da_arch_parse(const char *s, da_arch *out) {
    if (!strcmp(s, "diff")) { *out = DA_ARCH_DIFF; return 0; }
    if (!strcmp(s, "diff2")) { *out = DA_ARCH_DIFF2; return 0; }
    if (!strcmp(s, "softmax")) { *out = DA_ARCH_SOFTMAX; return 0; }
    return -1;
}

int da_arch_heads(da_arch a, int diff_heads) { return a == DA_ARCH_DIFF ? diff_heads : 2 * diff_heads; }

da_status da_config_from_diff_heads(da_config *c) {
    /* ranges first, on the counts as given, so a message quotes them */
    da_status st = da_fields_check(da_config_fields, DA_CONFIG_N_FIELDS, c);
    if (st.code) return st;
    if (c->n_kv_heads == 0) c->n_kv_heads = c->n_heads;
    c->n_heads = da_arch_heads(c->arch, c->n_heads);
    c->n_kv_heads = da_arch_heads(c->arch, c->n_kv_heads);
    if (c->ffn_hidden == 0) c->ffn_hidden = da_default_ffn_hidden(c->dim);
    return da_config_validate(c);
}

/* The relations between fields; each field's own range is in the table. */
da_status da_config_validate(const da_config *c) {
    da_status st = da_fields_check(da_config_fields, DA_CONFIG_N_FIELDS, c);
    if (st.code) return st;
    if (c->n_heads > c->dim) return da_errorf("n_heads: %d exceeds dim=%d", c->n_heads, c->dim);
    if (c->n_kv_heads <= 0 || c->n_kv_heads > c->n_heads || c->n_heads % c->n_kv_heads)
        return da_errorf("n_kv_heads: %d must divide n_heads=%d", c->n_kv_heads, c->n_heads);
    int split = c->arch == DA_ARCH_DIFF ? 2 * c->n_heads : c->n_heads;
    if (c->dim % split)
        return da_errorf("dim: %d is not divisible by %s=%d (%s)", c->dim,
                         c->arch == DA_ARCH_DIFF ? "2*n_heads" : "n_heads", split,
                         c->arch == DA_ARCH_DIFF ? "each DIFF head holds two sub-heads"
                                                 : "heads split dim evenly");
    int d = da_head_dim(c);
    if (d > DA_MAX_HEAD_DIM)
        return da_errorf("head size %d (dim=%d, n_heads=%d, arch=%s) exceeds %d; use more heads", d, c->dim,
                         c->n_heads, da_arch_name(c->arch), DA_MAX_HEAD_DIM);
    if (d < 4 || d % 2)
        return da_errorf("head size %d (dim=%d, n_heads=%d, arch=%s) must be even and >= 4 for RoPE; "
                         "use fewer heads",
                         d, c->dim, c->n_heads, da_arch_name(c->arch));
    if (c->ffn_hidden <= 0) return da_errorf("ffn_hidden: %d must be positive", c->ffn_hidden);
    return da_ok();
}
