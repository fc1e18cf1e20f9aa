/* The numbers of constrained JSON: which prefixes can still become a number
 * of a node, and the fewest bytes that complete one.
 *
 * A number has at most JS_MAX_DIGITS significant digits, so its text parses
 * exactly; a bounded number (minimum/maximum) or an integer has no exponent.
 * A prefix is viable when some completion lies within the bounds: the
 * completions of a prefix with a fixed count of further bytes are a block of
 * consecutive grid points (integers, or multiples of 10^-j), so a candidate
 * at the block's edge is formatted and checked with strtod, the same test
 * js_num_complete makes of the final text. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/json_schema.h"
#include "infer/json_schema_node.h"

typedef struct {
    int neg;
    int n_int, n_frac, n_exp; /* digits in each part */
    int dot, exp, exp_sign;   /* a '.' / an 'e' / a sign after it */
    long long int_val, frac_val;
} num_shape;

/* Splits text into a number's parts; 0 when it is no prefix of a JSON number within the digit limits. */
static int num_parse(const char *t, int n, num_shape *s) {
    memset(s, 0, sizeof *s);
    int i = 0;
    if (i < n && t[i] == '-') s->neg = 1, i++;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; i++) {
        if (s->n_int == 1 && s->int_val == 0) return 0; /* a leading zero */
        s->int_val = s->int_val * 10 + (t[i] - '0');
        s->n_int++;
    }
    if (i < n && t[i] == '.') {
        if (!s->n_int) return 0;
        s->dot = 1;
        for (i++; i < n && t[i] >= '0' && t[i] <= '9'; i++) s->frac_val = s->frac_val * 10 + (t[i] - '0'), s->n_frac++;
    }
    if (i < n && (t[i] == 'e' || t[i] == 'E')) {
        if (!s->n_int || (s->dot && !s->n_frac)) return 0;
        s->exp = 1;
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) s->exp_sign = 1, i++;
        for (; i < n && t[i] >= '0' && t[i] <= '9'; i++) s->n_exp++;
    }
    return i == n && s->n_int + s->n_frac <= JS_MAX_DIGITS && s->n_exp <= JS_MAX_EXP_DIGITS;
}

static int bounded(const js_node *n) { return n->has_lo || n->has_hi; }

static int in_bounds(const js_node *n, double v) {
    if (n->has_lo && (n->lo_excl ? !(v > n->lo) : !(v >= n->lo))) return 0;
    if (n->has_hi && (n->hi_excl ? !(v < n->hi) : !(v <= n->hi))) return 0;
    return 1;
}

/* The shape is allowed for the node at all: integers have no fraction or exponent, bounded numbers no exponent. */
static int shape_allowed(const js_node *n, const num_shape *s) {
    int integer_only = (n->types & (JT_INT | JT_NUM)) == JT_INT;
    if (integer_only && (s->dot || s->exp)) return 0;
    if (bounded(n) && s->exp) return 0;
    return 1;
}

static int shape_complete(const num_shape *s) {
    return s->n_int > 0 && (!s->dot || s->n_frac > 0) && (!s->exp || s->n_exp > 0);
}

int js_num_complete(const js_node *n, const char *text, int len) {
    num_shape s;
    if (!num_parse(text, len, &s) || !shape_allowed(n, &s) || !shape_complete(&s)) return 0;
    if (!bounded(n)) return 1;
    char buf[DA_JSON_NUM_TEXT + 1];
    memcpy(buf, text, (size_t)len);
    buf[len] = 0;
    return in_bounds(n, strtod(buf, NULL));
}

static long long pow10ll(int k) {
    long long p = 1;
    while (k-- > 0) p *= 10;
    return p;
}

/* Some g in [glo, ghi] makes (neg ? -1 : 1) * g / 10^j a value within n's bounds: the candidates
 * nearest each bound are tried, each checked as its text would be. */
static int grid_hits(const js_node *n, int neg, long long glo, long long ghi, int j) {
    if (glo > ghi) return 0;
    const long double scale = (long double)pow10ll(j), sign = neg ? -1.0L : 1.0L;
    long long cand[6];
    int nc = 0;
    /* the magnitudes that meet each bound: |v| >= a and |v| <= b */
    long double a = -INFINITY, b = INFINITY;
    if (!neg) {
        if (n->has_lo) a = n->lo;
        if (n->has_hi) b = n->hi;
    } else {
        if (n->has_hi) a = -(long double)n->hi;
        if (n->has_lo) b = -(long double)n->lo;
    }
    long long g0 = glo, g1 = ghi;
    if (a > (long double)glo / scale) g0 = a * scale > (long double)ghi ? ghi + 1 : (long long)ceill(a * scale);
    if (b < (long double)ghi / scale) g1 = b * scale < (long double)glo ? glo - 1 : (long long)floorl(b * scale);
    for (int d = -1; d <= 1; d++) cand[nc++] = g0 + d, cand[nc++] = g1 + d;
    for (int i = 0; i < nc; i++) {
        long long g = cand[i];
        if (g < glo || g > ghi) continue;
        if (!j) { /* an integer below 10^15 is exact in a double: strtold of its text would give the same */
            if (in_bounds(n, (double)(sign * (long double)g))) return 1;
            continue;
        }
        char buf[64];
        long long p = pow10ll(j);
        if (j) snprintf(buf, sizeof buf, "%lld.%0*lld", g / p, j, g % p);
        else snprintf(buf, sizeof buf, "%lld", g);
        if (in_bounds(n, (double)(sign * strtold(buf, NULL)))) return 1;
    }
    return 0;
}

/* The integer parts reachable with k more digits after n_int digits of value v: [lo, hi]; 0 when none. */
static int int_block(const num_shape *s, int k, long long *lo, long long *hi) {
    if (s->n_int + k > JS_MAX_DIGITS || (s->n_int == 0 && k == 0)) return 0;
    if (s->n_int == 1 && s->int_val == 0 && k > 0) return 0; /* no digit after a leading zero */
    if (s->n_int == 0) {
        *lo = k == 1 ? 0 : pow10ll(k - 1);
        *hi = pow10ll(k) - 1;
    } else {
        *lo = s->int_val * pow10ll(k);
        *hi = *lo + pow10ll(k) - 1;
    }
    return 1;
}

/* A completion of exactly L more bytes exists (no sign to add, no exponent). */
static int completes_in(const js_node *n, const num_shape *s, int L) {
    int integer_only = (n->types & (JT_INT | JT_NUM)) == JT_INT;
    long long lo, hi;
    if (!s->dot) {
        if (int_block(s, L, &lo, &hi) && grid_hits(n, s->neg, lo, hi, 0)) return 1;
        if (integer_only) return 0;
        for (int k = 0; k + 2 <= L; k++) { /* k more integer digits, '.', j >= 1 fraction digits */
            int j = L - k - 1;
            if (!int_block(s, k, &lo, &hi) || s->n_int + k + j > JS_MAX_DIGITS) continue;
            long long p = pow10ll(j);
            if (grid_hits(n, s->neg, lo * p, hi * p + p - 1, j)) return 1;
        }
        return 0;
    }
    int j = L;
    if ((s->n_frac == 0 && j == 0) || s->n_int + s->n_frac + j > JS_MAX_DIGITS) return 0;
    long long p = pow10ll(j), base = (s->int_val * pow10ll(s->n_frac) + s->frac_val) * p;
    return grid_hits(n, s->neg, base, base + p - 1, s->n_frac + j);
}

/* The largest magnitude a value of n with this sign may have (HUGE_VAL: none). */
static double magnitude_cap(const js_node *n, int neg) {
    if (!neg) return n->has_hi ? n->hi : HUGE_VAL;
    return n->has_lo ? -n->lo : HUGE_VAL;
}

int js_num_min_left(const js_node *n, const char *text, int len) {
    num_shape s;
    if (!num_parse(text, len, &s) || !shape_allowed(n, &s)) return -1;
    if (!bounded(n)) {
        if (shape_complete(&s)) return 0;
        return 1; /* one digit completes any other prefix */
    }
    /* Every completion's magnitude is at least the integer part's, and with L more integer digits (an
     * integer has nothing else to add) at least int_val * 10^L: past the cap, no longer L helps either.
     * This ends the search for the many dead digit prefixes a vocabulary offers, after one or two L. */
    const double cap = magnitude_cap(n, s.neg);
    const int integer_only = (n->types & (JT_INT | JT_NUM)) == JT_INT;
    if (s.n_int > 0 && (long double)s.int_val > cap) return -1;
    for (int L = 0; L <= JS_MAX_DIGITS + 2; L++) {
        if (integer_only && s.n_int > 0 && !s.dot && (long double)s.int_val * (long double)pow10ll(L) > cap) return -1;
        if (L == 0) {
            if (js_num_complete(n, text, len)) return 0;
            continue;
        }
        if (completes_in(n, &s, L)) return L;
        if (len == 0) { /* or a minus sign first */
            num_shape neg = s;
            neg.neg = 1;
            if (completes_in(n, &neg, L - 1) && L >= 2) return L;
        }
    }
    return -1;
}
