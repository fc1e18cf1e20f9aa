/* diffattn bench generate: prompt and decoding speed of model files. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"
#include "eval/eval.h"
#include "bench/bench.h"

/* The 1-minute load average, for the record of a timing (-1 when unknown). */
static double load_average(void) {
    double load = -1;
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fscanf(fp, "%lf", &load) != 1) load = -1;
        fclose(fp);
    }
    return load;
}

static void print_result(const char *path, const da_bench_generate_result *r, const da_bench_generate_result *first,
                         double bw) {
    printf("%-40s %-5s prompt %8.1f tok/s  decode %7.1f tok/s (%.2fx)  %8.2f MB\n", path, r->weight_type,
           r->best_prompt, r->best_decode, r->best_decode / first->best_decode, (double)r->file_bytes / 1e6);
    if (bw > 0)
        printf("%-40s reads %.1f MB per decoded token: %.1f GB/s, %.2f of the copy bandwidth (%.1f GB/s)\n", "",
               r->decode_bytes / 1e6, r->best_decode * r->decode_bytes / 1e9,
               r->best_decode * r->decode_bytes / 1e9 / bw, bw);
}

/* Times paths[0..n) and prints one line (or JSON object) per model. */
static int run(const char *const *paths, int nm, const da_bench_generate_opts *o, int json, int bandwidth) {
    da_bench_generate_result res[8];
    da_status st = da_bench_generate(paths, nm, o, res);
    const double load = load_average();
    const double bw = !st.code && bandwidth ? da_copy_bandwidth_gbs((size_t)1 << 30) : 0; /* GB/s */
    if (bandwidth && !st.code && bw <= 0) st = da_errorf("bench generate: cannot allocate 2 GiB to measure the bandwidth");
    if (st.code) return cli_fail(st.msg);
    for (int i = 0; i < nm; i++) {
        if (!json) print_result(paths[i], &res[i], &res[0], bw);
        else if (cli_print_json(da_bench_generate_json(paths[i], o, &res[i], &res[0], load, bw))) return 1;
    }
    if (!json)
        printf("(%d threads, %s dots, best of %d, loadavg %.2f)\n", omp_get_max_threads(), res[0].dots, o->reps, load);
    return 0;
}

int cmd_bench_generate(int argc, char **argv) {
    const char *model = NULL, *also = NULL, *kv_s = NULL;
    int json = 0, bandwidth = 0;
    da_bench_generate_opts o = {128, 128, 3, NULL, 0, *cli_load_opts(), 0};
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model (.safetensors, or .gguf: run quantized)", 0},
        {"also", OPT_STR, &also, "comma-separated further models timed in the same run, interleaved", 0},
        {"prompt", OPT_INT, &o.prompt, "prompt tokens, processed in one batch", 0},
        {"gen", OPT_INT, &o.gen, "tokens decoded one at a time (batch 1, greedy)", 0},
        {"reps", OPT_INT, &o.reps, "repetitions; the best of each is reported", 0},
        {"act", OPT_STR, &o.act,
         "activations: q8, int8-dynamic, int8-static, bf16, f32 (default: the file's; f32 for float weights)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32 (default), f16 (llama.cpp's default) or int8", 0},
        {"json", OPT_FLAG, &json, "one JSON object per model", 0},
        {"bandwidth", OPT_FLAG, &bandwidth,
         "also measure the copy bandwidth (memcpy between two 1 GiB buffers, after the timing, the models freed: peak RSS is at least 2 GiB) and give decoding as a fraction of its bound", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("bench generate",
                       "Times prompt processing and batch-1 decoding. Several models (--also) are timed in one run, "
                       "interleaved,\nso their speed ratios share the machine's conditions. Threads: --threads or "
                       "OMP_NUM_THREADS.",
                       argc, argv, opts, 9, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (kv_s && strcmp(kv_s, "int8") && strcmp(kv_s, "f32") && strcmp(kv_s, "f16"))
        return cli_fail("--kv: expected f32, f16 or int8");
    o.kv_int8 = kv_s && !strcmp(kv_s, "int8");
    o.kv_f16 = kv_s && !strcmp(kv_s, "f16");
    enum { MAXM = 8 };
    const char *paths[MAXM] = {model};
    int nm = 1;
    char *list = also ? strdup(also) : NULL;
    for (char *tok = list ? strtok(list, ",") : NULL; tok && nm < MAXM; tok = strtok(NULL, ",")) paths[nm++] = tok;
    rc = run(paths, nm, &o, json, bandwidth);
    free(list);
    return rc;
}
