/* compare's column tokens "arch:flag=value:..." (arch_column.h). */
#include <stdio.h>
#include <string.h>

#include "diffattn/model.h"
#include "experiments/arch_column.h"

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
