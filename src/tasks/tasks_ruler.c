/* RULER's synthetic tasks at token level: niah and its multi-key, multi-value
 * and multi-query forms, variable tracking and common-word extraction, at any
 * sequence length, and their episode scores (definitions in docs/tasks.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/tasks.h"

void da_ruler_layout_of(int vocab, da_ruler_layout *l) {
    const int k = vocab > DA_RULER_RESERVED ? (vocab - DA_RULER_RESERVED) / 4 : 0;
    l->key0 = DA_RULER_RESERVED, l->keys = k;
    l->value0 = l->key0 + k, l->values = k;
    l->filler0 = l->value0 + k, l->fillers = vocab - l->filler0;
}

int da_task_is_ruler(da_task_kind k) { return k >= DA_TASK_NIAH && k <= DA_TASK_CWE; }

static int is_niah(da_task_kind k) { return k >= DA_TASK_NIAH && k <= DA_TASK_NIAH_MULTIQUERY; }

void da_ruler_shape(const da_task_config *c, int *answer_len, int *query_keys) {
    const int N = c->needles, m = c->value_len;
    switch (c->kind) {
    case DA_TASK_NIAH:
    case DA_TASK_NIAH_MULTIKEY: *answer_len = m, *query_keys = 1; break;
    case DA_TASK_NIAH_MULTIVALUE: *answer_len = N * m, *query_keys = 1; break;
    case DA_TASK_NIAH_MULTIQUERY: *answer_len = N * m, *query_keys = N; break;
    case DA_TASK_VT: *answer_len = c->hops + 1, *query_keys = 1; break;
    default: *answer_len = N, *query_keys = 0; /* cwe: the marker alone asks */
    }
}

/* The needles in the context: niah has one; the multi forms `needles`. */
static int n_needles(const da_task_config *c) { return c->kind == DA_TASK_NIAH ? 1 : c->needles; }
/* Distinct keys among them: multi-value repeats its one key. */
static int n_real_keys(const da_task_config *c) {
    return c->kind == DA_TASK_NIAH || c->kind == DA_TASK_NIAH_MULTIVALUE ? 1 : c->needles;
}

/* The context's length: what the marker, the query keys and the answer leave of T. */
static long context_len(const da_task_config *c) {
    int n, q;
    da_ruler_shape(c, &n, &q);
    return (long)c->seq - 1 - q - n;
}

/* cwe: each common word's count, about cw_ratio times an uncommon word's when
 * the C context tokens hold N common words and cycle through U uncommon ones:
 * max(2, ceil(ratio C / (ratio N + U))). */
static long cwe_common_count(const da_task_config *c, long C, int U) {
    const double f = ceil(c->cw_ratio * (double)C / (c->cw_ratio * c->needles + U));
    return f > 2 ? (long)f : 2;
}

static int uniform(da_rng *r, int n) { return (int)(da_rng_next(r) % (uint64_t)n); }

da_status da_ruler_validate(const da_task_config *c, const char *name) {
    da_ruler_layout L;
    da_ruler_layout_of(c->vocab, &L);
    if (c->seq < 1 || c->seq > 1 << 20) return da_errorf("%s: seq %d (--seq) must lie in 1..%d", name, c->seq, 1 << 20);
    if (!(c->noise >= 0 && c->noise < 1))
        return da_errorf("%s: noise %g (--noise) must lie in [0, 1): the share of the haystack that is distractors",
                         name, c->noise);
    if (c->n_depths < 0 || c->n_depths > DA_TASK_MAX_DEPTHS)
        return da_errorf("%s: %d depths (--depths); at most %d", name, c->n_depths, DA_TASK_MAX_DEPTHS);
    for (int i = 0; i < c->n_depths; i++)
        if (!(c->depths[i] >= 0 && c->depths[i] <= 1))
            return da_errorf("%s: depth %g (--depths) must lie in [0, 1] (the share of the haystack before a needle)",
                             name, c->depths[i]);
    if (L.keys < 2 || L.fillers < 2)
        return da_errorf("%s: vocab %d (--vocab) is too small for the reserved tokens, keys, values and filler "
                         "(at least 16)", name, c->vocab);
    const int distract = c->noise > 0;
    int n, q;
    long need;
    if (is_niah(c->kind)) {
        if (c->value_len < 1 || c->value_len > 1024)
            return da_errorf("%s: value_len %d (--value-len) must lie in 1..1024", name, c->value_len);
        if (c->needles < 1 || c->needles > 1024)
            return da_errorf("%s: needles %d (--needles) must lie in 1..1024", name, c->needles);
        da_ruler_shape(c, &n, &q);
        /* the asked keys are never a distractor's, and no other value token is an answer token */
        if (n_real_keys(c) + distract > L.keys)
            return da_errorf("%s: vocab %d has %d keys, too few for %d distinct needle keys%s (raise --vocab or lower "
                             "--needles)", name, c->vocab, L.keys, n_real_keys(c), distract ? " and a distractor's" : "");
        if (n + 1 > L.values)
            return da_errorf("%s: vocab %d has %d values, too few for an answer of %d tokens and a distractor value "
                             "outside it (raise --vocab, or lower --needles or --value-len)", name, c->vocab, L.values, n);
        need = (long)n_needles(c) * (1 + c->value_len);
    } else if (c->kind == DA_TASK_VT) {
        if (c->hops < 1 || c->hops > 1024) return da_errorf("vt: hops %d (--hops) must lie in 1..1024", c->hops);
        if ((c->hops + 1) * (1 + distract) > L.keys)
            return da_errorf("vt: vocab %d has %d variables, too few for %d chain variables%s (raise --vocab or lower "
                             "--hops)", c->vocab, L.keys, c->hops + 1, distract ? " and a distractor chain's" : "");
        need = 3L * (c->hops + 1);
    } else {
        if (c->needles < 1 || c->needles + 1 > L.fillers)
            return da_errorf("cwe: needles %d (--needles: the common words) must lie in 1..%d, the words of vocab %d "
                             "less one", c->needles, L.fillers - 1, c->vocab);
        if (!(c->cw_ratio >= 2 && c->cw_ratio <= 1e6))
            return da_errorf("cwe: cw_ratio %g (--cw-ratio) must lie in [2, 1e6]", c->cw_ratio);
        const long C = context_len(c);
        need = C < 1 ? 2L * c->needles : cwe_common_count(c, C, L.fillers - c->needles) * c->needles;
    }
    if (context_len(c) < need)
        return da_errorf("%s: seq %d (--seq) is too short: the query, the answer and the %s need %ld tokens (lower "
                         "%s)", name, c->seq, c->kind == DA_TASK_CWE ? "common words" : "needles",
                         c->seq - context_len(c) + need,
                         c->kind == DA_TASK_VT ? "--hops" : c->kind == DA_TASK_CWE ? "--needles" : "--needles or --value-len");
    return da_ok();
}

/* The haystack unit after which a needle goes: floor(d n_units), d its depth. */
static int gap_of(const da_task_config *c, da_rng *r, int n_units) {
    const double d = c->n_depths ? c->depths[uniform(r, c->n_depths)] : (double)da_rng_uniform(r);
    const int g = (int)floor(d * n_units);
    return g < n_units ? g : n_units;
}

/* The query and the answer after the context tok[0..C): the marker, the q
 * keys, then the n answer tokens, each the target of the position before it
 * (src there: asrc[j]); interleaved, in q groups, each key followed by its
 * n/q answer tokens. Returns n. */
static int finish(int C, const int *qkeys, int q, const int *ans, const int *asrc, int n, int interleave, int *tok,
                  int *tgt, int *src) {
    int pos = C;
    tok[pos++] = DA_RULER_QUERY;
    const int groups = interleave ? q : 1;
    for (int g = 0; g < groups; g++) {
        for (int i = g * q / groups; i < (g + 1) * q / groups; i++) tok[pos++] = qkeys[i];
        for (int j = g * n / groups; j < (g + 1) * n / groups; j++) {
            tgt[pos - 1] = ans[j];
            if (src) src[pos - 1] = asrc[j];
            tok[pos++] = ans[j];
        }
    }
    return n;
}

static int out_of_memory(const da_task_config *c, int *tok, int *tgt, void *a, void *b) {
    free(a), free(b);
    for (int t = 0; t < c->seq; t++) tok[t] = 0, tgt[t] = -1;
    return 0;
}

/* niah*: N needles `k v_1 .. v_m` at their depths among the haystack's units
 * (filler tokens, and distractor needles whose keys are never asked and whose
 * values share no token with the answer), then the query. */
static int sample_niah(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    da_ruler_layout L;
    da_ruler_layout_of(c->vocab, &L);
    int n, q;
    da_ruler_shape(c, &n, &q);
    const int m = c->value_len, nn = n_needles(c), rk = n_real_keys(c), unit = 1 + m;
    const int C = (int)context_len(c), R = C - nn * unit;
    const int n_d = (int)floor(c->noise * R / unit), n_u = R - n_d * unit + n_d;
    /* keys (rk), values (nn m), gap, order, kpos (nn), ans, asrc (n), qkeys (q) */
    int *buf = malloc(((size_t)rk + (size_t)nn * (m + 3) + 2 * (size_t)n + q) * sizeof(int));
    unsigned char *mark = calloc((size_t)c->vocab, 1); /* 1: a needle's key, 2: an answer token */
    if (!buf || !mark) return out_of_memory(c, tok, tgt, buf, mark);
    int *keys = buf, *val = keys + rk, *gap = val + (size_t)nn * m, *order = gap + nn, *kpos = order + nn;
    int *ans = kpos + nn, *asrc = ans + n, *qkeys = asrc + n;
    for (int t = 0; t < c->seq; t++) tgt[t] = -1, src ? src[t] = -1 : 0;
    for (int i = 0; i < rk; i++) {
        int k;
        do k = L.key0 + uniform(r, L.keys); while (mark[k]);
        mark[k] = 1, keys[i] = k;
    }
    const int one = c->kind == DA_TASK_NIAH ? 0 : c->kind == DA_TASK_NIAH_MULTIKEY ? uniform(r, nn) : -1;
    for (int pass = 0; pass < 2; pass++) /* the asked needles' values first: the others avoid their tokens */
        for (int i = 0; i < nn; i++) {
            if ((one < 0 || i == one) != !pass) continue;
            for (int j = 0; j < m; j++) {
                int v;
                do v = L.value0 + uniform(r, L.values); while (pass && mark[v] == 2);
                val[i * m + j] = v;
                if (!pass) mark[v] = 2;
            }
        }
    for (int i = 0; i < nn; i++) { /* text order: by gap, ties in needle order */
        gap[i] = gap_of(c, r, n_u);
        int j = i;
        for (; j > 0 && gap[order[j - 1]] > gap[i]; j--) order[j] = order[j - 1];
        order[j] = i;
    }
    int pos = 0, left = n_d, next = 0;
    for (int s = 0; s <= n_u; s++) {
        while (next < nn && gap[order[next]] == s) {
            const int i = order[next++];
            kpos[i] = pos, tok[pos++] = keys[rk == 1 ? 0 : i];
            for (int j = 0; j < m; j++) tok[pos++] = val[i * m + j];
        }
        if (s == n_u) break;
        if (uniform(r, n_u - s) < left) { /* selection sampling: exactly n_d of the units are distractors */
            left--;
            int k, v;
            do k = L.key0 + uniform(r, L.keys); while (mark[k] == 1);
            tok[pos++] = k;
            for (int j = 0; j < m; j++) {
                do v = L.value0 + uniform(r, L.values); while (mark[v] == 2);
                tok[pos++] = v;
            }
        } else {
            tok[pos++] = L.filler0 + uniform(r, L.fillers);
        }
    }
    int na = 0;
    if (c->kind == DA_TASK_NIAH_MULTIQUERY) { /* every key, in a random order */
        for (int i = 0; i < nn; i++) qkeys[i] = i;
        for (int i = nn - 1; i > 0; i--) {
            const int j = uniform(r, i + 1), t = qkeys[i];
            qkeys[i] = qkeys[j], qkeys[j] = t;
        }
        for (int i = 0; i < nn; i++) {
            const int w = qkeys[i];
            for (int j = 0; j < m; j++) ans[na] = val[w * m + j], asrc[na++] = kpos[w] + j;
            qkeys[i] = keys[w];
        }
    } else if (c->kind == DA_TASK_NIAH_MULTIVALUE) { /* the values in order of appearance */
        qkeys[0] = keys[0];
        for (int o = 0; o < nn; o++)
            for (int j = 0; j < m; j++) ans[na] = val[order[o] * m + j], asrc[na++] = kpos[order[o]] + j;
    } else {
        qkeys[0] = keys[rk == 1 ? 0 : one];
        for (int j = 0; j < m; j++) ans[na] = val[one * m + j], asrc[na++] = kpos[one] + j;
    }
    finish(C, qkeys, q, ans, asrc, n, c->interleave, tok, tgt, src);
    free(buf), free(mark);
    return n;
}

/* One vt statement `x = rhs` at pos. */
static int statement(int *tok, int pos, int x, int rhs) {
    tok[pos] = x, tok[pos + 1] = DA_RULER_ASSIGN, tok[pos + 2] = rhs;
    return pos + 3;
}

/* vt: the asked chain `X_0 = v`, `X_1 = X_0`, ... (hops + 1 statements at
 * sorted depths), distractor chains of the same form (variables outside the
 * asked chain's, values other than v) interleaved at random among the
 * filler, each in its own order; then `Q v` and the answer X_0 .. X_hops. */
static int sample_vt(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    da_ruler_layout L;
    da_ruler_layout_of(c->vocab, &L);
    const int nv = c->hops + 1, C = (int)context_len(c), R = C - 3 * nv;
    const int n_ch = (int)floor(c->noise * R / (3 * nv)), n_d = n_ch * nv, n_u = R - 3 * n_d + n_d;
    /* vars, gap, spos, asrc (nv); chain vars (n_ch nv); chain values, progress (n_ch); ids (n_d) */
    int *buf = malloc((4 * (size_t)nv + (size_t)n_ch * (nv + 2) + (size_t)n_d) * sizeof(int));
    unsigned char *mark = calloc((size_t)c->vocab, 1); /* 1: a variable of the asked chain */
    if (!buf || !mark) return out_of_memory(c, tok, tgt, buf, mark);
    int *vars = buf, *gap = vars + nv, *spos = gap + nv, *asrc = spos + nv, *cvars = asrc + nv;
    int *cval = cvars + (size_t)n_ch * nv, *prog = cval + n_ch, *ids = prog + n_ch;
    for (int t = 0; t < c->seq; t++) tgt[t] = -1, src ? src[t] = -1 : 0;
    for (int j = 0; j < nv; j++) {
        int x;
        do x = L.key0 + uniform(r, L.keys); while (mark[x]);
        mark[x] = 1, vars[j] = x;
    }
    const int v = L.value0 + uniform(r, L.values);
    for (int h = 0; h < n_ch; h++) {
        int *cv = cvars + (size_t)h * nv;
        for (int j = 0; j < nv; j++) { /* distinct within the chain, none of the asked chain's */
            int x, dup;
            do {
                x = L.key0 + uniform(r, L.keys), dup = mark[x];
                for (int i = 0; i < j; i++) dup |= cv[i] == x;
            } while (dup);
            cv[j] = x;
        }
        do cval[h] = L.value0 + uniform(r, L.values); while (cval[h] == v);
        prog[h] = 0;
        for (int j = 0; j < nv; j++) ids[h * nv + j] = h;
    }
    for (int i = n_d - 1; i > 0; i--) { /* the order in which the distractor chains' statements come */
        const int j = uniform(r, i + 1), t = ids[i];
        ids[i] = ids[j], ids[j] = t;
    }
    for (int j = 0; j < nv; j++) { /* sorted gaps: the asked chain in its own order */
        const int g = gap_of(c, r, n_u);
        int i = j;
        for (; i > 0 && gap[i - 1] > g; i--) gap[i] = gap[i - 1];
        gap[i] = g;
    }
    int pos = 0, left = n_d, next = 0;
    for (int s = 0; s <= n_u; s++) {
        for (; next < nv && gap[next] == s; next++)
            spos[next] = pos, pos = statement(tok, pos, vars[next], next ? vars[next - 1] : v);
        if (s == n_u) break;
        if (uniform(r, n_u - s) < left) {
            const int h = ids[n_d - left--], j = prog[h]++, *cv = cvars + (size_t)h * nv;
            pos = statement(tok, pos, cv[j], j ? cv[j - 1] : cval[h]);
        } else {
            tok[pos++] = L.filler0 + uniform(r, L.fillers);
        }
    }
    for (int j = 0; j < nv; j++) asrc[j] = spos[j] - 1; /* src + 1: the variable's statement */
    finish(C, &v, 1, vars, asrc, nv, 0, tok, tgt, src);
    free(buf), free(mark);
    return nv;
}

/* cwe: a shuffled list of C words from the filler range, N common words
 * f_c times each, the other words of the range (in a random order) cycled
 * through for the rest; then the marker and the common words in order of
 * first appearance. */
static int sample_cwe(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    da_ruler_layout L;
    da_ruler_layout_of(c->vocab, &L);
    const int N = c->needles, F = L.fillers, U = F - N, C = (int)context_len(c);
    const long fc = cwe_common_count(c, C, U), rest = C - N * fc;
    int *buf = malloc(((size_t)F + N) * sizeof(int));
    unsigned char *mark = calloc((size_t)c->vocab, 1); /* 1: a common word, 2: one already answered */
    if (!buf || !mark) return out_of_memory(c, tok, tgt, buf, mark);
    int *perm = buf, *ans = buf + F;
    for (int t = 0; t < c->seq; t++) tgt[t] = -1, src ? src[t] = -1 : 0;
    for (int i = 0; i < F; i++) perm[i] = L.filler0 + i;
    for (int i = F - 1; i > 0; i--) {
        const int j = uniform(r, i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    int pos = 0;
    for (int i = 0; i < N; i++)
        for (long k = 0; k < fc; k++) tok[pos++] = perm[i], mark[perm[i]] = 1;
    for (int u = 0; u < U; u++)
        for (long k = 0; k < rest / U + (u < rest % U); k++) tok[pos++] = perm[N + u];
    for (int i = C - 1; i > 0; i--) {
        const int j = uniform(r, i + 1), t = tok[i];
        tok[i] = tok[j], tok[j] = t;
    }
    int na = 0;
    for (int t = 0; t < C; t++)
        if (mark[tok[t]] == 1) ans[na++] = tok[t], mark[tok[t]] = 2;
    finish(C, NULL, 0, ans, NULL, N, 0, tok, tgt, NULL); /* no one source: src stays -1 */
    free(buf), free(mark);
    return N;
}

int da_ruler_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src) {
    if (c->kind == DA_TASK_VT) return sample_vt(c, r, tokens, targets, src);
    if (c->kind == DA_TASK_CWE) return sample_cwe(c, r, tokens, targets, src);
    return sample_niah(c, r, tokens, targets, src);
}

/* ---------------------------------------------------------------- scores */

void da_ruler_count(const int *targets, const int *pred, int b, int T, da_ruler_counts *out) {
    for (int i = 0; i < b; i++) {
        long n = 0, right = 0;
        for (int t = 0; t < T; t++) {
            const size_t p = (size_t)i * T + t;
            if (targets[p] >= 0) n++, right += pred[p] == targets[p];
        }
        if (!n) continue;
        out->episodes++, out->right += right == n, out->tokens += n, out->tokens_right += right;
    }
}

void da_ruler_count_logits(const int *targets, const float *logits, int b, int T, int V, da_ruler_counts *out) {
    for (int i = 0; i < b; i++) {
        long n = 0, right = 0;
        for (int t = 0; t < T; t++) {
            const size_t p = (size_t)i * T + t;
            if (targets[p] < 0) continue;
            const float *z = logits + p * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
            n++, right += best == targets[p];
        }
        if (!n) continue;
        out->episodes++, out->right += right == n, out->tokens += n, out->tokens_right += right;
    }
}

void da_score_episodes(void *self, const int *targets, const float *logits, int b, int T, int V, long *right,
                       long *total) {
    da_ruler_counts k = {0, 0, 0, 0};
    (void)self;
    da_ruler_count_logits(targets, logits, b, T, V, &k);
    *right += k.right, *total += k.episodes;
}
