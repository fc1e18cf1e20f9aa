/* `diffattn compare`: DIFF and the softmax baseline trained at equal
 * parameters, tokens, data and seed, then the same evaluations on both, with
 * a side-by-side report (report.md, report.json). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "diffattn/experiments.h"

/* The API is in diffattn/experiments.h. */

/* An arch's name in reports and figures: its variant's label ("DIFF"). */
const char *da_compare_arch_label(da_arch a);

#endif
