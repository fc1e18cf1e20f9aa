/* diffattn info: a model's configuration, size and weight types, or the CPU's kernels. */
#include <stdio.h>
#include <string.h>

#include "args.h"
#include "commands.h"

/* The CPU's features and the code each kernel family runs on it. */
static int print_system(void) {
    const char *name[32], *family[32], *path[32];
    int present[32];
    const int nf = da_cpu_features(name, present, 32);
    printf("cpu features  ");
    for (int i = 0; i < nf; i++) printf(" %s%s", present[i] ? "" : "-", name[i]);
    printf("   (-: missing)\n");
    const da_exec x = da_exec_default();
    printf("best level     %s%s\n", da_isa_name(da_isa_detect()),
           x.isa != da_isa_detect() ? "" : "   (DIFFATTN_ISA=scalar|avx2|avx512|avx512-vnni lowers it)");
    if (x.isa != da_isa_detect()) printf("in use         %s (DIFFATTN_ISA)\n", da_isa_name(x.isa));
    const int nk = da_kernel_paths(x.isa, family, path, 32);
    for (int i = 0; i < nk; i++) printf("  %-36s %s\n", family[i], path[i]);
    return 0;
}

/* The matmul weight type, and every tensor whose type differs from it
 * (f32 vectors and embedding aside): a quantized file says what it holds. */
static void print_weight_types(const da_engine *e) {
    const char *wt = da_engine_weight_type(e);
    printf("weights        %s, %.2f MB\n", wt, (double)da_engine_weight_bytes(e) / 1e6);
    for (int i = 1; i < da_engine_n_tensors(e); i++) {
        const char *name, *type;
        int rows, cols;
        da_engine_tensor(e, i, &name, &type, &rows, &cols);
        if (cols && strcmp(type, wt)) printf("               %s: %s [%d, %d]\n", name, type, rows, cols);
    }
    if (!da_engine_config(e)->tie_embeddings) return;
    const char *last, *type, *embed_type;
    da_engine_tensor(e, da_engine_n_tensors(e) - 1, &last, &type, NULL, NULL);
    da_engine_tensor(e, 0, NULL, &embed_type, NULL, NULL);
    if (!strcmp(last, "output.weight")) printf("lm head        %s, a copy of the tied embedding\n", type);
    else printf("lm head        %s, the tied embedding itself\n", embed_type);
}

/* Every field of the configuration table (those that are off unless set,
 * only when set). */
static void print_config(const da_config *c, const da_arch_info *info) {
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *f = &da_config_fields[i];
        char v[64], note[96] = "";
        if (!strcmp(f->key, "head_norm")) { /* always, resolved against the variant's default */
            printf("%-14s %s%s\n", f->key, da_config_head_norm(c) ? "on" : "off",
                   c->head_norm == DA_HEAD_NORM_DEFAULT ? " (the variant's default)" : "");
            continue;
        }
        if (!strcmp(f->key, "head_dim")) { /* always, the size in use */
            printf("%-14s %d%s%s\n", f->key, da_head_dim(c), info->head_dim_note,
                   c->head_dim > 0 ? "" : " (the variant's default)");
            continue;
        }
        if (!strcmp(f->key, "lambda_init") && info->per_layer_lambda) {
            da_field_format(f, c, v, sizeof v);
            /* the schedule's depth is the layer (DIFF) or one less (GDA) */
            const char *schedule = da_config_lambda_init(c, 1) == da_lambda_init(1) ? " (0.8 - 0.6 exp(-0.3 layer))"
                                                                                   : " (0.8 - 0.6 exp(-0.3 (layer - 1)))";
            printf("%-14s %s%s\n", f->key, v, c->lambda_init > 0.0f ? " (every layer)" : schedule);
            continue;
        }
        if (!da_config_field_written(c, i)) continue;
        da_field_format(f, c, v, sizeof v);
        if (!strcmp(f->key, "n_heads")) snprintf(note, sizeof note, "%s", info->heads_note);
        if (!strcmp(f->key, "window")) snprintf(note, sizeof note, " (each token sees the last %d keys)", c->window);
        printf("%-14s %s%s\n", f->key, v, note);
    }
}

/* The parameters a variant adds against the baseline with the same heads. */
static void print_extra_params(const da_model *m, const da_arch_info *info) {
    da_config base = m->cfg;
    base.head_norm = DA_HEAD_NORM_DEFAULT;
    base.lambda_init = 0.0f;
    for (int a = 0; a < DA_ARCH_N; a++)
        if (da_arch_describe((da_arch)a).baseline) base.arch = (da_arch)a;
    da_model b;
    if (!da_model_create_table(&b, &base).code) {
        const size_t extra = m->n_params - b.n_params;
        printf("               %zu (%.1f%%) more than %s with the same heads: %s\n", extra,
               100.0 * (double)extra / (double)(m->n_params - extra), da_arch_describe(base.arch).name,
               info->extra_params_note);
        da_model_free(&b);
    }
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    int system = 0;
    cli_opt opts[] = {{"model", OPT_STR, &path, "model: .safetensors, a .gguf from quantize, or a Hugging Face folder", 0},
                      {"system", OPT_FLAG, &system, "show the CPU's features and the kernels chosen for it instead", 0}};
    int rc = cli_parse("info", "Shows a model's configuration, parameter count and lambda per layer.", argc, argv,
                       opts, 2, NULL);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (system) return print_system();
    if (!path) return cli_fail("info: --model is required (or --system)");
    da_model m;
    da_status st = da_model_load_any_with(&m, path, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    const da_config *c = &m.cfg;
    const da_arch_info info = da_arch_describe(c->arch);
    printf("%-14s %s\n", "model", path);
    printf("%-14s %s\n", "format", da_model_format(path));
    print_config(c, &info);
    printf("parameters     %zu (%.2f M)\n", m.n_params, (double)m.n_params / 1e6);
    if (info.extra_params_note[0]) print_extra_params(&m, &info);
    const double kv = da_kv_cache_bytes(c, c->max_seq_len);
    printf("kv cache       %.0f bytes per token per layer at max_seq_len (f32), %.2f MB in all\n",
           kv / c->max_seq_len, kv * c->n_layers / 1e6);
    char folder_tok[4200];
    if (da_model_tokenizer_path(path, folder_tok, sizeof folder_tok)) /* what sample and serve use, as they do */
        printf("tokenizer      %s (the folder's)\n", folder_tok);
    else printf("tokenizer      %s\n", m.tokenizer_json ? "embedded (tokenizer.json)" : "none (bytes)");
    if (info.per_layer_lambda) {
        printf("lambda         layer  lambda_init  lambda\n");
        for (int l = 0; l < c->n_layers; l++)
            printf("               %5d  %11.4f  %.4f\n", l, (double)da_config_lambda_init(c, l),
                   (double)da_model_lambda(&m, l));
    }
    da_model_free(&m);
    da_engine *e = NULL;
    if ((st = da_engine_load_with(&e, path, cli_load_opts())).code) return cli_fail(st.msg);
    print_weight_types(e);
    da_engine_free(e);
    return 0;
}
