/* Model configuration: defaults, derived sizes, and validation. */
#include <math.h>
#include <string.h>

#include "diffattn/model.h"

void da_config_default(da_config *c) {
    memset(c, 0, sizeof *c);
    c->arch = DA_ARCH_DIFF;
    c->dim = 256;
    c->n_layers = 4;
    c->n_heads = 4;
    c->n_kv_heads = 4;
    c->vocab_size = 256;
    c->ffn_hidden = da_default_ffn_hidden(c->dim);
    c->max_seq_len = 256;
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    c->tie_embeddings = 0;
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

/* Upper bounds keep every size product within int range and memory sane. */
#define DA_MAX_DIM 65536
#define DA_MAX_LAYERS 1024
#define DA_MAX_VOCAB (1 << 24)
#define DA_MAX_SEQ (1 << 20)
#define DA_MAX_HEAD_DIM 1024 /* d; the DIFF head rows are 2d wide */

da_status da_config_validate(const da_config *c) {
    if (c->arch != DA_ARCH_DIFF && c->arch != DA_ARCH_SOFTMAX && c->arch != DA_ARCH_DIFF2)
        return da_errorf("arch: unknown value %d (expected diff, diff2 or softmax)", (int)c->arch);
    if (c->dim <= 0 || c->dim > DA_MAX_DIM)
        return da_errorf("dim: %d is out of range (1..%d)", c->dim, DA_MAX_DIM);
    if (c->n_layers <= 0 || c->n_layers > DA_MAX_LAYERS)
        return da_errorf("n_layers: %d is out of range (1..%d)", c->n_layers, DA_MAX_LAYERS);
    if (c->n_heads <= 0 || c->n_heads > c->dim)
        return da_errorf("n_heads: %d is out of range (1..dim=%d)", c->n_heads, c->dim);
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
    if (c->vocab_size <= 0 || c->vocab_size > DA_MAX_VOCAB)
        return da_errorf("vocab_size: %d is out of range (1..%d)", c->vocab_size, DA_MAX_VOCAB);
    if (c->ffn_hidden <= 0 || c->ffn_hidden > 8 * DA_MAX_DIM)
        return da_errorf("ffn_hidden: %d is out of range (1..%d)", c->ffn_hidden, 8 * DA_MAX_DIM);
    if (c->max_seq_len <= 0 || c->max_seq_len > DA_MAX_SEQ)
        return da_errorf("max_seq_len: %d is out of range (1..%d)", c->max_seq_len, DA_MAX_SEQ);
    if (!(c->norm_eps > 0 && c->norm_eps < 1))
        return da_errorf("norm_eps: %g must be in (0, 1)", (double)c->norm_eps);
    if (!(c->rope_theta > 1 && isfinite(c->rope_theta)))
        return da_errorf("rope_theta: %g must be a finite number > 1", (double)c->rope_theta);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1)
        return da_errorf("tie_embeddings: must be true or false");
    if (c->window < 0 || c->window > DA_MAX_SEQ)
        return da_errorf("window: %d is out of range (0 = full attention, or 1..%d keys)", c->window, DA_MAX_SEQ);
    return da_ok();
}
