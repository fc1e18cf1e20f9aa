/* NSA's block choice (nsa_choose_blocks, nsa.h), as one inline function that
 * the code compiled once (nsa_common.c) and each instruction-set level's
 * kernels (nsa_rows.c) compile for themselves: its count loop is as wide as
 * the level's vectors. Private to src/attn/nsa*.c. */
#ifndef DA_NSA_CHOOSE_H
#define DA_NSA_CHOOSE_H

#include <stdint.h>
#include <string.h>

#include "attn/nsa.h"

/* An unsigned key in the order of the floats (-0 as +0): x < y iff key(x) < key(y), for non-NaN floats. */
static inline uint32_t nsa_order_key(float x) {
    x += 0.0f;
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* The float of key v (nsa_order_key's inverse). */
static inline float nsa_key_float(uint32_t v) {
    const uint32_t u = v & 0x80000000u ? v & 0x7fffffffu : ~v;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Candidates j = 1 .. nc with imp[j] >= x, 16 at a time (GCC vectors: one or a few instructions each). */
static inline int nsa_count_at_least(const float *imp, int nc, float x) {
    typedef float v16f __attribute__((vector_size(64)));
    typedef int v16i __attribute__((vector_size(64)));
    v16i acc = {0};
    int j = 1, cnt = 0;
    for (; j + 15 <= nc; j += 16) {
        v16f v;
        memcpy(&v, imp + j, sizeof v);
        acc += (v16i)(v >= x); /* -1 where true */
    }
    for (int l = 0; l < 16; l++) cnt -= acc[l];
    for (; j <= nc; j++) cnt += imp[j] >= x;
    return cnt;
}

/* The forced blocks (0, t/l' and t/l' - 1), then the best `want` of the others, j = 1 .. t/l' - 2, by
 * importance, ties to the lower index; ascending, -1 after the last. The best: their threshold key, found
 * bit by bit from the top (the largest key v with at least `want` candidates at or above it, stopping
 * early when exactly `want` are), then those above v and the first of those at v, in index order. Every
 * pass is branch-free; sorting candidates into a list of the best costs thousands of cycles a query,
 * mostly mispredicted branches, when the importance is flat or rises with the index. */
static inline int nsa_choose(int *chosen, const float *imp, int t, const nsa_shape *s) {
    const int cur = t / s->select, n = s->topn;
    int cnt = 0;
    const int forced[3] = {0, cur, cur - 1};
    for (int f = 0; f < 3; f++) {
        int j = forced[f], dup = 0;
        for (int k = 0; k < cnt; k++) dup |= chosen[k] == j;
        if (j >= 0 && !dup) chosen[cnt++] = j;
    }
    const int want = n - cnt, nc = cur - 2;
    if (nc > 0 && want > 0) {
        uint32_t v = 0; /* with nc <= want every candidate is at or above it */
        if (nc > want)
            for (int bit = 31; bit >= 0; bit--) {
                const uint32_t c = v | 1u << bit;
                const int at_least = nsa_count_at_least(imp, nc, nsa_key_float(c));
                if (at_least >= want) v = c;
                if (at_least == want) break;
            }
        /* those at v that fit after the ones above it */
        int ties = want - (v == UINT32_MAX ? 0 : nsa_count_at_least(imp, nc, nsa_key_float(v + 1)));
        int kept = 0;
        for (int j = 1; j <= nc && kept < want; j++) {
            const uint32_t k = nsa_order_key(imp[j]);
            if (k > v || (k == v && ties-- > 0)) chosen[cnt + kept++] = j;
        }
        cnt += kept;
    }
    /* ascending: the forced 0 first, the candidates ascending, the forced t/l' - 1 and t/l' last */
    for (int a = 1; a < cnt; a++) {
        int x = chosen[a], b = a;
        while (b > 0 && chosen[b - 1] > x) { chosen[b] = chosen[b - 1]; b--; }
        chosen[b] = x;
    }
    for (int k = cnt; k < n; k++) chosen[k] = -1;
    return cnt;
}

#endif
