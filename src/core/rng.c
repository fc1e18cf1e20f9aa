/* xoshiro256** seeded through splitmix64: small, fast, and its whole state
 * fits in a checkpoint, so a resumed run draws the same numbers. */
#include <math.h>

#include "diffattn/core.h"
#include "diffattn/rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void da_rng_seed(da_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t da_rng_next(da_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

float da_rng_uniform(da_rng *r) { return (float)(da_rng_next(r) >> 40) * (1.0f / 16777216.0f); }

/* Box-Muller; the second value is dropped so that the state alone
 * determines the sequence. */
float da_rng_normal(da_rng *r) {
    double u1 = ((da_rng_next(r) >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (da_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}
