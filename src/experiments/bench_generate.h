/* `bench generate`: prompt and batch-1 decoding speed of several models,
 * timed interleaved so their ratios share the machine's conditions. */
#ifndef DA_BENCH_GENERATE_H
#define DA_BENCH_GENERATE_H

#include "diffattn/experiments.h"

#endif
