/* diffattn export: a model as a Hugging Face folder or a GGUF file in llama.cpp's layout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"

static int is_folder(const char *path) {
    struct stat sb;
    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

int cmd_export(int argc, char **argv) {
    const char *model = NULL, *format = NULL, *out = NULL, *type = "f16";
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model: .safetensors, a .gguf (dequantized) or a Hugging Face folder", 0},
        {"format", OPT_STR, &format,
         "hf: a Hugging Face folder (config.json, model.safetensors, tokenizer.json); gguf: one GGUF file in "
         "llama.cpp's layout",
         0},
        {"out", OPT_STR, &out, "hf: folder to write (created if missing; replaced in one step, its other files kept); "
                               "gguf: the file", 0},
        {"type", OPT_STR, &type, "gguf: f16 (default), bf16 or f32 for every matrix (quantized types: quantize)", 0},
    };
    const char *req[] = {"model", "format", "out", NULL};
    int rc = cli_parse("export",
                       "Writes a model in another format. --format hf: a folder that transformers loads as "
                       "DiffLlamaForCausalLM (arch diff) or LlamaForCausalLM (softmax), with the same logits. "
                       "--format gguf: a softmax model as llama.cpp's \"llama\" architecture, with its tokenizer in "
                       "tokenizer.ggml.*; the other architectures under names of their own (docs/formats.md).",
                       argc, argv, opts, 4, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (strcmp(format, "hf") && strcmp(format, "gguf")) {
        fprintf(stderr, "diffattn: export: --format \"%s\" is not supported (supported: hf, gguf)\n", format);
        return 1;
    }
    const int gguf = !strcmp(format, "gguf");
    char files[3][4200];
    const char *outputs[3] = {files[0], files[1], files[2]};
    snprintf(files[0], sizeof files[0], "%s%s", out, gguf ? "" : "/config.json");
    snprintf(files[1], sizeof files[1], "%s/model.safetensors", out);
    snprintf(files[2], sizeof files[2], "%s/tokenizer.json", out);
    da_status st = da_check_outputs_not_inputs(outputs, gguf ? 1 : 3, &model, 1);
    if (st.code) return cli_fail(st.msg);
    char arch[64];
    if (gguf && is_folder(model)) { /* a folder: converted one tensor at a time */
        da_config c;
        int tok = 0;
        if ((st = da_folder_export_gguf(model, out, type, cli_load_opts(), &c, &tok)).code) return cli_fail(st.msg);
        if (tok == 2) cli_warn_unnamed_pre("export", out);
        da_gguf_arch_of(&c, arch, sizeof arch);
        printf("wrote %s: %s weights, architecture %s, %zu parameters, tokenizer %s\n", out, type, arch,
               da_config_param_count(&c), tok ? "in tokenizer.ggml.*" : "none (bytes: docs/formats.md)");
        return 0;
    }
    da_model m;
    st = da_model_load_any_with(&m, model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    if (!(st = da_model_take_folder_tokenizer(&m, model)).code) st = gguf ? da_model_export_gguf(&m, out, type) : da_model_export_hf(&m, out);
    da_gguf_arch_of(&m.cfg, arch, sizeof arch);
    if (!st.code && gguf && m.tokenizer_json && !da_tokenizer_llama_pre(m.tokenizer_json, strlen(m.tokenizer_json)))
        cli_warn_unnamed_pre("export", out);
    if (!st.code && gguf)
        printf("wrote %s: %s weights, architecture %s, %zu parameters, tokenizer %s\n", out, type, arch, m.n_params,
               m.tokenizer_json ? "in tokenizer.ggml.*" : "none (bytes: docs/formats.md)");
    else if (!st.code)
        printf("wrote %s: %s (%s), %zu parameters, tokenizer.json %s\n", out,
               da_arch_describe(m.cfg.arch).hf_class, da_arch_name(m.cfg.arch),
               m.n_params, m.tokenizer_json ? "written" : "none (bytes)");
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}
