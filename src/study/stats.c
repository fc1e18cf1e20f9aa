/* Statistics of experiments over seeds (see stats.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/core.h"
#include "diffattn/rng.h"
#include "study/stats.h"

void da_mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = n ? s / n : NAN;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double da_median(const double *x, int n) {
    if (n <= 0) return NAN;
    double *v = malloc((size_t)n * sizeof *v);
    if (!v) return NAN;
    memcpy(v, x, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double m = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    free(v);
    return m;
}

void da_wilson_interval(long k, long n, double z, double *lo, double *hi) {
    if (n <= 0) {
        *lo = 0, *hi = 1;
        return;
    }
    const double p = (double)k / n, z2 = z * z, denom = 1 + z2 / n;
    const double center = (p + z2 / (2.0 * n)) / denom;
    const double half = z * sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / denom;
    *lo = fmax(0, center - half), *hi = fmin(1, center + half);
    if (k == 0) *lo = 0; /* exact at the edges, not 1e-17 */
    if (k == n) *hi = 1;
}

/* log of n choose k */
static double log_choose(long n, long k) { return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0); }

double da_fisher_exact_p(long k1, long n1, long k2, long n2) {
    const long K = k1 + k2, N = n1 + n2; /* the first column's margin and the total */
    const long lo = K - n2 > 0 ? K - n2 : 0, hi = K < n1 ? K : n1;
    const double denom = log_choose(N, K);
    const double p_seen = exp(log_choose(n1, k1) + log_choose(n2, k2) - denom);
    double p = 0;
    for (long x = lo; x <= hi; x++) {
        const double px = exp(log_choose(n1, x) + log_choose(n2, K - x) - denom);
        if (px <= p_seen * (1 + 1e-7)) p += px; /* ties within rounding count as as extreme */
    }
    return p < 1 ? p : 1;
}

void da_bootstrap_mean_diff(const double *x, int nx, const double *y, int ny, int reps, double level, uint64_t seed,
                            double *lo, double *hi) {
    double *d = malloc((size_t)reps * sizeof *d);
    if (!d || reps < 1) {
        free(d);
        *lo = -INFINITY, *hi = INFINITY;
        return;
    }
    da_rng r;
    da_rng_seed(&r, seed);
    for (int i = 0; i < reps; i++) {
        double sx = 0, sy = 0;
        for (int j = 0; j < nx; j++) sx += x[da_rng_next(&r) % (uint64_t)nx];
        for (int j = 0; j < ny; j++) sy += y[da_rng_next(&r) % (uint64_t)ny];
        d[i] = sx / nx - sy / ny;
    }
    qsort(d, (size_t)reps, sizeof *d, cmp_double);
    /* the empirical quantiles at the order statistics floor(q (reps - 1)) and ceil(...) */
    const double qlo = (1 - level) / 2 * (reps - 1), qhi = (1 + level) / 2 * (reps - 1);
    *lo = d[(int)floor(qlo + 1e-9)];
    *hi = d[(int)ceil(qhi - 1e-9)];
    free(d);
}

void da_verdict_of(const int *success, const double *acc, int n, const int *success_base, const double *acc_base,
                   int n_base, da_verdict *v) {
    memset(v, 0, sizeof *v);
    v->n = n, v->n_base = n_base;
    for (int i = 0; i < n; i++) v->k += success[i] != 0;
    for (int i = 0; i < n_base; i++) v->k_base += success_base[i] != 0;
    v->p_fisher = da_fisher_exact_p(v->k, v->n, v->k_base, v->n_base);
    da_bootstrap_mean_diff(acc, n, acc_base, n_base, 10000, 0.95, 0xB007ULL, &v->diff_lo, &v->diff_hi);
    if (n < 2 || n_base < 2) {
        v->verdict = "one seed: spread unknown";
        return;
    }
    /* +1: this arch better by the test, -1: worse, 0: no difference called */
    const double rate = (double)v->k / n, rate_base = (double)v->k_base / n_base;
    const int by_rate = v->p_fisher < 0.05 ? (rate > rate_base ? 1 : -1) : 0;
    const int by_acc = v->diff_lo > 0 ? 1 : v->diff_hi < 0 ? -1 : 0;
    if (by_rate * by_acc < 0) v->verdict = "mixed";
    else if (by_rate + by_acc > 0) v->verdict = "better";
    else if (by_rate + by_acc < 0) v->verdict = "worse";
    else v->verdict = "no difference shown";
}

void da_verdict_spread(char *out, size_t n, const char *name, int seeds, double m0, double sd0, double m1, double sd1,
                       double resolution) {
    if (seeds < 2) snprintf(out, n, "one seed: spread unknown");
    else if (fabs(m0 - m1) <= sd0 + sd1 || fabs(m0 - m1) < resolution) snprintf(out, n, "within noise");
    else snprintf(out, n, "%s %s", name, m0 > m1 ? "higher" : "lower");
}

void da_json_number(FILE *fp, const char *fmt, double v) {
    if (isnan(v)) fputs("null", fp);
    else fprintf(fp, fmt, v);
}
