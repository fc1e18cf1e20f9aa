/* diffattn quantize: a model file to GGUF block types. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"

/* What calibration found, on standard error: AWQ's scales and the static int8 ranges. */
static void print_calibration(const da_quantize_opts *o, const da_quantize_report *r) {
    if (r->few_calib_samples)
        fprintf(stderr, "diffattn quantize: warning: %d calibration sequences; static int8 ranges settle only by about "
                        "16 (measured), below that they depend on which sequences were drawn\n",
                o->calib_samples);
    if (r->awq) {
        fprintf(stderr, "AWQ (%d sequences, %.1fs): alpha per layer [attn-in ffn-in ffn-gate]:", o->calib_samples,
                r->awq_seconds);
        for (int l = 0; l < r->n_layers; l++)
            fprintf(stderr, " [%.1f %.1f %.1f]", r->alpha[4 * l], r->alpha[4 * l + 2], r->alpha[4 * l + 3]);
        fprintf(stderr, ", head %.1f\n", r->alpha[4 * r->n_layers]);
    }
    if (r->has_ranges) {
        static const char *site_names[4] = {"attn-in", "attn-out", "ffn-in", "ffn-gate"};
        fprintf(stderr, "static int8 ranges (max |x| over layers; max / mean |x|):");
        for (int k = 0; k < 4; k++) fprintf(stderr, " %s %.2f (%.0fx)", site_names[k], r->range_max[k], r->range_ratio[k]);
        fprintf(stderr, ", head %.2f\n", r->head_range);
    }
}

int cmd_quantize(int argc, char **argv) {
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    o.load = *cli_load_opts();
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
        {"output-type", OPT_STR, &o.output_type, "type of the LM head: q6_k, q8_0, ... (default: q6_k for 4-bit types, as llama.cpp, q8_0 where dim is off its 256 block; else --type); a tied model stores its one embedding table in this type", 0},
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
    if (r.tokenizer_unnamed) cli_warn_unnamed_pre("quantize", out);
    print_calibration(&o, &r);
    char fell[64] = "";
    if (r.n_fallback)
        snprintf(fell, sizeof fell, ", %d matmul%s q8_0 by --fallback", r.n_fallback, r.n_fallback > 1 ? "s" : "");
    printf("%s: %s weights%s (%s head), %s activations%s, %.2f MB (from %.2f MB f32)\n", out, r.weight_type, fell,
           r.output_type, r.act, r.awq ? ", AWQ" : "", (double)r.file_bytes / 1e6, (double)r.n_params * 4 / 1e6);
    da_quantize_report_free(&r);
    return 0;
}
