/* A minimal test harness: each tests/test_*.c is one ctest executable that
 * runs its cases, prints one line per case and the worst error on failure,
 * and exits non-zero when any case failed. */
#ifndef DA_TEST_HARNESS_H
#define DA_TEST_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int th_passed, th_failed;

#define RUN(fn)                                                   \
    do {                                                          \
        int th_rc = fn();                                         \
        if (th_rc == 0) { th_passed++; printf("ok   %s\n", #fn); } \
        else { th_failed++; printf("FAIL %s\n", #fn); }           \
        fflush(stdout);                                           \
    } while (0)

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            return 1;                                                            \
        }                                                                        \
    } while (0)

#define TH_SUMMARY()                                              \
    do {                                                          \
        printf("%d passed, %d failed\n", th_passed, th_failed);   \
        return th_failed ? 1 : 0;                                 \
    } while (0)

/* max |a-b| / max(max|b|, floor), the error measure every parity check uses;
 * *where gets the worst element's index (NaN counts as worst). */
static inline double rel_error_at(const float *a, const float *b, size_t n, double floor, size_t *where,
                                  double *scale) {
    double maxb = floor, worst = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs(b[i]) > maxb) maxb = fabs(b[i]);
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= worst)) { worst = e; wi = i; }
    }
    if (where) *where = wi;
    if (scale) *scale = maxb;
    return maxb > 0 ? worst / maxb : worst;
}

static inline double max_rel_error(const float *a, const float *b, size_t n, double floor) {
    return rel_error_at(a, b, n, floor, NULL, NULL);
}

/* max_rel_error <= tol; prints the worst element otherwise. */
static inline int expect_close_rel(const char *what, const float *a, const float *b, size_t n,
                                   double tol, double floor) {
    size_t wi;
    double scale, rel = rel_error_at(a, b, n, floor, &wi, &scale);
    if (!(rel <= tol)) {
        fprintf(stderr, "  %s: rel error %.3g > %.3g at [%zu]: got %.8g want %.8g (scale %.4g)\n",
                what, rel, tol, wi, a[wi], b[wi], scale);
        return 1;
    }
    return 0;
}

/* A whole file in a malloc'd buffer, NUL-terminated for text; its length in
 * *n when n is not NULL. NULL when it cannot be read. */
static inline unsigned char *th_read_file(const char *path, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (b && fread(b, 1, (size_t)len, fp) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(fp);
    if (b) b[len] = 0;
    if (n) *n = b ? (size_t)len : 0;
    return b;
}

#endif
