/* Overfitting one fixed batch drives the loss to near zero, for both
 * architecture: the forward, backward and AdamW work together. */
#include "diffattn.h"
#include "harness.h"

static int overfit(da_arch arch, int heads, int kv_heads) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.vocab_size = 64;
    c.ffn_hidden = 128;
    c.max_seq_len = 32;
    /* NSA: blocks small enough for 32 tokens (compressed blocks, a choice among 4, a window under T) */
    c.nsa_block = 8, c.nsa_stride = 4, c.nsa_select = 8, c.nsa_topn = 3, c.nsa_window = 8;
    const int B = 4, T = 32, steps = 150;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 7);
    CHECK(!da_model_alloc_grads(&m).code);
    da_adamw opt;
    CHECK(!da_adamw_create(&opt, m.n_params).code);
    da_acts *a;
    CHECK(!da_acts_create(&a, &c, B, T).code);
    int tokens[4 * 32], targets[4 * 32];
    da_rng rng;
    da_rng_seed(&rng, 11);
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)(da_rng_next(&rng) % 64);
        targets[i] = (int)(da_rng_next(&rng) % 64);
    }
    da_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.0f};
    float first = 0, loss = 0;
    for (int s = 0; s < steps; s++) {
        da_model_zero_grads(&m);
        loss = da_forward(&m, a, tokens, targets, B, T);
        if (s == 0) first = loss;
        da_backward(&m, a);
        da_adamw_step(&opt, &m, &ac, da_lr_schedule(s, 10, steps, 1e-2f, 1e-3f));
    }
    loss = da_forward(&m, a, tokens, targets, B, T);
    printf("     %s heads %d kv %d: loss %.4f -> %.4f after %d steps\n", da_arch_name(arch), heads, kv_heads,
           first, loss, steps);
    da_acts_free(a);
    da_adamw_free(&opt);
    da_model_free(&m);
    CHECK(loss < 0.05f);
    return 0;
}

static int test_overfit_diff(void) { return overfit(DA_ARCH_DIFF, 2, 2); }
static int test_overfit_diff_gqa(void) { return overfit(DA_ARCH_DIFF, 2, 1); }
static int test_overfit_softmax(void) { return overfit(DA_ARCH_SOFTMAX, 4, 4); }
static int test_overfit_nsa_gqa(void) { return overfit(DA_ARCH_NSA, 4, 2); }

int main(void) {
    RUN(test_overfit_diff);
    RUN(test_overfit_diff_gqa);
    RUN(test_overfit_softmax);
    RUN(test_overfit_nsa_gqa);
    TH_SUMMARY();
}
