/* The FLOP counts behind bench's GFLOP/s and MFU: attention's share follows
 * the keys each query really sees, so a sliding window is not credited with
 * full causal attention. And the bytes a decoding step reads, behind the
 * bandwidth fraction of bench generate. */
#include "diffattn.h"
#include "bench/bench.h"
#include "harness.h"

static da_config bench_config(da_arch arch, int window) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.window = window;
    return c;
}

static int test_window_flops_follow_keys_seen(void) {
    const int T = 4096, W = 512;
    da_arch archs[3] = {DA_ARCH_DIFF, DA_ARCH_DIFF2, DA_ARCH_SOFTMAX};
    for (int i = 0; i < 3; i++) {
        da_config full = bench_config(archs[i], 0), win = bench_config(archs[i], W);
        double keys_full = (T + 1) / 2.0;
        double keys_win = (W * (W + 1) / 2.0 + (double)(T - W) * W) / T; /* mean of min(t, W) */
        double ratio = da_attn_flops_per_token(&win, T) / da_attn_flops_per_token(&full, T);
        CHECK(fabs(ratio - keys_win / keys_full) < 1e-12);
        /* a window as long as the sequence is full attention */
        da_config wide = bench_config(archs[i], T);
        CHECK(da_attn_flops_per_token(&wide, T) == da_attn_flops_per_token(&full, T));
        CHECK(da_train_flops_per_token(&win, T) < da_train_flops_per_token(&full, T));
    }
    /* one key per query at W = 1 */
    da_config one = bench_config(DA_ARCH_SOFTMAX, 1), full = bench_config(DA_ARCH_SOFTMAX, 0);
    CHECK(fabs(da_attn_flops_per_token(&one, T) * (T + 1) / 2.0 - da_attn_flops_per_token(&full, T)) < 1e-6);
    return 0;
}

/* f32 weights: every parameter but the embedding table's other rows, plus
 * K and V of every position seen, in every layer. */
static int test_decode_bytes(void) {
    for (int tied = 0; tied < 2; tied++) {
        da_config c = bench_config(DA_ARCH_SOFTMAX, 0);
        c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_hidden = 128, c.max_seq_len = 64;
        c.tie_embeddings = tied;
        da_model m;
        CHECK(!da_model_create(&m, &c).code);
        da_engine *e;
        CHECK(!da_engine_from_model(&e, &m).code);
        const double V = c.vocab_size, C = c.dim, Ckv = C / 2, params = (double)m.n_params;
        /* tied: the embedding is the head and is read whole */
        const double weights = tied ? 4 * params : 4 * (params - V * C + C);
        CHECK(da_engine_decode_bytes(e, 10, 0, 0) == weights + 2 * 10 * 2 * 4 * Ckv);
        CHECK(da_engine_decode_bytes(e, 0, 0, 0) == weights);
        /* int8 cache: one byte a value and a float scale per 32 (head_dim 16: per 16) */
        CHECK(da_engine_decode_bytes(e, 10, 1, 0) == weights + 2 * 10 * 2 * (Ckv + 4 * Ckv / 16));
        /* f16 cache: two bytes a value */
        CHECK(da_engine_decode_bytes(e, 10, 0, 1) == weights + 2 * 10 * 2 * 2 * Ckv);
        da_engine_free(e);
        da_model_free(&m);
    }
    /* a window bounds the keys read */
    da_config w = bench_config(DA_ARCH_DIFF2, 8);
    w.dim = 64, w.n_layers = 1, w.n_heads = 4, w.n_kv_heads = 4, w.ffn_hidden = 128, w.max_seq_len = 64;
    da_model m;
    CHECK(!da_model_create(&m, &w).code);
    da_engine *e;
    CHECK(!da_engine_from_model(&e, &m).code);
    CHECK(da_engine_decode_bytes(e, 50, 0, 0) == da_engine_decode_bytes(e, 8, 0, 0));
    CHECK(da_engine_decode_bytes(e, 7, 0, 0) < da_engine_decode_bytes(e, 8, 0, 0));
    da_engine_free(e);
    da_model_free(&m);
    return 0;
}

/* NSA's attention grows as T (T/s + n l' + w), not T^2: per token, its FLOPs
 * at 16k are under half softmax's at the same heads (issue 20's shape), and
 * from 8k to 16k they grow by much less than softmax's doubling; a decoding
 * step reads its branches' keys, not the whole cache. */
static int test_nsa_flops_sublinear(void) {
    da_config n = bench_config(DA_ARCH_NSA, 0), s = bench_config(DA_ARCH_SOFTMAX, 0);
    n.dim = s.dim = 768, n.n_heads = s.n_heads = 12, n.n_kv_heads = s.n_kv_heads = 4;
    n.max_seq_len = s.max_seq_len = 16384;
    const double n16 = da_attn_flops_per_token(&n, 16384), s16 = da_attn_flops_per_token(&s, 16384);
    const double n8 = da_attn_flops_per_token(&n, 8192), s8 = da_attn_flops_per_token(&s, 8192);
    printf("     attention flops per token at 16k: nsa %.3g, softmax %.3g; growth 8k -> 16k: %.2f, %.2f\n", n16, s16,
           n16 / n8, s16 / s8);
    CHECK(n16 < 0.5 * s16 && n16 / n8 < 1.3 && s16 / s8 > 1.9);
    n.dim = 64, n.n_layers = 1, n.n_heads = 4, n.n_kv_heads = 2, n.ffn_hidden = 128, n.max_seq_len = 4096;
    da_model m;
    CHECK(!da_model_create(&m, &n).code);
    da_engine *e;
    CHECK(!da_engine_from_model(&e, &m).code);
    /* past the window and n l' = 1024 chosen tokens, only the compressed blocks add: 8 Ckv bytes per s tokens */
    const double grow = da_engine_decode_bytes(e, 4000, 0, 0) - da_engine_decode_bytes(e, 2000, 0, 0);
    CHECK(fabs(grow - 8.0 * 32 * (2000 / 16)) < 8.0 * 32 * 2);
    da_engine_free(e);
    da_model_free(&m);
    return 0;
}

int main(void) {
    RUN(test_window_flops_follow_keys_seen);
    RUN(test_nsa_flops_sublinear);
    RUN(test_decode_bytes);
    TH_SUMMARY();
}
