/* `bench generate`: prompt and batch-1 decoding speed of several models,
 * timed interleaved so their ratios share the machine's conditions. */
#ifndef DA_BENCH_GENERATE_H
#define DA_BENCH_GENERATE_H

#include "diffattn/generate.h"

typedef struct {
    int prompt, gen, reps; /* prompt tokens (one batch), greedy decoding steps, repetitions */
    const char *act;       /* activation mode for every model; NULL: each file's own (f32 for float weights) */
    int kv_int8;
} da_bench_generate_opts;

typedef struct {
    char weight_type[8], act[16];
    char dots[16];   /* the instruction set of the quantized dot products */
    int kv_int8;
    long file_bytes;
    double best_prompt, best_decode; /* tokens/s, the best repetition */
} da_bench_generate_result;

/* Times the n model files in paths; res: (n). */
da_status da_bench_generate(const char *const *paths, int n, const da_bench_generate_opts *o,
                            da_bench_generate_result *res);

#endif
