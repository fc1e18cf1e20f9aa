/* diffattn bench generate: prompt and decoding speed of model files. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"
#include "diffattn/eval.h"
#include "diffattn/experiments.h"

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
    da_bench_generate_result res[MAXM];
    da_status st = da_bench_generate(paths, nm, &o, res);
    double load[3] = {0};
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fscanf(fp, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(fp);
    }
    const char *wait = getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "default";
    const double bw = !st.code && bandwidth ? da_copy_bandwidth_gbs((size_t)1 << 30) : 0; /* GB/s */
    if (bandwidth && !st.code && bw <= 0) st = da_errorf("bench generate: cannot allocate 2 GiB to measure the bandwidth");
    for (int i = 0; i < nm && !st.code; i++) {
        const double sp = res[i].best_decode / res[0].best_decode, spp = res[i].best_prompt / res[0].best_prompt;
        if (json)
            printf("{\"model\":\"%s\",\"weights\":\"%s\",\"path\":\"engine\",\"act\":\"%s\",\"kv\":\"%s\",\"prompt_tokens\":%d,"
                   "\"decode_tokens\":%d,\"prompt_tok_per_s\":%.2f,\"decode_tok_per_s\":%.2f,\"file_bytes\":%ld,"
                   "\"decode_speedup_vs_first\":%.3f,\"prompt_speedup_vs_first\":%.3f,\"threads\":%d,\"isa\":\"%s\","
                   "\"wait_policy\":\"%s\",\"loadavg\":%.2f,\"decode_bytes_per_token\":%.0f,"
                   "\"copy_bandwidth_gbs\":%.2f,\"bandwidth_fraction\":%.3f}\n",
                   paths[i], res[i].weight_type, res[i].act, res[i].kv_int8 ? "int8" : res[i].kv_f16 ? "f16" : "f32", o.prompt, o.gen,
                   res[i].best_prompt, res[i].best_decode, res[i].file_bytes, sp, spp, omp_get_max_threads(),
                   res[i].dots, wait, load[0], res[i].decode_bytes, bw,
                   bw > 0 ? res[i].best_decode * res[i].decode_bytes / 1e9 / bw : 0.0);
        else
            printf("%-40s %-5s prompt %8.1f tok/s  decode %7.1f tok/s (%.2fx)  %8.2f MB\n", paths[i],
                   res[i].weight_type, res[i].best_prompt, res[i].best_decode, sp, (double)res[i].file_bytes / 1e6);
        if (!json && bw > 0)
            printf("%-40s reads %.1f MB per decoded token: %.1f GB/s, %.2f of the copy bandwidth (%.1f GB/s)\n", "",
                   res[i].decode_bytes / 1e6, res[i].best_decode * res[i].decode_bytes / 1e9,
                   res[i].best_decode * res[i].decode_bytes / 1e9 / bw, bw);
    }
    if (!json && !st.code)
        printf("(%d threads, %s dots, best of %d, loadavg %.2f)\n", omp_get_max_threads(), res[0].dots,
               o.reps, load[0]);
    free(list);
    return st.code ? cli_fail(st.msg) : 0;
}
