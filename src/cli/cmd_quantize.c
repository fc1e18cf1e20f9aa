/* diffattn quantize, eval ppl and bench generate: quantized models. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"
#include "diffattn/eval.h"
#include "diffattn/experiments.h"

int cmd_quantize(int argc, char **argv) {
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    const char *model = NULL, *out = NULL;
    int no_awq = 0;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "full-precision model (.safetensors)", 0},
        {"type", OPT_STR, &o.type, "weight type of every matmul: q8_0, q4_0, q4_k (or f16, bf16, f32)", 0},
        {"out", OPT_STR, &out, "GGUF file to write", 0},
        {"calib", OPT_STR, &o.calib_data, "calibration text (its train split): AWQ scaling and static int8 ranges", 0},
        {"calib-samples", OPT_INT, &o.calib_samples, "calibration sequences", 0},
        {"calib-seq", OPT_INT, &o.calib_seq, "tokens per calibration sequence (0 = the model's max_seq_len)", 0},
        {"no-awq", OPT_FLAG, &no_awq, "with --calib: only the int8 ranges, no AWQ scaling", 0},
        {"act", OPT_STR, &o.act,
         "default activations when run: q8 (per-32 int8, the default), int8-dynamic (per token), int8-static "
         "(per tensor, needs --calib), bf16, f32",
         0},
        {"output-type", OPT_STR, &o.output_type, "type of the LM head (default: q8_0 for 4-bit types, else --type); a tied model stores its one embedding table in this type", 0},
        {"fallback", OPT_STR, &o.fallback,
         "q8_0: a matmul whose width is not a multiple of the type's block (q4_k: 256) gets q8_0; default: an error",
         0},
        {"seed", OPT_U64, &o.seed, "calibration sampling seed", 0},
    };
    const char *req[] = {"model", "type", "out", NULL};
    int rc = cli_parse("quantize",
                       "Quantizes every matmul weight of a model to ggml's Q8_0, Q4_0 or Q4_K blocks and writes a "
                       "GGUF v3 file\nin llama.cpp's layout (a softmax model is llama.cpp's \"llama\"; docs/formats.md). The "
                       "embedding takes the type too,\nas in llama.cpp (tied: the head's type); norms and lambdas "
                       "stay f32. With --calib, AWQ scales the\nweights' input channels by their activation size first, "
                       "and static int8 activation ranges are stored.",
                       argc, argv, opts, 11, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    o.awq = !no_awq;
    da_quantize_report r;
    da_status st = da_quantize_file(model, out, &o, &r);
    if (st.code) return cli_fail(st.msg);
    if (r.few_calib_samples)
        fprintf(stderr, "diffattn quantize: warning: %d calibration sequences; static int8 ranges settle only by about "
                        "16 (measured), below that they depend on which sequences were drawn\n",
                o.calib_samples);
    if (r.awq) {
        fprintf(stderr, "AWQ (%d sequences, %.1fs): alpha per layer [attn-in ffn-in ffn-gate]:", o.calib_samples,
                r.awq_seconds);
        for (int l = 0; l < r.n_layers; l++)
            fprintf(stderr, " [%.1f %.1f %.1f]", r.alpha[4 * l], r.alpha[4 * l + 2], r.alpha[4 * l + 3]);
        fprintf(stderr, ", head %.1f\n", r.alpha[4 * r.n_layers]);
    }
    if (r.has_ranges) {
        static const char *site_names[4] = {"attn-in", "attn-out", "ffn-in", "ffn-gate"};
        fprintf(stderr, "static int8 ranges (max |x| over layers; max / mean |x|):");
        for (int k = 0; k < 4; k++) fprintf(stderr, " %s %.2f (%.0fx)", site_names[k], r.range_max[k], r.range_ratio[k]);
        fprintf(stderr, ", head %.2f\n", r.head_range);
    }
    char fell[64] = "";
    if (r.n_fallback)
        snprintf(fell, sizeof fell, ", %d matmul%s q8_0 by --fallback", r.n_fallback, r.n_fallback > 1 ? "s" : "");
    printf("%s: %s weights%s (%s head), %s activations%s, %.2f MB (from %.2f MB f32)\n", out, r.weight_type, fell,
           r.output_type, r.act, r.awq ? ", AWQ" : "", (double)r.file_bytes / 1e6, (double)r.n_params * 4 / 1e6);
    da_quantize_report_free(&r);
    return 0;
}

/* --act and --kv into session options (act -1: the file's own). */
static int parse_run_opts(const char *act_s, const char *kv_s, da_session_opts *o) {
    *o = da_session_opts_default();
    da_act_mode act;
    if (act_s && da_act_mode_parse(act_s, &act)) {
        fprintf(stderr, "diffattn: --act: expected q8, int8-dynamic, int8-static, bf16 or f32\n");
        return 1;
    }
    if (act_s) o->act = act;
    if (kv_s && strcmp(kv_s, "int8") && strcmp(kv_s, "f32")) {
        fprintf(stderr, "diffattn: --kv: expected f32 or int8\n");
        return 1;
    }
    o->kv_int8 = kv_s && !strcmp(kv_s, "int8");
    return 0;
}

int cmd_eval_ppl(int argc, char **argv) {
    const char *model = NULL, *base = NULL, *data = NULL, *act_s = NULL, *kv_s = NULL, *cache = NULL;
    int ctx = 0, json = 0;
    long chunks = 100;
    float val_fraction = 0.1f;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "quantized model (.gguf; a .safetensors runs in f32 through the same code)", 0},
        {"base", OPT_STR, &base, "the full-precision model it came from (.safetensors)", 0},
        {"data", OPT_STR, &data, "text file or folder, or token shards (the validation split is used)", 0},
        {"ctx", OPT_INT, &ctx, "chunk length n_ctx (0 = the model's max_seq_len)", 0},
        {"chunks", OPT_LONG, &chunks, "chunks to score (0 = the whole validation split)", 0},
        {"act", OPT_STR, &act_s, "activations: q8, int8-dynamic, int8-static, bf16, f32 (default: the file's)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32 (default) or int8", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"base-cache", OPT_STR, &cache,
         "file caching the base model's logits across runs (recomputed when n_ctx, chunks or the base differ)", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", "base", "data", NULL};
    int rc = cli_parse("eval ppl",
                       "Perplexity of a quantized model and of its full-precision base, llama.cpp's protocol: "
                       "non-overlapping chunks of\nn_ctx validation tokens, the second half of each scored; with the "
                       "mean KL divergence KL(base || quantized)\nand the share of tokens whose top-1 prediction "
                       "agrees.",
                       argc, argv, opts, 10, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (chunks < 0) return cli_fail("--chunks must be >= 0");
    da_ppl_config pc = {ctx, chunks, da_session_opts_default(), cache, 0};
    if (parse_run_opts(act_s, kv_s, &pc.run)) return 1;
    da_engine *qe = NULL, *be = NULL;
    da_text_data d;
    da_ppl_result r;
    da_status st = da_engine_load(&qe, model);
    if (!st.code && !(st = da_engine_load(&be, base)).code) pc.base_file_bytes = (long)da_engine_file_bytes(be);
    const da_config *c = qe ? da_engine_config(qe) : NULL;
    /* text through the model's tokenizer; any other vocabulary is an error */
    if (!st.code && !(st = da_text_data_load_tok(&d, data, val_fraction, ctx ? ctx : c->max_seq_len,
                                                 da_engine_tokenizer(qe)))
                         .code) {
        if (!(st = da_text_data_check_vocab(&d, data, c->vocab_size)).code) st = da_eval_ppl(qe, be, &d, &pc, &r);
        da_text_data_free(&d);
    }
    if (!st.code) {
        const char *wt = da_engine_weight_type(qe), *act = da_act_mode_name(r.act);
        if (json)
            printf("{\"model\":\"%s\",\"base\":\"%s\",\"arch\":\"%s\",\"weights\":\"%s\",\"act\":\"%s\",\"kv\":\"%s\","
                   "\"ppl\":%.6f,\"base_ppl\":%.6f,\"delta_ppl_pct\":%.4f,\"kld\":%.6f,\"same_top1\":%.6f,"
                   "\"chunks\":%ld,\"n_ctx\":%d,\"scored\":%ld}\n",
                   model, base, da_arch_name(c->arch), wt, act, pc.run.kv_int8 ? "int8" : "f32", r.ppl, r.base_ppl,
                   r.delta_ppl_pct, r.kld, r.same_top1, r.chunks, ctx ? ctx : c->max_seq_len, r.scored);
        else
            printf("%s (%s, %s weights, %s activations, %s KV): ppl %.4f vs base %.4f (%+.3f%%), KLD %.6f, same top-1 "
                   "%.2f%% (%ld chunks, %ld tokens scored)\n",
                   model, da_arch_name(c->arch), wt, act, pc.run.kv_int8 ? "int8" : "f32", r.ppl, r.base_ppl,
                   r.delta_ppl_pct, r.kld, 100 * r.same_top1, r.chunks, r.scored);
    }
    da_engine_free(be);
    da_engine_free(qe);
    return st.code ? cli_fail(st.msg) : 0;
}

/* ---------------------------------------------------------------- bench generate */

int cmd_bench_generate(int argc, char **argv) {
    const char *model = NULL, *also = NULL, *kv_s = NULL;
    int json = 0, bandwidth = 0;
    da_bench_generate_opts o = {128, 128, 3, NULL, 0};
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model (.safetensors, or .gguf: run quantized)", 0},
        {"also", OPT_STR, &also, "comma-separated further models timed in the same run, interleaved", 0},
        {"prompt", OPT_INT, &o.prompt, "prompt tokens, processed in one batch", 0},
        {"gen", OPT_INT, &o.gen, "tokens decoded one at a time (batch 1, greedy)", 0},
        {"reps", OPT_INT, &o.reps, "repetitions; the best of each is reported", 0},
        {"act", OPT_STR, &o.act,
         "activations: q8, int8-dynamic, int8-static, bf16, f32 (default: the file's; f32 for float weights)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32 (default) or int8", 0},
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
    if (kv_s && strcmp(kv_s, "int8") && strcmp(kv_s, "f32")) return cli_fail("--kv: expected f32 or int8");
    o.kv_int8 = kv_s && !strcmp(kv_s, "int8");
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
                   paths[i], res[i].weight_type, res[i].act, res[i].kv_int8 ? "int8" : "f32", o.prompt, o.gen,
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
