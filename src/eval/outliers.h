/* Activation outliers (the paper's Table: top attention logit, top hidden
 * state): top-1, 2, 3, 10, 100 and the median of |x| over a set of values. */
#ifndef DA_OUTLIERS_H
#define DA_OUTLIERS_H

#include <stddef.h>

#include "data/text_data.h"
#include "eval/eval.h"

/* Statistics of |x| over x[0..n); scratch: n floats (reordered). */
void da_outlier_stats_of(const float *x, size_t n, float *scratch, da_outlier_stats *s);

#endif
