/* diffattn random numbers: xoshiro256**, seeded, the same stream on every
 * machine (initialisation, sampling, data order).
 * Implemented in src/core/rng.c. */
#ifndef DIFFATTN_RNG_H
#define DIFFATTN_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    uint64_t s[4];
} da_rng; /* xoshiro256** */

void da_rng_seed(da_rng *r, uint64_t seed);
uint64_t da_rng_next(da_rng *r);
float da_rng_uniform(da_rng *r); /* [0, 1) */
float da_rng_normal(da_rng *r);

#ifdef __cplusplus
}
#endif
#endif
