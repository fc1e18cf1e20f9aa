/* The one clock: monotonic seconds (da_now_s, public in diffattn/core.h) and
 * nanoseconds, for progress displays, benchmarks and the thread pool's spins. */
#ifndef DA_CLOCK_H
#define DA_CLOCK_H

#include <stdint.h>

#include "diffattn/core.h"

uint64_t da_now_ns(void);

#endif
