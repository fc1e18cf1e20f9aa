/* Flag parsing and --help for the subcommands. */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"

static void print_default(const cli_opt *o) {
    switch (o->type) {
    case OPT_INT: printf(" (default %d)", *(int *)o->dst); break;
    case OPT_LONG: printf(" (default %ld)", *(long *)o->dst); break;
    case OPT_U64: printf(" (default %" PRIu64 ")", *(uint64_t *)o->dst); break;
    case OPT_FLOAT: printf(" (default %g)", (double)*(float *)o->dst); break;
    case OPT_STR:
        if (*(const char **)o->dst) printf(" (default %s)", *(const char **)o->dst);
        break;
    case OPT_FLAG: break;
    }
}

static void print_help(const char *cmd, const char *summary, const cli_opt *opts, int n) {
    printf("usage: diffattn %s [flags]\n\n%s\n\nflags:\n", cmd, summary);
    for (int i = 0; i < n; i++) {
        const char *meta = opts[i].type == OPT_FLAG ? "" : opts[i].type == OPT_STR ? " S" :
                           opts[i].type == OPT_FLOAT ? " X" : " N";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", opts[i].name, meta);
        printf("  %-22s %s", left, opts[i].help);
        print_default(&opts[i]);
        printf("\n");
    }
    printf("  %-22s %s\n", "--help", "show this help");
}

static int parse_value(const char *cmd, cli_opt *o, const char *v) {
    char *end;
    errno = 0;
    switch (o->type) {
    case OPT_INT:
    case OPT_LONG: {
        long x = strtol(v, &end, 10);
        if (errno || end == v || *end || (o->type == OPT_INT && (x < INT_MIN || x > INT_MAX))) break;
        if (o->type == OPT_INT) *(int *)o->dst = (int)x;
        else *(long *)o->dst = x;
        return 0;
    }
    case OPT_U64: {
        if (v[0] == '-') break;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || end == v || *end) break;
        *(uint64_t *)o->dst = x;
        return 0;
    }
    case OPT_FLOAT: {
        float x = strtof(v, &end);
        if (errno || end == v || *end || !isfinite(x)) break;
        *(float *)o->dst = x;
        return 0;
    }
    case OPT_STR: *(const char **)o->dst = v; return 0;
    case OPT_FLAG: break;
    }
    fprintf(stderr, "diffattn %s: --%s: \"%s\" is not a valid %s\n", cmd, o->name, v,
            o->type == OPT_FLOAT ? "number" : "integer");
    return 1;
}

int cli_parse(const char *cmd, const char *summary, int argc, char **argv, cli_opt *opts, int n_opts,
              const char *const *required) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            print_help(cmd, summary, opts, n_opts);
            return CLI_HELP;
        }
        if (strncmp(a, "--", 2)) {
            fprintf(stderr, "diffattn %s: unexpected argument \"%s\" (flags start with --; see --help)\n", cmd, a);
            return CLI_ERROR;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        cli_opt *o = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, name, len)) o = &opts[k];
        if (!o) {
            fprintf(stderr, "diffattn %s: unknown flag --%.*s (see diffattn %s --help)\n", cmd, (int)len, name, cmd);
            return CLI_ERROR;
        }
        if (o->type == OPT_FLAG) {
            if (eq) {
                fprintf(stderr, "diffattn %s: --%s takes no value\n", cmd, o->name);
                return CLI_ERROR;
            }
            *(int *)o->dst = 1;
        } else {
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v) {
                fprintf(stderr, "diffattn %s: --%s needs a value\n", cmd, o->name);
                return CLI_ERROR;
            }
            if (parse_value(cmd, o, v)) return CLI_ERROR;
        }
        o->set = 1;
    }
    for (int r = 0; required && required[r]; r++) {
        if (!cli_was_set(opts, n_opts, required[r])) {
            fprintf(stderr, "diffattn %s: --%s is required (see diffattn %s --help)\n", cmd, required[r], cmd);
            return CLI_ERROR;
        }
    }
    return CLI_OK;
}

static volatile int stop_requested;

static void on_stop_signal(int sig) {
    stop_requested = 1;
    signal(sig, SIG_DFL); /* a second one ends the process at once */
}

volatile int *cli_catch_stop_signals(void) {
    signal(SIGINT, on_stop_signal);
    signal(SIGTERM, on_stop_signal);
    return &stop_requested;
}

int cli_was_set(const cli_opt *opts, int n_opts, const char *name) {
    for (int i = 0; i < n_opts; i++)
        if (!strcmp(opts[i].name, name)) return opts[i].set;
    return 0;
}

void cli_model_flags_default(cli_model_flags *f) {
    da_config c;
    da_config_default(&c);
    f->arch = "diff";
    f->dim = c.dim;
    f->layers = c.n_layers;
    f->heads = c.n_heads;
    f->kv_heads = 0;
    f->ffn = 0;
    f->seq = c.max_seq_len;
    f->vocab = c.vocab_size;
    f->tie = 0;
    f->window = 0;
    f->rope_theta = c.rope_theta;
    f->norm_eps = c.norm_eps;
}

void cli_model_opts(cli_model_flags *f, cli_opt *o) {
    cli_opt opts[CLI_N_MODEL_OPTS] = {
        {"arch", OPT_STR, &f->arch, "diff (Differential Transformer), diff2 (DIFF V2) or softmax (the baseline)", 0},
        {"dim", OPT_INT, &f->dim, "model width", 0},
        {"layers", OPT_INT, &f->layers, "number of blocks", 0},
        {"heads", OPT_INT, &f->heads,
         "DIFF heads; --arch softmax gets twice as many plain heads, for equal parameters, and --arch diff2 "
         "as many output heads as softmax (each with two query heads)", 0},
        {"kv-heads", OPT_INT, &f->kv_heads, "KV groups in DIFF heads (GQA; 0 = --heads, plain MHA); doubled for softmax and diff2", 0},
        {"ffn", OPT_INT, &f->ffn, "SwiGLU hidden size (0 = 8*dim/3 rounded up to a multiple of 64)", 0},
        {"seq", OPT_INT, &f->seq, "context length (the model's max_seq_len)", 0},
        {"vocab", OPT_INT, &f->vocab, "vocabulary size (256 = bytes)", 0},
        {"rope-theta", OPT_FLOAT, &f->rope_theta, "RoPE base", 0},
        {"norm-eps", OPT_FLOAT, &f->norm_eps, "RMSNorm epsilon", 0},
        {"tie-embeddings", OPT_FLAG, &f->tie, "share the LM head with the token embedding", 0},
        {"window", OPT_INT, &f->window,
         "sliding-window attention: each token sees the last N keys, itself included (0 = all)", 0},
    };
    memcpy(o, opts, sizeof opts);
}

da_status cli_model_config(const cli_model_flags *f, const cli_opt *opts, int n_opts, da_config *c) {
    (void)opts;
    (void)n_opts;
    da_config_default(c);
    if (da_arch_parse(f->arch, &c->arch)) return da_errorf("--arch \"%s\": expected diff, diff2 or softmax", f->arch);
    /* softmax and diff2 heads are d = dim/H wide, half a DIFF head's 2d */
    int mult = c->arch == DA_ARCH_DIFF ? 1 : 2;
    if (f->heads <= 0) return da_errorf("--heads %d must be positive", f->heads);
    if (f->kv_heads < 0) return da_errorf("--kv-heads %d must be >= 0", f->kv_heads);
    c->dim = f->dim;
    c->n_layers = f->layers;
    c->n_heads = f->heads * mult;
    c->n_kv_heads = (f->kv_heads ? f->kv_heads : f->heads) * mult;
    c->ffn_hidden = f->ffn ? f->ffn : da_default_ffn_hidden(f->dim > 0 ? f->dim : 1);
    c->max_seq_len = f->seq;
    c->vocab_size = f->vocab;
    c->rope_theta = f->rope_theta;
    c->norm_eps = f->norm_eps;
    c->tie_embeddings = f->tie;
    c->window = f->window;
    da_status st = da_config_validate(c);
    if (st.code) return da_errorf("invalid model flags: %s", st.msg);
    return da_ok();
}
