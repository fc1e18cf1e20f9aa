/* diffattn init and diffattn info. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"

int cmd_init(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_default(&mf);
    const char *out = NULL;
    uint64_t seed = 1337;
    cli_opt opts[CLI_N_MODEL_OPTS + 2];
    cli_model_opts(&mf, opts);
    opts[CLI_N_MODEL_OPTS] = (cli_opt){"out", OPT_STR, &out, "model file to write (.safetensors)", 0};
    opts[CLI_N_MODEL_OPTS + 1] = (cli_opt){"seed", OPT_U64, &seed, "initialisation seed", 0};
    const int n = CLI_N_MODEL_OPTS + 2;
    const char *req[] = {"out", NULL};
    int rc = cli_parse("init", "Writes a freshly initialised model (initialisation described in docs/model.md).", argc,
                       argv, opts, n, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_config cfg;
    da_status st = cli_model_config(&mf, opts, n, &cfg);
    if (st.code) return cli_fail(st.msg);
    da_model m;
    if ((st = da_model_create(&m, &cfg)).code) return cli_fail(st.msg);
    da_model_init(&m, seed);
    st = da_model_save(&m, out);
    if (!st.code)
        printf("wrote %s: %s, %zu parameters\n", out, da_arch_name(cfg.arch), m.n_params);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
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
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    cli_opt opts[] = {{"model", OPT_STR, &path, "model file (.safetensors, or a .gguf from quantize)", 0}};
    const char *req[] = {"model", NULL};
    int rc = cli_parse("info", "Shows a model's configuration, parameter count and lambda per layer.", argc, argv,
                       opts, 1, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_model m;
    da_status st = da_model_load_any(&m, path);
    if (st.code) return cli_fail(st.msg);
    const da_config *c = &m.cfg;
    printf("model          %s\n", path);
    printf("arch           %s\n", da_arch_name(c->arch));
    printf("dim            %d\n", c->dim);
    printf("n_layers       %d\n", c->n_layers);
    printf("n_heads        %d%s\n", c->n_heads,
           c->arch == DA_ARCH_DIFF ? " (differential)" : c->arch == DA_ARCH_DIFF2 ? " (output heads; 2x query heads)" : "");
    printf("n_kv_heads     %d\n", c->n_kv_heads);
    printf("head_dim       %d%s\n", da_head_dim(c), c->arch == DA_ARCH_DIFF ? " (per sub-head; values 2x)" : "");
    printf("ffn_hidden     %d\n", c->ffn_hidden);
    printf("vocab_size     %d\n", c->vocab_size);
    printf("max_seq_len    %d\n", c->max_seq_len);
    printf("norm_eps       %g\n", (double)c->norm_eps);
    printf("rope_theta     %g\n", (double)c->rope_theta);
    printf("tie_embeddings %s\n", c->tie_embeddings ? "true" : "false");
    if (c->window > 0) printf("window         %d (each token sees the last %d keys)\n", c->window, c->window);
    printf("parameters     %zu (%.2f M)\n", m.n_params, (double)m.n_params / 1e6);
    if (c->arch == DA_ARCH_DIFF2) {
        /* the second query heads (dim x dim) and lambda_proj (n_heads x dim), per layer */
        const size_t extra = (size_t)c->n_layers * ((size_t)c->dim * c->dim + (size_t)c->n_heads * c->dim);
        printf("               %zu (%.1f%%) more than softmax with the same heads: the second queries "
               "and lambda_proj\n", extra, 100.0 * (double)extra / (double)(m.n_params - extra));
    }
    printf("tokenizer      %s\n", m.tokenizer_json ? "embedded (tokenizer.json)" : "none (bytes)");
    if (c->arch == DA_ARCH_DIFF) {
        printf("lambda         layer  lambda_init  lambda\n");
        for (int l = 0; l < c->n_layers; l++)
            printf("               %5d  %11.4f  %.4f\n", l, (double)da_lambda_init(l), (double)da_model_lambda(&m, l));
    }
    da_model_free(&m);
    da_engine *e = NULL;
    if ((st = da_engine_load(&e, path)).code) return cli_fail(st.msg);
    print_weight_types(e);
    da_engine_free(e);
    return 0;
}
