/* diffattn convert: a softmax model as DIFF V1 or V2 (da_model_convert_file). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"

int cmd_convert(int argc, char **argv) {
    const char *model = NULL, *to = NULL, *recipe = NULL, *out = NULL;
    uint64_t seed = 1337;
    cli_opt opts[] = {
        {"model", OPT_STR, &model,
         "softmax model: .safetensors, a Hugging Face Llama folder or a GGUF in f32, f16 or bf16", 0},
        {"to", OPT_STR, &to, "diff (DIFF V1) or diff2 (DIFF V2)", 0},
        {"recipe", OPT_STR, &recipe,
         "preserve: each head becomes one DIFF head whose second map starts at zero and held back (lambda_hold 1), "
         "so the model computes the source's logits until trained (--lambda-ramp brings the map in); split: heads "
         "j and j + H/2 become one DIFF head (Hugging Face DiffLlama's pairing), the head norm on (diff only)",
         0},
        {"out", OPT_STR, &out, ".safetensors file to write", 0},
        {"seed", OPT_U64, &seed, "seed of the new attention parameters (lambda vectors, lambda_proj)", 0},
    };
    const char *req[] = {"model", "to", "recipe", "out", NULL};
    int rc = cli_parse("convert",
                       "Converts a trained softmax (or Llama) model into a DIFF V1 or DIFF V2 model, an ordinary "
                       "model file (docs/model.md, \"Converting a softmax model\").",
                       argc, argv, opts, 5, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_arch arch;
    if (da_arch_parse(to, &arch) || (arch != DA_ARCH_DIFF && arch != DA_ARCH_DIFF2)) {
        fprintf(stderr, "diffattn: convert: --to \"%s\" is not supported (supported: diff, diff2)\n", to);
        return 1;
    }
    da_convert_recipe r;
    if (!strcmp(recipe, "preserve")) r = DA_CONVERT_PRESERVE;
    else if (!strcmp(recipe, "split")) r = DA_CONVERT_SPLIT;
    else {
        fprintf(stderr, "diffattn: convert: --recipe \"%s\" is not supported (supported: preserve, split)\n", recipe);
        return 1;
    }
    da_status st = da_model_convert_file(model, arch, r, seed, out, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    printf("wrote %s: %s by %s from %s\n", out, to, recipe, model);
    return 0;
}
