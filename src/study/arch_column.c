/* compare's column tokens "arch:flag=value:..." (arch_column.h). */
#include <stdio.h>
#include <string.h>

#include "diffattn/model.h"
#include "study/arch_column.h"

/* the paper's ablations, and the RoPE scaling a column trains and is evaluated with (at every length) */
static const char *const OPTION_FLAGS[] = {"head-norm", "lambda-init", "rope-scaling", "rope-factor", NULL};

/* The field a column option sets: the ablations' flags, and every variant's own hyper-parameters
 * (da_config_field_of_variant: a sparse variant's block sizes, so a column can sweep them). */
static const da_field *option_field(const char *flag) {
    for (int k = 0; k < DA_CONFIG_N_FIELDS; k++) {
        const da_field *f = &da_config_fields[k];
        if (!f->flag || strcmp(f->flag, flag)) continue;
        if (da_config_field_of_variant(k)) return f;
        for (int i = 0; OPTION_FLAGS[i]; i++)
            if (!strcmp(flag, OPTION_FLAGS[i])) return f;
    }
    return NULL;
}

/* The options after the arch name (p: "flag=value:flag=value") onto cfg. */
static da_status apply_options(const char *tok, char *p, da_config *cfg) {
    for (char *save = NULL, *opt = strtok_r(p, ":", &save); opt; opt = strtok_r(NULL, ":", &save)) {
        char *eq = strchr(opt, '=');
        if (!eq) return da_errorf("--archs: \"%s\": option \"%s\" is not flag=value", tok, opt);
        *eq = '\0';
        const da_field *f = option_field(opt);
        if (!f) return da_errorf("--archs: \"%s\": %s is not a column option (%s)", tok, opt, ARCH_COLUMN_OPTIONS);
        const int k = (int)(f - da_config_fields);
        if (da_config_field_of_variant(k) && !da_config_field_of_arch(cfg, k))
            return da_errorf("--archs: \"%s\": %s is not a hyper-parameter of --arch %s", tok, opt,
                             da_arch_name(cfg->arch));
        da_status st = da_field_parse(f, cfg, eq + 1);
        if (st.code) return da_errorf("--archs: \"%s\": %s %s", tok, opt, st.msg);
    }
    return da_ok();
}

/* tok's arch (the text before the first ':') and, into rest, what follows it. */
static da_status split(const char *tok, da_arch *arch, char *rest, size_t n) {
    char name[64];
    const char *colon = strchr(tok, ':');
    const size_t len = colon ? (size_t)(colon - tok) : strlen(tok);
    if (len >= sizeof name || strlen(tok) >= n) return da_errorf("--archs: \"%s\" is too long", tok);
    memcpy(name, tok, len);
    name[len] = '\0';
    if (da_arch_parse(name, arch)) return da_errorf("--archs: \"%s\" is not an architecture", name);
    snprintf(rest, n, "%s", colon ? colon + 1 : "");
    if (colon && !rest[0]) return da_errorf("--archs: \"%s\": no option after ':'", tok);
    return da_ok();
}

da_status da_arch_column_parse(const char *tok, da_arch *arch, int *has_options) {
    char rest[128];
    da_status st = split(tok, arch, rest, sizeof rest);
    if (st.code) return st;
    *has_options = rest[0] != '\0';
    da_config c;
    da_config_default(&c);
    c.arch = *arch;
    c.n_kv_heads = 0; /* as compare's cells leave it: the variant's default */
    if ((st = apply_options(tok, rest, &c)).code) return st;
    /* the variant offers the options and their values lie in range (default shapes) */
    if ((st = da_config_from_diff_heads(&c)).code) return da_errorf("--archs: \"%s\": %s", tok, st.msg);
    return da_ok();
}

da_status da_arch_column_apply(const char *tok, da_config *cfg) {
    char rest[128];
    da_arch arch;
    da_status st = split(tok, &arch, rest, sizeof rest);
    if (st.code) return st;
    if (arch != cfg->arch) return da_errorf("--archs: \"%s\" applied to another architecture", tok);
    return apply_options(tok, rest, cfg);
}

da_status da_arch_columns_parse(const char *list, int swa_window, da_arch *out_archs, int *out_windows,
                                char (*out_columns)[DA_COLUMN_NAME_MAX], int *n_archs) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS], n = 0;
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX], names[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const int swa = !strcmp(tok, "swa");
        da_arch a = da_arch_baseline(); /* swa: the baseline with a window */
        int options = 0;
        if (!swa && strlen(tok) >= DA_COLUMN_NAME_MAX)
            return da_errorf("--archs: \"%s\" is longer than %d characters", tok, DA_COLUMN_NAME_MAX - 1);
        if (!swa) {
            da_status st = da_arch_column_parse(tok, &a, &options);
            char all[128];
            if (st.code)
                return da_errorf("%s (columns: %s, swa, or arch:flag=value with flags %s)", st.msg,
                                 da_arch_names_all(all, sizeof all, ", "), ARCH_COLUMN_OPTIONS);
        }
        if (swa && swa_window < 1)
            return da_errorf("--archs: swa (softmax with a sliding window) needs --swa-window W (W >= 1)");
        if (n == DA_COMPARE_MAX_ARCHS) return da_errorf("--archs: at most %d architectures", DA_COMPARE_MAX_ARCHS);
        snprintf(columns[n], sizeof columns[n], "%s", options ? tok : "");
        snprintf(names[n], sizeof names[n], "%s", da_arch_column_name(a, swa ? swa_window : 0, columns[n]));
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], names[n])) return da_errorf("--archs: %s is listed twice", tok);
        archs[n] = a, windows[n++] = swa ? swa_window : 0;
    }
    char defaults[128];
    if (!n)
        return da_errorf("--archs: empty list (expected e.g. %s,swa)", da_arch_names_default(defaults, sizeof defaults, ","));
    memcpy(out_archs, archs, sizeof archs), memcpy(out_windows, windows, sizeof windows);
    memcpy(out_columns, columns, sizeof columns);
    *n_archs = n;
    return da_ok();
}

const char *da_arch_column_name(da_arch arch, int window, const char *column) {
    return window ? "swa" : column[0] ? column : da_arch_name(arch);
}

const char *da_arch_column_label(da_arch arch, int window, const char *column) {
    return window ? "SWA" : column[0] ? column : da_arch_describe(arch).label;
}

int da_arch_baseline_slot(const da_arch *archs, const int *windows, const char (*columns)[DA_COLUMN_NAME_MAX], int n) {
    for (int i = 0; i < n; i++)
        if (archs[i] == da_arch_baseline() && !windows[i] && !columns[i][0]) return i;
    return -1;
}
