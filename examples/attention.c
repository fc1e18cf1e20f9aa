/* diffattn's attention as a drop-in for multi-head attention: this program
 * runs the public kernel on one layer's queries, keys and values and checks
 * that it gives that layer's own attention output, for DIFF and softmax.
 *
 *   cc attention.c $(pkg-config --cflags --libs diffattn) -o attention && ./attention */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "diffattn.h"
#include "diffattn/attention.h"

/* The largest |a - b| over n floats. */
static double max_diff(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

/* Attention of layer 0 of a fresh model of arch, through the public kernel,
 * against the model's forward. Returns the largest difference, or -1. */
static double check(da_arch arch) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 64, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 1, c.max_seq_len = 48;
    if (arch == DA_ARCH_SOFTMAX) c.n_heads = 4, c.n_kv_heads = 2;
    c.ffn_hidden = da_default_ffn_hidden(c.dim);
    const int B = 2, T = 48;
    da_model m;
    da_acts *a = NULL;
    da_status st = da_model_create(&m, &c);
    if (!st.code) st = da_acts_create(&a, &c, B, T);
    if (st.code) {
        fprintf(stderr, "attention example: %s\n", st.msg);
        return -1;
    }
    da_model_init(&m, 7);
    int tokens[2 * 48];
    for (int i = 0; i < B * T; i++) tokens[i] = (i * 37 + 5) % c.vocab_size;
    da_forward(&m, a, tokens, NULL, B, T);
    const float *q, *k;
    da_acts_qk(a, 0, &q, &k);
    const int d = da_head_dim(&c);
    da_attention_shape s = {arch, B, T, c.n_heads, c.n_kv_heads, d};
    const size_t n_out = (size_t)B * T * c.dim;
    float *out = malloc(n_out * sizeof(float)), *normed = malloc(n_out * sizeof(float));
    float *saved = malloc(da_attention_saved_floats(&s) * sizeof(float));
    const float lambda = arch == DA_ARCH_DIFF ? da_model_lambda(&m, 0) : 0.0f;
    st = da_attention_forward(out, saved, q, k, da_acts_v(a, 0), lambda, &s);
    const float *ours = out;
    if (!st.code && arch == DA_ARCH_DIFF) {
        const float *subln = m.params + da_model_find(&m, "layers.0.attn.subln.weight")->offset;
        st = da_attention_head_norm(normed, out, subln, da_lambda_init(0), B * T * c.n_heads, 2 * d);
        ours = normed;
    }
    double worst = st.code ? -1 : max_diff(ours, da_acts_attn_out(a, 0), n_out);
    if (st.code) fprintf(stderr, "attention example: %s\n", st.msg);
    free(out), free(normed), free(saved);
    da_acts_free(a);
    da_model_free(&m);
    return worst;
}

int main(void) {
    int fail = 0;
    for (int i = 0; i < 2; i++) {
        const da_arch arch = i ? DA_ARCH_SOFTMAX : DA_ARCH_DIFF;
        const double worst = check(arch);
        printf("%s attention, public kernel vs the model's layer: max |difference| %.3g\n", da_arch_name(arch), worst);
        fail |= !(worst >= 0 && worst < 1e-5);
    }
    return fail;
}
