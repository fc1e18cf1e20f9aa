/* Activation outliers (the paper's Table: top attention logit, top hidden
 * state): top-1, 2, 3, 10, 100 and the median of |x| over a set of values. */
#ifndef DA_OUTLIERS_H
#define DA_OUTLIERS_H

#include <stddef.h>

#include "data/text_data.h"
#include "diffattn/train.h"
#include "diffattn/generate.h"

typedef struct {
    double top[5]; /* the 1st, 2nd, 3rd, 10th and 100th largest |x| (0 when fewer values) */
    double median; /* of |x| */
    size_t count;
} da_outlier_stats;

/* Statistics of |x| over x[0..n); scratch: n floats (reordered). */
void da_outlier_stats_of(const float *x, size_t n, float *scratch, da_outlier_stats *s);

typedef struct {
    da_outlier_stats logits; /* q.k / sqrt(d) over every causal pair, sub-head and layer */
    da_outlier_stats hidden; /* every layer's output */
    long tokens;
} da_outliers_result;

/* Runs `windows` validation windows of T tokens through the model. */
da_status da_eval_outliers(da_model *m, const da_text_data *data, int T, long windows, da_outliers_result *r);

#endif
