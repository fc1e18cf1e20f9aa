/* diffattn core: version, errors, load options and the clock; every other
 * header builds on it.
 * Implemented in src/core/status.c, src/core/clock.c.
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

/* How a loader treats a model file. A loader refuses weights holding NaN or
 * infinity, naming the tensor (runs stop at non-finite logits in any case);
 * allow_nonfinite = 1 lets them load, for debugging (the CLI's
 * --allow-nonfinite). A zeroed struct, or NULL where a function takes a
 * pointer, is the default. */
typedef struct {
    int allow_nonfinite;
} da_load_opts;

/* ---------------------------------------------------------------- clock */

/* Monotonic wall-clock seconds, for timing (any origin: only differences mean anything). */
double da_now_s(void);

#ifdef __cplusplus
}
#endif
#endif
