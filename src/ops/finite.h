/* Finding a NaN or an infinity in a float array: the checks of loaded weights
 * (io/, infer/) and of logits (infer/, eval/, serve/) share it. */
#ifndef DA_OPS_FINITE_H
#define DA_OPS_FINITE_H

#include <stddef.h>

/* The index of the first NaN or infinity of x[0..n), or n. */
size_t da_first_nonfinite(const float *x, size_t n);

#endif
