/* Statistics of experiments over seeds: mean and spread, medians, the Wilson
 * interval of a success rate, Fisher's exact test on two success counts, a
 * bootstrap interval for a difference of means, and the verdicts every
 * comparison prints (one rule, used by compare and compare --task). */
#ifndef DA_STATS_H
#define DA_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* v printed with fmt, or null when v is NaN (a measurement the arch does not have): reports' JSON has no NaN. */
void da_json_number(FILE *fp, const char *fmt, double v);

/* Mean and sample standard deviation (n - 1) of x (n >= 1; sd 0 when n == 1). */
void da_mean_sd(const double *x, int n, double *mean, double *sd);
/* Median of x (n values, x unchanged); NAN when n == 0. */
double da_median(const double *x, int n);

/* Wilson score interval of k successes in n trials at normal quantile z
 * (1.96: 95%): [lo, hi] within [0, 1]; [0, 1] when n == 0. */
void da_wilson_interval(long k, long n, double z, double *lo, double *hi);

/* Two-sided p-value of Fisher's exact test on the 2x2 table
 * (k1, n1 - k1; k2, n2 - k2): the probability, under the hypergeometric law
 * with the margins fixed, of every table no more probable than the one seen. */
double da_fisher_exact_p(long k1, long n1, long k2, long n2);

/* Percentile bootstrap of mean(x) - mean(y): `reps` resamples of each group
 * with replacement (drawn from seed), the (1 - level)/2 and (1 + level)/2
 * quantiles into lo and hi. nx, ny >= 1. */
void da_bootstrap_mean_diff(const double *x, int nx, const double *y, int ny, int reps, double level, uint64_t seed,
                            double *lo, double *hi);

/* The comparison of one architecture's seeds with the baseline's, the rule
 * every report states:
 *   - success (a seed reaching the threshold): Fisher's exact test on the
 *     success counts, p < 0.05;
 *   - final accuracy: the 95% bootstrap interval (10,000 resamples) of the
 *     difference of means excludes 0.
 * The verdict is "better" or "worse" when a test calls a difference and no
 * test calls the opposite one, "mixed" when they disagree, else "no
 * difference shown" (with one seed per side: "one seed: spread unknown"). */
typedef struct {
    long k, n, k_base, n_base; /* successes and seeds, this arch and the baseline */
    double p_fisher;           /* two-sided */
    double diff_lo, diff_hi;   /* 95% bootstrap interval of mean accuracy - baseline's */
    const char *verdict;
} da_verdict;

void da_verdict_of(const int *success, const double *acc, int n, const int *success_base, const double *acc_base,
                   int n_base, da_verdict *v);

/* The spread rule of single measurements (losses, shares, outliers): two seed
 * means differ when the gap exceeds both the sum of their sample sds and
 * `resolution` (half the printed precision). Into out: "within noise",
 * "<name> higher" / "<name> lower", or "one seed: spread unknown". */
void da_verdict_spread(char *out, size_t n, const char *name, int seeds, double m0, double sd0, double m1, double sd1,
                       double resolution);

#endif
