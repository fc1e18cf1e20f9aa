/* diffattn quantize, eval ppl and bench generate: quantized models. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/clock.h"
#include "eval/ppl.h"
#include "io/gguf.h"
#include "quant/calib.h"
#include "quant/quantize.h"

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
        {"output-type", OPT_STR, &o.output_type, "type of the LM head (default: q8_0 for 4-bit types, else --type)", 0},
        {"seed", OPT_U64, &o.seed, "calibration sampling seed", 0},
    };
    const char *req[] = {"model", "type", "out", NULL};
    int rc = cli_parse("quantize",
                       "Quantizes every matmul weight of a model to ggml's Q8_0, Q4_0 or Q4_K blocks and writes a "
                       "GGUF v3 file\n(general.architecture \"diffattn\"). Norms, lambdas and the embedding stay "
                       "f32. With --calib, AWQ scales the\nweights' input channels by their activation size first, "
                       "and static int8 activation ranges are stored.",
                       argc, argv, opts, 10, req);
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
    printf("%s: %s weights (%s head), %s activations%s, %.2f MB (from %.2f MB f32)\n", out, r.weight_type,
           r.output_type, r.act, r.awq ? ", AWQ" : "", (double)r.file_bytes / 1e6, (double)r.n_params * 4 / 1e6);
    da_quantize_report_free(&r);
    return 0;
}

static long file_size(const char *path) {
    FILE *fp = fopen(path, "rb");
    long n = -1;
    if (fp && !fseek(fp, 0, SEEK_END)) n = ftell(fp);
    if (fp) fclose(fp);
    return n;
}

static int parse_run_opts(const char *act_s, const char *kv_s, const da_engine *q, da_session_opts *o) {
    *o = da_session_opts_default();
    da_act_mode act = q->act;
    if (act_s && da_act_mode_parse(act_s, &act)) {
        fprintf(stderr, "diffattn: --act: expected q8, int8-dynamic, int8-static, bf16 or f32\n");
        return 1;
    }
    if (kv_s && strcmp(kv_s, "int8") && strcmp(kv_s, "f32")) {
        fprintf(stderr, "diffattn: --kv: expected f32 or int8\n");
        return 1;
    }
    o->kv_int8 = kv_s && !strcmp(kv_s, "int8");
    /* float weights take float activations: int8 modes do not apply */
    const int wt = q->weight_type;
    if ((wt == DA_QT_F32 || wt == DA_QT_F16 || wt == DA_QT_BF16) && act <= DA_ACTQ_INT8_STATIC) act = DA_ACTQ_F32;
    o->act = act;
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
    da_engine *qe = NULL;
    da_status st = da_engine_load(&qe, model);
    if (st.code) return cli_fail(st.msg);
    const da_engine q = *qe;
    da_ppl_config pc = {ctx, chunks, da_session_opts_default(), cache, file_size(base)};
    if (parse_run_opts(act_s, kv_s, qe, &pc.run)) {
        da_engine_free(qe);
        return 1;
    }
    da_engine *be = NULL;
    da_text_data d;
    da_ppl_result r;
    if (!(st = da_engine_load(&be, base)).code) {
        if (!(st = da_text_data_load(&d, data, val_fraction, ctx ? ctx : q.cfg.max_seq_len)).code) {
            st = da_eval_ppl(qe, be, &d, &pc, &r);
            da_text_data_free(&d);
        }
        da_engine_free(be);
    }
    if (!st.code) {
        const char *wt = da_qtype_name(q.weight_type);
        if (json)
            printf("{\"model\":\"%s\",\"base\":\"%s\",\"arch\":\"%s\",\"weights\":\"%s\",\"act\":\"%s\",\"kv\":\"%s\","
                   "\"ppl\":%.6f,\"base_ppl\":%.6f,\"delta_ppl_pct\":%.4f,\"kld\":%.6f,\"same_top1\":%.6f,"
                   "\"chunks\":%ld,\"n_ctx\":%d,\"scored\":%ld}\n",
                   model, base, da_arch_name(q.cfg.arch), wt, da_act_mode_name(pc.run.act),
                   pc.run.kv_int8 ? "int8" : "f32", r.ppl, r.base_ppl, r.delta_ppl_pct, r.kld, r.same_top1, r.chunks,
                   ctx ? ctx : q.cfg.max_seq_len, r.scored);
        else
            printf("%s (%s, %s weights, %s activations, %s KV): ppl %.4f vs base %.4f (%+.3f%%), KLD %.6f, same top-1 "
                   "%.2f%% (%ld chunks, %ld tokens scored)\n",
                   model, da_arch_name(q.cfg.arch), wt, da_act_mode_name(pc.run.act), pc.run.kv_int8 ? "int8" : "f32",
                   r.ppl, r.base_ppl, r.delta_ppl_pct, r.kld, 100 * r.same_top1, r.chunks, r.scored);
    }
    da_engine_free(qe);
    return st.code ? cli_fail(st.msg) : 0;
}

/* ---------------------------------------------------------------- bench generate */

typedef struct {
    const char *path;
    da_engine *e;
    da_session_opts run;
    long file_bytes;
    double best_prompt, best_decode; /* tokens/s */
} bench_model;

static int argmax_f(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* One timed run: the prompt in one batch, then n_gen greedy decoding steps. */
static da_status bench_once(bench_model *b, const int *prompt, int n_prompt, int n_gen) {
    da_session *s = NULL;
    da_session_opts o = b->run;
    o.max_T = n_prompt + n_gen;
    o.max_batch = n_prompt;
    da_status st = da_session_create(&s, b->e, &o);
    if (st.code) return st;
    const int V = da_engine_config(b->e)->vocab_size;
    const float *lg = NULL;
    const double t0 = da_now_s();
    st = da_session_feed(s, prompt, n_prompt, 0, &lg);
    const double t1 = da_now_s();
    int tk = st.code ? 0 : argmax_f(lg, V);
    for (int i = 0; i < n_gen && !st.code; i++) {
        st = da_session_feed(s, &tk, 1, 0, &lg);
        if (!st.code) tk = argmax_f(lg, V);
    }
    const double t2 = da_now_s() - t1;
    da_session_free(s);
    if (st.code) return st;
    const double pp = n_prompt / (t1 - t0), dd = n_gen / t2;
    if (pp > b->best_prompt) b->best_prompt = pp;
    if (dd > b->best_decode) b->best_decode = dd;
    return st;
}

int cmd_bench_generate(int argc, char **argv) {
    const char *model = NULL, *also = NULL, *act_s = NULL, *kv_s = NULL;
    int n_prompt = 128, n_gen = 128, reps = 3, json = 0;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model (.safetensors runs the f32 path; .gguf the quantized one)", 0},
        {"also", OPT_STR, &also, "comma-separated further models timed in the same run, interleaved", 0},
        {"prompt", OPT_INT, &n_prompt, "prompt tokens, processed in one batch", 0},
        {"gen", OPT_INT, &n_gen, "tokens decoded one at a time (batch 1, greedy)", 0},
        {"reps", OPT_INT, &reps, "repetitions; the best of each is reported", 0},
        {"act", OPT_STR, &act_s, "activations: q8, int8-dynamic, int8-static, bf16, f32 (default: the file's; f32 for float weights)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32 (default) or int8", 0},
        {"json", OPT_FLAG, &json, "one JSON object per model", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("bench generate",
                       "Times prompt processing and batch-1 decoding. Several models (--also) are timed in one run, "
                       "interleaved,\nso their speed ratios share the machine's conditions. Threads: OMP_NUM_THREADS.",
                       argc, argv, opts, 8, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (n_prompt < 1 || n_gen < 1 || reps < 1) return cli_fail("--prompt, --gen and --reps must be positive");
    enum { MAXM = 8 };
    bench_model bm[MAXM];
    memset(bm, 0, sizeof bm);
    int nm = 0;
    char *list = also ? strdup(also) : NULL;
    bm[nm++].path = model;
    for (char *tok = list ? strtok(list, ",") : NULL; tok && nm < MAXM; tok = strtok(NULL, ",")) bm[nm++].path = tok;
    da_status st = da_ok();
    for (int i = 0; i < nm && !st.code; i++) {
        bm[i].file_bytes = file_size(bm[i].path);
        st = da_engine_load(&bm[i].e, bm[i].path);
        if (st.code) break;
        const da_config *c = da_engine_config(bm[i].e);
        if (n_prompt + n_gen > c->max_seq_len)
            st = da_errorf("%s: --prompt %d + --gen %d exceeds max_seq_len %d", bm[i].path, n_prompt, n_gen,
                           c->max_seq_len);
        if (parse_run_opts(act_s, kv_s, bm[i].e, &bm[i].run)) st = da_errorf("bad --act or --kv");
    }
    int *prompt = malloc((size_t)n_prompt * sizeof(int));
    if (!st.code && !prompt) st = da_errorf("out of memory");
    if (!st.code) {
        const int V = da_engine_config(bm[0].e)->vocab_size;
        const char *text = "The quick brown fox jumps over the lazy dog. ";
        for (int i = 0; i < n_prompt; i++) prompt[i] = (unsigned char)text[i % strlen(text)] % V;
    }
    for (int r = 0; r < reps && !st.code; r++)
        for (int i = 0; i < nm && !st.code; i++) st = bench_once(&bm[i], prompt, n_prompt, n_gen);
    double load[3] = {0};
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (fscanf(fp, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
        fclose(fp);
    }
    for (int i = 0; i < nm && !st.code; i++) {
        const char *fmt = da_engine_weight_type(bm[i].e);
        const double sp = bm[i].best_decode / bm[0].best_decode, spp = bm[i].best_prompt / bm[0].best_prompt;
        if (json)
            printf("{\"model\":\"%s\",\"weights\":\"%s\",\"path\":\"%s\",\"act\":\"%s\",\"kv\":\"%s\",\"prompt_tokens\":%d,"
                   "\"decode_tokens\":%d,\"prompt_tok_per_s\":%.2f,\"decode_tok_per_s\":%.2f,\"file_bytes\":%ld,"
                   "\"decode_speedup_vs_first\":%.3f,\"prompt_speedup_vs_first\":%.3f,\"threads\":%d,\"isa\":\"%s\","
                   "\"loadavg\":%.2f}\n",
                   bm[i].path, fmt, "engine", da_act_mode_name(bm[i].run.act), bm[i].run.kv_int8 ? "int8" : "f32",
                   n_prompt, n_gen, bm[i].best_prompt, bm[i].best_decode, bm[i].file_bytes, sp, spp,
                   omp_get_max_threads(), da_isa_name(da_qdot_isa), load[0]);
        else
            printf("%-40s %-5s prompt %8.1f tok/s  decode %7.1f tok/s (%.2fx)  %8.2f MB\n", bm[i].path, fmt,
                   bm[i].best_prompt, bm[i].best_decode, sp, (double)bm[i].file_bytes / 1e6);
    }
    if (!json && !st.code)
        printf("(%d threads, %s dots, best of %d, loadavg %.2f)\n", omp_get_max_threads(), da_isa_name(da_qdot_isa),
               reps, load[0]);
    for (int i = 0; i < nm; i++) da_engine_free(bm[i].e);
    free(prompt);
    free(list);
    return st.code ? cli_fail(st.msg) : 0;
}
