/* Monotonic wall-clock seconds, for progress displays and benchmarks. */
#ifndef DA_CLOCK_H
#define DA_CLOCK_H

double da_now_s(void);

#endif
