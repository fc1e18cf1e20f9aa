/* Software prefetch of a byte range, for kernels whose access pattern runs
 * ahead of what the hardware prefetcher follows (interleaved rows, gathered
 * blocks). */
#ifndef DA_OPS_PREFETCH_H
#define DA_OPS_PREFETCH_H

#include <stddef.h>

/* Every 64-byte cache line of the n bytes at p, for reading. */
static inline void prefetch_bytes(const void *p, size_t n) {
    for (size_t o = 0; o < n; o += 64) __builtin_prefetch((const char *)p + o);
}

#endif
