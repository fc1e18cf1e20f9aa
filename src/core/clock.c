/* The monotonic clock (see clock.h). */
#include <time.h>

#include "core/clock.h"

uint64_t da_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

double da_now_s(void) {
    return (double)da_now_ns() * 1e-9;
}
