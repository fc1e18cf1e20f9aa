/* The statistics of studies (src/experiments/stats.c) on cases computed by
 * hand: Wilson intervals, Fisher's exact test, the bootstrap interval of a
 * difference of means, medians, and the verdict rule built on them. */
#include "study/stats.h"
#include "harness.h"

static int near(double a, double b, double tol) { return fabs(a - b) <= tol; }

/* 8 of 10 at z = 1.96: p = 0.8, centre (0.8 + 0.19208) / 1.38416 = 0.716747,
 * half-width 1.96 sqrt(0.016 + 0.009604) / 1.38416 = 0.226581. */
static int test_wilson_8_of_10(void) {
    double lo, hi;
    da_wilson_interval(8, 10, 1.96, &lo, &hi);
    if (!near(lo, 0.490166, 1e-5) || !near(hi, 0.943328, 1e-5)) {
        fprintf(stderr, "  got [%.6f, %.6f], want [0.490166, 0.943328]\n", lo, hi);
        return 1;
    }
    return 0;
}

/* 0 of 5: the interval starts at exactly 0 and ends at 2 z^2/5 / (1 + z^2/5)
 * = 0.768320 / 1.768320 = 0.434492; 5 of 5 mirrors it. */
static int test_wilson_edges(void) {
    double lo, hi;
    da_wilson_interval(0, 5, 1.96, &lo, &hi);
    CHECK(lo == 0 && near(hi, 0.434492, 1e-5));
    da_wilson_interval(5, 5, 1.96, &lo, &hi);
    CHECK(hi == 1 && near(lo, 1 - 0.434492, 1e-5));
    da_wilson_interval(0, 0, 1.96, &lo, &hi);
    CHECK(lo == 0 && hi == 1);
    return 0;
}

/* Fisher's tea tasting, 3 of 4 against 1 of 4: the tables x = 0..4 have
 * probabilities 1, 16, 36, 16, 1 over 70; two-sided p = 34/70. */
static int test_fisher_tea(void) {
    const double p = da_fisher_exact_p(3, 4, 1, 4);
    if (!near(p, 34.0 / 70, 1e-9)) {
        fprintf(stderr, "  p = %.9f, want %.9f\n", p, 34.0 / 70);
        return 1;
    }
    return 0;
}

/* 5 of 5 against 0 of 5: only the two extreme tables, 2 / C(10, 5) = 2/252;
 * equal counts give p = 1; the test is symmetric in its two rows. */
static int test_fisher_extremes(void) {
    CHECK(near(da_fisher_exact_p(5, 5, 0, 5), 2.0 / 252, 1e-12));
    CHECK(near(da_fisher_exact_p(0, 5, 5, 5), 2.0 / 252, 1e-12));
    CHECK(near(da_fisher_exact_p(2, 5, 2, 5), 1.0, 1e-12));
    /* 4 of 5 against 1 of 5: tables x = 0..5 have 1, 25, 100, 100, 25, 1 over 252; p = (1+25+25+1)/252 */
    CHECK(near(da_fisher_exact_p(4, 5, 1, 5), 52.0 / 252, 1e-12));
    return 0;
}

/* Constant groups: every resample has the same difference. x = {0, 1}
 * against y = {0}: the resampled mean of x is 0, 0.5 or 1 with probability
 * 1/4, 1/2, 1/4, so the 95% interval is [0, 1]. */
static int test_bootstrap_hand_cases(void) {
    const double ones[3] = {1, 1, 1}, zeros[3] = {0, 0, 0}, x[2] = {0, 1};
    double lo, hi;
    da_bootstrap_mean_diff(ones, 3, zeros, 3, 2000, 0.95, 7, &lo, &hi);
    CHECK(lo == 1 && hi == 1);
    da_bootstrap_mean_diff(x, 2, zeros, 1, 4000, 0.95, 7, &lo, &hi);
    CHECK(lo == 0 && hi == 1);
    da_bootstrap_mean_diff(x, 2, zeros, 1, 4000, 0.40, 7, &lo, &hi); /* the middle 40% is all 0.5 */
    CHECK(lo == 0.5 && hi == 0.5);
    return 0;
}

static int test_median_and_spread(void) {
    const double a[4] = {4, 1, 3, 2}, b[3] = {5, 1, 3};
    CHECK(da_median(a, 4) == 2.5 && da_median(b, 3) == 3 && isnan(da_median(a, 0)));
    double m, sd;
    da_mean_sd(b, 3, &m, &sd);
    CHECK(m == 3 && near(sd, 2.0, 1e-12));
    return 0;
}

/* The rule: 5/5 against 0/5 successes is "better" (p = 0.0079) and the
 * reverse "worse"; 3/5 against 2/5 with overlapping accuracies is "no
 * difference shown"; accuracies that differ without a difference in success
 * are called by the bootstrap alone. */
static int test_verdict_rule(void) {
    const int all[5] = {1, 1, 1, 1, 1}, none[5] = {0}, three[5] = {1, 1, 1, 0, 0}, two[5] = {1, 1, 0, 0, 0};
    const double hi[5] = {0.99, 0.98, 1.0, 0.97, 0.99}, lo[5] = {0.3, 0.35, 0.32, 0.3, 0.31};
    const double mix1[5] = {0.95, 0.92, 0.91, 0.5, 0.4}, mix2[5] = {0.95, 0.91, 0.45, 0.5, 0.42};
    da_verdict v;
    da_verdict_of(all, hi, 5, none, lo, 5, &v);
    CHECK(!strcmp(v.verdict, "better") && v.k == 5 && v.k_base == 0 && near(v.p_fisher, 2.0 / 252, 1e-12));
    CHECK(v.diff_lo > 0.5 && v.diff_hi < 0.75);
    da_verdict_of(none, lo, 5, all, hi, 5, &v);
    CHECK(!strcmp(v.verdict, "worse"));
    da_verdict_of(three, mix1, 5, two, mix2, 5, &v);
    CHECK(!strcmp(v.verdict, "no difference shown") && v.diff_lo < 0 && v.diff_hi > 0);
    da_verdict_of(none, hi, 5, none, lo, 5, &v); /* success rates equal, accuracies apart */
    CHECK(!strcmp(v.verdict, "better") && near(v.p_fisher, 1, 1e-12));
    da_verdict_of(all, hi, 1, none, lo, 1, &v);
    CHECK(!strcmp(v.verdict, "one seed: spread unknown"));
    return 0;
}

int main(void) {
    RUN(test_wilson_8_of_10);
    RUN(test_wilson_edges);
    RUN(test_fisher_tea);
    RUN(test_fisher_extremes);
    RUN(test_bootstrap_hand_cases);
    RUN(test_median_and_spread);
    RUN(test_verdict_rule);
    TH_SUMMARY();
}
