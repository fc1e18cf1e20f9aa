/* `diffattn compare`: DIFF and the softmax baseline trained at equal
 * parameters, tokens, data and seed, then the same evaluations on both, with
 * a side-by-side report (report.md, report.json). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "diffattn/experiments.h"

/* The API is in diffattn/experiments.h. */

#endif
