/* Monotonic wall-clock seconds (see clock.h). */
#include <time.h>

#include "core/clock.h"

double da_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
