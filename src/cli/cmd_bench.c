/* diffattn bench train | attn: throughput and MFU against the same run's sgemm peak. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "bench/bench.h"

/* The phases' mean ms per step, largest first, and what no probe covers. */
static void print_profile(const da_bench_result *r, const double *prof_s) {
    int order[DA_PROF_N];
    double total = 0;
    for (int p = 0; p < DA_PROF_N; p++) order[p] = p, total += prof_s[p];
    for (int i = 1; i < DA_PROF_N; i++) /* insertion sort, descending */
        for (int j = i; j > 0 && prof_s[order[j]] > prof_s[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    /* Phases are summed over every timed step, the step time is its mean here. */
    const double mean_step_ms = r->ms_mean;
    printf("  time per step by phase (mean over %d steps, %.1f ms):\n", r->steps, mean_step_ms);
    for (int i = 0; i < DA_PROF_N; i++) {
        double ms = prof_s[order[i]] * 1e3 / r->steps;
        printf("    %-20s %9.2f ms  %5.1f%%\n", da_prof_name(order[i]), ms, 100 * ms / mean_step_ms);
    }
    double other = mean_step_ms - total * 1e3 / r->steps;
    printf("    %-20s %9.2f ms  %5.1f%%\n", "(not covered)", other, 100 * other / mean_step_ms);
}

/* The context of --isa and --bf16; prints the error and returns 1 when the CPU cannot run it. */
static int bench_exec(const char *isa_name, int bf16, da_exec *x) {
    *x = da_exec_default();
    if (isa_name) {
        if (da_isa_parse(isa_name, &x->isa))
            return cli_fail("--isa: expected scalar, avx2, avx512, avx512-vnni or avx512-bf16");
        if (!da_isa_supported(x->isa)) {
            fprintf(stderr, "diffattn: --isa: this CPU cannot run the %s kernels (its best: %s)\n", isa_name,
                    da_isa_name(da_isa_detect()));
            return 1;
        }
    }
    if (bf16 && x->isa < DA_ISA_AVX512_BF16) {
        fprintf(stderr, "diffattn: --bf16: the bf16 matmuls need AVX512-BF16; the kernels here are %s\n",
                da_isa_name(x->isa));
        return 1;
    }
    x->bf16_matmul = bf16;
    return 0;
}

static void print_bench(const char *cmd, const char *kernel, const da_config *cfg, int batch, int seq,
                        const da_exec *x, const da_bench_result *r) {
    printf("%s %s (%s kernel, %s), dim %d, %d layers, %d heads, batch %d x %d\n", cmd, da_arch_name(cfg->arch),
           kernel, da_isa_name(x->isa), cfg->dim, cfg->n_layers, cfg->n_heads, batch, seq);
    printf("  %.1f tokens/s   %.2f ms/step (best of %d; median %.2f)\n", r->tok_per_s, r->ms_min, r->steps,
           r->ms_median);
    printf("  %.1f GFLOP/s   sgemm peak %.1f GFLOP/s", r->gflops, r->peak_gflops);
    if (x->bf16_matmul) printf("   bf16 peak %.1f GFLOP/s", r->peak_bf16_gflops);
    printf("   MFU %.3f%s   peak RSS %.0f MB\n", r->mfu, x->bf16_matmul ? " (of the bf16 peak)" : "", r->peak_rss_mb);
    if (x->prof_s) print_profile(r, x->prof_s);
}

/* The flags of bench train and bench attn beside the model's. */
typedef struct {
    int batch, steps, warmup, json, bf16, profile;
    const char *kernel, *isa;
} bench_flags;

enum { N_BENCH_OPTS = 8 };
static void bench_opts(bench_flags *f, cli_opt *o) {
    cli_opt b[N_BENCH_OPTS] = {
        {"batch", OPT_INT, &f->batch, "sequences per step (of --seq tokens)", 0},
        {"steps", OPT_INT, &f->steps, "timed steps (the best and the median are reported)", 0},
        {"warmup-steps", OPT_INT, &f->warmup, "untimed steps first", 0},
        {"kernel", OPT_STR, &f->kernel, "attention kernel: flash or reference", 0},
        {"json", OPT_FLAG, &f->json, "print one JSON object", 0},
        {"bf16", OPT_FLAG, &f->bf16, "bf16 inputs, fp32 accumulation for the large matmuls (AVX512-BF16 CPUs)", 0},
        {"profile", OPT_FLAG, &f->profile, "train only: also report the mean time per step of each phase", 0},
        {"isa", OPT_STR, &f->isa, "kernel level: scalar, avx2, avx512, avx512-vnni or avx512-bf16 "
                                  "(default: the best this CPU runs)", 0},
    };
    memcpy(o, b, sizeof b);
}

/* bench train (is_train) or bench attn; argv[0] is the subcommand. */
static int bench_steps(int argc, char **argv, int is_train) {
    cli_model_flags mf;
    cli_model_flags_default(&mf);
    bench_flags f = {8, 5, 1, 0, 0, 0, "flash", NULL};
    cli_opt opts[CLI_N_MODEL_OPTS + N_BENCH_OPTS];
    cli_model_opts(&mf, opts);
    bench_opts(&f, opts + CLI_N_MODEL_OPTS);
    const int n = CLI_N_MODEL_OPTS + N_BENCH_OPTS;
    char cmd[32];
    snprintf(cmd, sizeof cmd, "bench %s", argv[0]);
    int rc = cli_parse(cmd,
                       is_train ? "Times whole training steps (forward, backward, AdamW) on random tokens and reports "
                                  "tokens/s, GFLOP/s and MFU\nagainst the sgemm peak measured in the same run. "
                                  "Threads: OMP_NUM_THREADS."
                                : "Times one layer's attention (forward + backward) on random q, k, v.",
                       argc, argv, opts, n, NULL);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_attn_kernel k;
    if (!strcmp(f.kernel, "flash")) k = DA_ATTN_FLASH;
    else if (!strcmp(f.kernel, "reference")) k = DA_ATTN_REFERENCE;
    else return cli_fail("--kernel: expected flash or reference");
    if (f.batch <= 0) return cli_fail("--batch must be positive");
    da_config cfg;
    da_status st = cli_model_config(&mf, opts, n, &cfg);
    if (st.code) return cli_fail(st.msg);
    da_exec x;
    if (bench_exec(f.isa, f.bf16, &x)) return 1;
    if (f.profile && !is_train) return cli_fail("--profile: only 'bench train' has phases to profile");
    double prof_s[DA_PROF_N] = {0};
    x.prof_s = f.profile ? prof_s : NULL;
    da_bench_result r;
    st = is_train ? da_bench_train(&cfg, f.batch, mf.seq, f.warmup, f.steps, k, &x, &r)
                  : da_bench_attn(&cfg, f.batch, mf.seq, f.warmup, f.steps, k, &x, &r);
    if (st.code) return cli_fail(st.msg);
    if (f.json) return cli_print_json(da_bench_json(argv[0], f.kernel, &cfg, f.batch, mf.seq, &x, &r));
    print_bench(cmd, f.kernel, &cfg, f.batch, mf.seq, &x, &r);
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "generate")) return cmd_bench_generate(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "train") || !strcmp(argv[1], "attn")))
        return bench_steps(argc - 1, argv + 1, !strcmp(argv[1], "train"));
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: diffattn bench train|attn|generate [flags]\n\n"
               "  train  a whole training step: forward, backward, AdamW\n"
               "  attn   the attention kernel of one layer, forward + backward\n"
               "  generate  prompt processing and batch-1 decoding of a model file (f32 or GGUF)\n\n"
               "Run 'diffattn bench train --help' for the flags.\n");
        return 0;
    }
    fprintf(stderr, "diffattn bench: expected 'train' or 'attn', or 'generate' (see diffattn bench --help)\n");
    return 1;
}
