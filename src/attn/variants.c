/* The table of attention variants, in da_arch order, and the lookups every
 * caller uses instead of naming a variant. */
#include <stdio.h>
#include <string.h>

#include "attn/variant.h"
#include "attn/variant_common.h"

extern const attn_variant attn_diff, attn_softmax, attn_diff2;

static const attn_variant *const VARIANTS[DA_ARCH_N] = {&attn_diff, &attn_softmax, &attn_diff2};

const attn_variant *attn_variant_of(da_arch a) { return (unsigned)a < DA_ARCH_N ? VARIANTS[a] : VARIANTS[0]; }

const attn_variant *attn_variant_at(int i) { return i >= 0 && i < DA_ARCH_N ? VARIANTS[i] : NULL; }

int attn_tensors(const da_config *c, attn_tensor *out) { return attn_variant_of(c->arch)->tensors(c, out); }

int attn_tensor_with_view(const da_config *c, attn_view v) {
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (t[i].view == v) return i;
    return -1;
}

int attn_out_tensor(const da_config *c) {
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (t[i].role == ATTN_OUT) return i;
    return -1;
}

const attn_tensor *attn_tensor_named(const da_config *c, const char *full_name, attn_tensor *out) {
    const char *p = strstr(full_name, ".attn.");
    if (strncmp(full_name, "layers.", 7) || !p) return NULL;
    attn_tensor t[ATTN_MAX_TENSORS];
    const int n = attn_tensors(c, t);
    for (int i = 0; i < n; i++)
        if (!strcmp(p + 6, t[i].name)) {
            *out = t[i];
            return out;
        }
    return NULL;
}

attn_shape attn_shape_of(const da_config *c, int B, int T, int n_threads) {
    const attn_variant *v = attn_variant_of(c->arch);
    attn_shape s = {B, T, c->n_heads, c->n_kv_heads, c->dim / (c->n_heads * v->sub_heads_per_head), c->dim,
                    attn_kv_cols(c), n_threads, 0, c->window};
    return s;
}

size_t attn_scratch_floats(const attn_variant *v, const attn_shape *s, int flash) {
    return v->scratch_floats ? v->scratch_floats(s, flash) : attn_kernel_scratch(s, &v->layout, flash);
}
