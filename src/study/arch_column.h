/* One column of compare's --archs: an architecture and the model options it
 * trains with, in one token: "diff", "diff:head-norm=off",
 * "diff:lambda-init=0.5:head-norm=off". The options are rows of the model's
 * configuration table, named by their flag (ARCH_COLUMN_OPTIONS). */
#ifndef DA_ARCH_COLUMN_H
#define DA_ARCH_COLUMN_H

#include "diffattn/model.h"
#include "study/study.h"

#define DA_COLUMN_NAME_MAX 48 /* a column token of --archs: "diff:lambda-init=0.5:head-norm=off" */

/* The flags a column may set: the model options of the paper's ablations. */
#define ARCH_COLUMN_OPTIONS \
    "head-norm, lambda-init, rope-scaling, rope-factor, or a variant's own hyper-parameter flag (train --help)"

/* tok into *arch, checking each option's value and that the architecture
 * offers it; *has_options: 1 when tok names any. The message quotes tok. */
da_status da_arch_column_parse(const char *tok, da_arch *arch, int *has_options);
/* Applies the options of a column parsed by da_arch_column_parse to cfg. */
da_status da_arch_column_apply(const char *tok, da_config *cfg);
/* The whole --archs of every comparison (plain compare and compare --task):
 * every da_arch_name, swa (the baseline with a sliding window of swa_window
 * keys), and columns with model options, in the order given, each at most
 * once. archs, windows and columns (each DA_COMPARE_MAX_ARCHS long) are left
 * as they were on an error. */
da_status da_arch_columns_parse(const char *list, int swa_window, da_arch *archs, int *windows,
                                char (*columns)[DA_COLUMN_NAME_MAX], int *n_archs);
/* A column's name in run folders and JSON ("swa", the column token, or the
 * architecture's name), and its label in reports. */
const char *da_arch_column_name(da_arch arch, int window, const char *column);
const char *da_arch_column_label(da_arch arch, int window, const char *column);

/* The slot of the plain baseline (no window, no options) among columns, or
 * -1: what every report's verdicts are against. */
int da_arch_baseline_slot(const da_arch *archs, const int *windows, const char (*columns)[DA_COLUMN_NAME_MAX], int n);

/* --match-params: widens the SwiGLU FFN (ffn_hidden) of each of the n
 * configurations to the width whose parameter count is nearest the largest
 * one's (within 3 dim n_layers / 2 parameters, far inside 1% at any useful
 * width); the largest keeps its own. */
void da_match_params(da_config *cfgs, int n);

#endif
