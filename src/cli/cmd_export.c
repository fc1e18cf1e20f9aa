/* diffattn export: a model as a Hugging Face folder or a GGUF file in llama.cpp's layout. */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"

static int is_folder(const char *path) {
    struct stat sb;
    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

/* "5GB", "500MB", "1.5GiB", "123456" (bytes) -> *bytes; 0 when s parses. Decimal units as Hugging Face's
 * max_shard_size reads them (KB 10^3, MB 10^6, GB 10^9), binary ones with an i (KiB, MiB, GiB). */
static int parse_byte_size(const char *s, size_t *bytes) {
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"", 1}, {"b", 1}, {"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12},
                 {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0}};
    char *end;
    if (!isdigit((unsigned char)s[0])) return -1;
    const double v = strtod(s, &end);
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].unit)) {
            const double b = floor(v * units[i].scale);
            if (!(b >= 0 && b < 9e18) || (b == 0 && v != 0)) return -1;
            *bytes = (size_t)b;
            return 0;
        }
    return -1;
}

/* The hf flags checked before the model is read: --type (default f32), --shard-size. */
static int hf_flags(const char *type, const char *shard_size, size_t *shard_bytes) {
    if (strcmp(type, "f32") && strcmp(type, "bf16") && strcmp(type, "f16")) {
        fprintf(stderr, "diffattn: export: --type \"%s\" is not one of f32 (default), bf16, f16 for --format hf "
                        "(quantized types: diffattn quantize, to GGUF)\n", type);
        return 1;
    }
    *shard_bytes = 0;
    if (shard_size && parse_byte_size(shard_size, shard_bytes)) {
        fprintf(stderr, "diffattn: export: --shard-size \"%s\" is not a size: bytes, or a number with KB, MB, GB "
                        "(powers of 10) or KiB, MiB, GiB (powers of 2), e.g. 5GB as Hugging Face's default; 0 or "
                        "no flag: one model.safetensors\n", shard_size);
        return 1;
    }
    return 0;
}

static int export_folder_to_gguf(const char *model, const char *out, const char *type) {
    da_config c;
    int tok = 0;
    char arch[64];
    da_status st = da_folder_export_gguf(model, out, type, cli_load_opts(), &c, &tok);
    if (st.code) return cli_fail(st.msg);
    if (tok == 2) cli_warn_unnamed_pre("export", out);
    da_gguf_arch_of(&c, arch, sizeof arch);
    printf("wrote %s: %s weights, architecture %s, %zu parameters, tokenizer %s\n", out, type, arch,
           da_config_param_count(&c), tok ? "in tokenizer.ggml.*" : "none (bytes: docs/formats.md)");
    return 0;
}

static int export_model(const char *model, const char *out, int gguf, const char *type, size_t shard_bytes) {
    da_model m;
    da_status st = da_model_load_any_with(&m, model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    if (!(st = da_model_take_folder_tokenizer(&m, model)).code)
        st = gguf ? da_model_export_gguf(&m, out, type) : da_model_export_hf_as(&m, out, type, shard_bytes);
    char arch[64];
    da_gguf_arch_of(&m.cfg, arch, sizeof arch);
    if (!st.code && gguf && m.tokenizer_json && !da_tokenizer_llama_pre(m.tokenizer_json, strlen(m.tokenizer_json)))
        cli_warn_unnamed_pre("export", out);
    if (!st.code && gguf)
        printf("wrote %s: %s weights, architecture %s, %zu parameters, tokenizer %s\n", out, type, arch, m.n_params,
               m.tokenizer_json ? "in tokenizer.ggml.*" : "none (bytes: docs/formats.md)");
    else if (!st.code)
        printf("wrote %s: %s (%s), %s weights, %zu parameters, tokenizer.json %s\n", out,
               da_arch_describe(m.cfg.arch).hf_class, da_arch_name(m.cfg.arch), type, m.n_params,
               m.tokenizer_json ? "written" : "none (bytes)");
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *format = NULL, *out = NULL, *type = NULL, *shard_size = NULL;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model: .safetensors, a .gguf (dequantized) or a Hugging Face folder", 0},
        {"format", OPT_STR, &format,
         "hf: a Hugging Face folder (config.json, model.safetensors or shards with their index, tokenizer.json); "
         "gguf: one GGUF file in llama.cpp's layout", 0},
        {"out", OPT_STR, &out, "hf: folder to write (created if missing; replaced in one step, its other files kept, "
                               "earlier weight files removed); gguf: the file", 0},
        {"type", OPT_STR, &type, "weights: f32, bf16 or f16 (round to nearest even); default gguf f16, hf f32 "
                                 "(quantized types: quantize)", 0},
        {"shard-size", OPT_STR, &shard_size, "hf: split the weights into model-0000i-of-0000N.safetensors of at most "
                                             "this size (5GB, 500MB, bytes) with model.safetensors.index.json, as "
                                             "save_pretrained; 0 or unset: one model.safetensors", 0},
    };
    const char *req[] = {"model", "format", "out", NULL};
    int rc = cli_parse("export",
                       "Writes a model in another format. --format hf: a folder that transformers loads as "
                       "DiffLlamaForCausalLM (arch diff), LlamaForCausalLM (softmax) or its family's class (gda: docs/formats.md), "
                       "with the same logits; --type bf16 --shard-size 5GB gives a published model's layout. "
                       "--format gguf: a softmax model as llama.cpp's \"llama\" architecture, with its tokenizer in "
                       "tokenizer.ggml.*; the other architectures under names of their own (docs/formats.md).",
                       argc, argv, opts, 5, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (strcmp(format, "hf") && strcmp(format, "gguf")) {
        fprintf(stderr, "diffattn: export: --format \"%s\" is not supported (supported: hf, gguf)\n", format);
        return 1;
    }
    const int gguf = !strcmp(format, "gguf");
    size_t shard_bytes = 0;
    if (gguf && shard_size) return cli_fail("export: --shard-size is for --format hf (a GGUF is one file)");
    if (!gguf && hf_flags(type ? type : "f32", shard_size, &shard_bytes)) return 1;
    if (!type) type = gguf ? "f16" : "f32";
    char files[4][4200];
    const char *outputs[4] = {files[0], files[1], files[2], files[3]};
    snprintf(files[0], sizeof files[0], "%s%s", out, gguf ? "" : "/config.json");
    snprintf(files[1], sizeof files[1], "%s/model.safetensors", out);
    snprintf(files[2], sizeof files[2], "%s/tokenizer.json", out);
    snprintf(files[3], sizeof files[3], "%s/model.safetensors.index.json", out);
    da_status st = da_check_outputs_not_inputs(outputs, gguf ? 1 : 4, &model, 1);
    if (st.code) return cli_fail(st.msg);
    if (gguf && is_folder(model)) return export_folder_to_gguf(model, out, type); /* one tensor at a time */
    return export_model(model, out, gguf, type, shard_bytes);
}
