/* The FLOP counts behind bench's GFLOP/s and MFU: attention's share follows
 * the keys each query really sees, so a sliding window is not credited with
 * full causal attention. */
#include "diffattn.h"
#include "experiments/bench.h"
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

int main(void) {
    RUN(test_window_flops_follow_keys_seen);
    TH_SUMMARY();
}
