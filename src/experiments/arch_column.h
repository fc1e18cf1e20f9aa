/* One column of compare's --archs: an architecture and the model options it
 * trains with, in one token: "diff", "diff:head-norm=off",
 * "diff:lambda-init=0.5:head-norm=off". The options are rows of the model's
 * configuration table, named by their flag (ARCH_COLUMN_OPTIONS). */
#ifndef DA_ARCH_COLUMN_H
#define DA_ARCH_COLUMN_H

#include "diffattn/experiments.h"

/* The flags a column may set: the model options of the paper's ablations. */
#define ARCH_COLUMN_OPTIONS \
    "head-norm, lambda-init, rope-scaling, rope-factor, or a variant's own hyper-parameter flag (train --help)"

/* tok into *arch, checking each option's value and that the architecture
 * offers it; *has_options: 1 when tok names any. The message quotes tok. */
da_status da_arch_column_parse(const char *tok, da_arch *arch, int *has_options);
/* Applies the options of a column parsed by da_arch_column_parse to cfg. */
da_status da_arch_column_apply(const char *tok, da_config *cfg);

#endif
