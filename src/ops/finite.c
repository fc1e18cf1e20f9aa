/* da_first_nonfinite (finite.h). */
#include <stdint.h>

#include "ops/finite.h"

/* The OR over the exponent test vectorises; the position is looked for only
 * when one is there. */
size_t da_first_nonfinite(const float *x, size_t n) {
    const uint32_t *u = (const uint32_t *)(const void *)x;
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= (u[i] & 0x7f800000u) == 0x7f800000u;
    if (!bad) return n;
    size_t i = 0;
    while ((u[i] & 0x7f800000u) != 0x7f800000u) i++;
    return i;
}
