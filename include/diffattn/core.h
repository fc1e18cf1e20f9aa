/* diffattn core: version, errors, the random number generator.
 *
 * The library never exits: every call that can fail returns a da_status whose
 * msg names the file, the field and, where there is one, the fix. */
#ifndef DIFFATTN_CORE_H
#define DIFFATTN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DA_VERSION "0.1.0"
#define DA_FORMAT_VERSION 1 /* the `version` in a model file's metadata */

/* ---------------------------------------------------------------- errors */

typedef struct {
    int code; /* 0 = ok */
    char msg[512];
} da_status;

da_status da_ok(void);
da_status da_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---------------------------------------------------------------- RNG */

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
