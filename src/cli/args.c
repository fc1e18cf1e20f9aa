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

#include "args.h"
#include "commands.h"

static void print_default(const cli_opt *o) {
    switch (o->type) {
    case OPT_INT: printf(" (default %d)", *(int *)o->dst); break;
    case OPT_LONG: printf(" (default %ld)", *(long *)o->dst); break;
    case OPT_U64: printf(" (default %" PRIu64 ")", *(uint64_t *)o->dst); break;
    case OPT_FLOAT: printf(" (default %g)", (double)*(float *)o->dst); break;
    case OPT_STR:
        if (*(const char **)o->dst) printf(" (default %s)", *(const char **)o->dst);
        break;
    case OPT_ENUM: {
        const cli_enum *e = o->dst;
        printf(" (default %s)", e->names[*e->value]);
        break;
    }
    case OPT_FIELD: {
        const cli_enum *e = o->dst;
        char v[64];
        da_field_format(e->field, e->obj, v, sizeof v);
        printf(" (default %s)", v);
        break;
    }
    case OPT_FLAG: break;
    }
}

static int is_required(const char *name, const char *const *required) {
    for (int i = 0; required && required[i]; i++)
        if (!strcmp(name, required[i])) return 1;
    return 0;
}

/* A required flag shows "(required)", never a default: the value a struct's
 * defaults put there is not used (quantize --type named q8_0). */
static void print_help(const char *cmd, const char *summary, const cli_opt *opts, int n, const char *const *required) {
    printf("usage: diffattn %s [flags]\n\n%s\n\nflags:\n", cmd, summary);
    for (int i = 0; i < n; i++) {
        const char *meta = opts[i].type == OPT_FLAG ? "" : opts[i].type == OPT_STR || opts[i].type == OPT_ENUM ? " S" :
                           opts[i].type == OPT_FLOAT || opts[i].type == OPT_FIELD ? " X" : " N";
        char left[64];
        snprintf(left, sizeof left, "--%s%s", opts[i].name, meta);
        printf("  %-22s %s", left, opts[i].help);
        if (is_required(opts[i].name, required)) printf(" (required)");
        else print_default(&opts[i]);
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
    case OPT_ENUM: {
        const cli_enum *e = o->dst;
        char names[128] = "";
        for (int k = 0; e->names[k]; k++) {
            if (!strcmp(v, e->names[k])) {
                *e->value = k;
                return 0;
            }
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? " or " : "", e->names[k]);
        }
        fprintf(stderr, "diffattn %s: --%s \"%s\": expected %s\n", cmd, o->name, v, names);
        return 1;
    }
    case OPT_FIELD: {
        const cli_enum *e = o->dst;
        da_status st = da_field_parse(e->field, e->obj, v);
        if (!st.code) return 0;
        fprintf(stderr, "diffattn %s: --%s %s\n", cmd, o->name, st.msg);
        return 1;
    }
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
            print_help(cmd, summary, opts, n_opts, required);
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

static cli_opt_type opt_type(da_field_type t) {
    switch (t) {
    case DA_FIELD_INT: return OPT_INT;
    case DA_FIELD_LONG: return OPT_LONG;
    case DA_FIELD_U64: return OPT_U64;
    case DA_FIELD_FLOAT: return OPT_FLOAT;
    case DA_FIELD_BOOL: return OPT_FLAG;
    case DA_FIELD_ENUM: return OPT_ENUM;
    }
    return OPT_STR;
}

int cli_field_opts(const da_field *fields, int n, void *obj, cli_opt *opts, cli_enum *enums) {
    int k = 0, e = 0;
    for (int i = 0; i < n; i++) {
        const da_field *f = &fields[i];
        if (!f->flag) continue;
        void *dst = (char *)obj + f->offset;
        cli_opt_type type = opt_type(f->type);
        if (f->type == DA_FIELD_ENUM) {
            enums[e] = (cli_enum){(int *)dst, f->names, NULL, NULL};
            dst = &enums[e++];
        } else if (f->type == DA_FIELD_FLOAT && f->names) {
            enums[e] = (cli_enum){NULL, f->names, f, obj};
            dst = &enums[e++];
            type = OPT_FIELD;
        }
        opts[k++] = (cli_opt){f->flag, type, dst, f->help, 0};
    }
    return k;
}

void cli_fields_given(const da_field *fields, int n, const cli_opt *opts, int n_opts, unsigned char *given) {
    for (int i = 0; i < n; i++) given[i] = fields[i].flag && cli_was_set(opts, n_opts, fields[i].flag);
}

void cli_model_flags_default(cli_model_flags *f) {
    memset(f, 0, sizeof *f);
    da_fields_default(da_config_fields, DA_CONFIG_N_FIELDS, &f->cfg);
    f->seq = f->cfg.max_seq_len;
}

void cli_model_opts(cli_model_flags *f, cli_opt *o) { cli_field_opts(da_config_fields, DA_CONFIG_N_FIELDS, &f->cfg, o, f->enums); }

da_status cli_model_config(cli_model_flags *f, const cli_opt *opts, int n_opts, da_config *c) {
    (void)opts;
    (void)n_opts;
    *c = f->cfg;
    f->seq = c->max_seq_len;
    da_status st = da_config_from_diff_heads(c);
    if (st.code) {
        char named[sizeof st.msg];
        cli_name_flags(named, sizeof named, st.msg);
        return da_errorf("invalid model flags: %s", named);
    }
    return da_ok();
}

/* "1024,2048" -> ints; 0 ok, -1 on a bad list. */
static int int_list(const char *s, int *out, int max, int *n, int lo, int hi) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < lo || v > hi || (*end && *end != ',') || *n == max) return -1;
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

int cli_parse_ints(const char *flag, const char *s, int *out, int max, int *n, int lo, int hi, const char *noun,
                   const char *example) {
    if (!int_list(s, out, max, n, lo, hi)) return 0;
    fprintf(stderr, "diffattn: --%s \"%s\": expected up to %d %s in %d..%d, like %s\n", flag, s, max, noun, lo, hi,
            example);
    return 1;
}

static int double_list(const char *s, double *out, int max, int *n, double lo, double hi) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= lo && v <= hi) || (*end && *end != ',') || *n == max) return -1;
        out[(*n)++] = v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

int cli_parse_doubles(const char *flag, const char *s, double *out, int max, int *n, double lo, double hi,
                      const char *noun, const char *example) {
    if (!double_list(s, out, max, n, lo, hi)) return 0;
    fprintf(stderr, "diffattn: --%s \"%s\": expected up to %d %s in [%g, %g], like %s\n", flag, s, max, noun, lo, hi,
            example);
    return 1;
}

/* --act and --kv into session options (see args.h). */
int cli_parse_run_opts(const char *act_s, const char *kv_s, da_session_opts *o) {
    *o = da_session_opts_default();
    da_act_mode act;
    if (act_s && da_act_mode_parse(act_s, &act)) {
        fprintf(stderr, "diffattn: --act: expected q8, int8-dynamic, int8-static, bf16 or f32\n");
        return 1;
    }
    if (act_s) o->act = act;
    if (kv_s && strcmp(kv_s, "int8") && strcmp(kv_s, "f32") && strcmp(kv_s, "f16")) {
        fprintf(stderr, "diffattn: --kv: expected f32, f16 or int8\n");
        return 1;
    }
    o->kv_int8 = kv_s && !strcmp(kv_s, "int8");
    o->kv_f16 = kv_s && !strcmp(kv_s, "f16");
    return 0;
}

/* Set once, by main, before any command runs; read-only afterwards. */
static da_load_opts invocation_load_opts;

int cli_take_load_opts(int argc, char **argv) {
    int out = 0;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--allow-nonfinite")) invocation_load_opts.allow_nonfinite = 1;
        else argv[out++] = argv[i];
    argv[out] = NULL;
    return out;
}

const da_load_opts *cli_load_opts(void) { return &invocation_load_opts; }
