/* Synthetic retrieval tasks (see tasks.h and docs/tasks.md). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/tasks.h"

void da_task_config_default(da_task_config *c, da_task_kind kind) {
    memset(c, 0, sizeof *c);
    c->kind = kind;
    /* mqar: the demo's task (docs/results.md: the first size a 2-layer model
     * learned within the demo's budget); noisy-recall: MAD's vocabulary of 32
     * with 16 noise tokens, at half MAD's sequence of 128 */
    c->seq = kind == DA_TASK_MQAR ? 32 : 64;
    c->vocab = 32;
    c->pairs = 4;
    c->alpha = 0.01;          /* Zoology's power_a */
    c->noise = 0.2;           /* MAD's noisy recall at sequence 128 */
    c->noise_vocab = 16;      /* MAD's noise_vocab_size */
    /* icl: 8 demos of 16 symbols in 4 classes (seq 18), a few-shot prompt at the scale of the other tasks */
    c->demos = 8;
    c->classes = 4;
    c->symbols = 16;
    if (kind == DA_TASK_ICL) c->seq = 2 * c->demos + 2;
    /* counterfactual: 512 facts of 64 attributes, 4 context pairs and 4 queries in 20 tokens, a third of the training
     * sequences stating facts (docs/tasks.md) */
    c->entities = 512;
    c->attributes = 64;
    c->context_pairs = 4;
    c->memory_share = 1.0 / 3;
    c->facts_seed = 0xFAC75ULL;
    if (kind == DA_TASK_COUNTERFACTUAL) c->seq = 2 * c->context_pairs + 3 * c->context_pairs, c->vocab = 2 + 512 + 64;
    /* RULER's tasks: synthetic.yaml's 4 needles, 4 hops and 10 common words, its plain haystack (no distractors),
     * one-token values; seq 256 and vocab 256 (63 keys, 63 values, 127 filler tokens) as issue 32 trains them */
    c->value_len = 1;
    c->needles = kind == DA_TASK_CWE ? 10 : 4;
    c->hops = 4;
    c->cw_ratio = 6; /* RULER's cwe below 4K: common words 6 times, the others once */
    if (da_task_is_ruler(kind)) c->seq = 256, c->vocab = 256, c->noise = 0;
}

int da_task_is_noise(const da_task_config *c, int token) {
    return c->kind == DA_TASK_NOISY_RECALL && token >= c->vocab - c->noise_vocab;
}

static int uniform(da_rng *r, int n) { return (int)(da_rng_next(r) % (uint64_t)n); }

/* Zoology's MQAR: pairs (k_i, v_i), keys distinct from [1, V/2), values
 * distinct from [V/2, V); then `space` two-token query slots, key i asked in
 * slot g_i (distinct, drawn without replacement with weight (g+1)^(alpha-1));
 * the target at the asked key is its value. Every other position is a random
 * token other than one of this sequence's keys, so each answer is unique. */
static int sample_mqar(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    const int T = c->seq, P = c->pairs, V = c->vocab, half = V / 2, space = (T - 2 * P) / 2;
    int keys[512], *is_key = calloc((size_t)V, sizeof(int));
    double *w = malloc((size_t)space * sizeof(double));
    if (!is_key || !w) { /* tiny; treat as no sample rather than crash */
        free(is_key), free(w);
        for (int t = 0; t < T; t++) tok[t] = 0, tgt[t] = -1;
        return 0;
    }
    for (int t = 0; t < T; t++) tgt[t] = -1, src ? src[t] = -1 : 0;
    for (int i = 0; i < P; i++) {
        int k;
        do k = 1 + uniform(r, half - 1); while (is_key[k]);
        is_key[k] = 1, keys[i] = k;
        int v, dup;
        do {
            v = half + uniform(r, V - half);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= tok[2 * j + 1] == v;
        } while (dup);
        tok[2 * i] = k, tok[2 * i + 1] = v;
    }
    for (int t = 2 * P; t < T; t++) { /* filler first; queries overwrite their slots */
        int x;
        do x = uniform(r, V); while (is_key[x]);
        tok[t] = x;
    }
    double total = 0;
    for (int g = 0; g < space; g++) total += w[g] = pow(g + 1.0, c->alpha - 1.0);
    for (int i = 0; i < P; i++) {
        double u = da_rng_uniform(r) * total;
        int g = -1;
        for (int j = 0; j < space; j++) { /* g: the last free slot when rounding runs past the end */
            if (w[j] == 0) continue;
            g = j;
            if (u < w[j]) break;
            u -= w[j];
        }
        total -= w[g], w[g] = 0;
        const int t = 2 * P + 2 * g;
        tok[t] = keys[i], tgt[t] = tok[2 * i + 1];
        if (src) src[t] = 2 * i;
    }
    free(is_key), free(w);
    return P;
}

/* MAD's noisy in-context recall, multi-query: T/2 two-token slots, each noise
 * (two tokens from the noise vocabulary) with probability `noise`, else a
 * key from [0, K) and its value from [K, 2K), K = (V - noise_vocab)/2, one
 * value per key for the whole sequence. The value of a key seen before is an
 * answer. One slot before the last is always a pair, and the last slot asks
 * a key seen before (MAD's probe), so every sequence has an answer. */
static int sample_noisy(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    const int T = c->seq, slots = T / 2, K = (c->vocab - c->noise_vocab) / 2, noise0 = c->vocab - c->noise_vocab;
    int *value_of = malloc((size_t)K * sizeof(int)), *last_at = malloc((size_t)K * sizeof(int));
    if (!value_of || !last_at) {
        free(value_of), free(last_at);
        for (int t = 0; t < T; t++) tok[t] = 0, tgt[t] = -1;
        return 0;
    }
    for (int k = 0; k < K; k++) value_of[k] = -1, last_at[k] = -1;
    for (int t = 0; t < T; t++) tgt[t] = -1, src ? src[t] = -1 : 0;
    const int forced = uniform(r, slots - 1);
    int answers = 0;
    for (int s = 0; s < slots; s++) {
        const int t = 2 * s;
        int k;
        if (s == slots - 1) { /* the probe: a key already presented */
            int seen = 0;
            for (int j = 0; j < K; j++) seen += last_at[j] >= 0;
            int pick = uniform(r, seen);
            for (k = 0; k < K; k++)
                if (last_at[k] >= 0 && pick-- == 0) break;
        } else if (s != forced && da_rng_uniform(r) < c->noise) {
            tok[t] = noise0 + uniform(r, c->noise_vocab), tok[t + 1] = noise0 + uniform(r, c->noise_vocab);
            continue;
        } else {
            k = uniform(r, K);
        }
        if (value_of[k] < 0) value_of[k] = K + uniform(r, K);
        tok[t] = k, tok[t + 1] = value_of[k];
        if (last_at[k] >= 0) {
            tgt[t] = value_of[k];
            if (src) src[t] = last_at[k];
            answers++;
        }
        last_at[k] = t;
    }
    free(value_of), free(last_at);
    return answers;
}

/* ---------------------------------------------------------------- icl */

void da_icl_episode_sample(const da_task_config *c, da_rng *r, da_icl_episode *e) {
    e->demos = c->demos;
    for (int s = 0; s < c->symbols; s++) e->label[s] = c->symbols + uniform(r, c->classes);
    for (int i = 0; i < c->demos; i++) e->x[i] = uniform(r, c->symbols);
}

int da_icl_queries(const da_icl_episode *e, int *symbols) {
    int n = 0;
    for (int i = 0; i < e->demos; i++) {
        int seen = 0;
        for (int j = 0; j < n; j++) seen |= symbols[j] == e->x[i];
        if (!seen) symbols[n++] = e->x[i];
    }
    return n;
}

void da_icl_order_random(int k, da_rng *r, int *order) {
    for (int i = 0; i < k; i++) order[i] = i;
    for (int i = k - 1; i > 0; i--) { /* Fisher-Yates */
        const int j = uniform(r, i + 1), t = order[i];
        order[i] = order[j], order[j] = t;
    }
}

/* The classes present in e, in a random order (their label tokens); returns how many. */
static int classes_present(const da_task_config *c, const da_icl_episode *e, da_rng *r, int *cls) {
    int n = 0;
    for (int k = 0; k < c->classes; k++) {
        const int label = c->symbols + k;
        for (int i = 0; i < e->demos; i++)
            if (e->label[e->x[i]] == label) {
                cls[n++] = label;
                break;
            }
    }
    for (int i = n - 1; i > 0; i--) {
        const int j = uniform(r, i + 1), t = cls[i];
        cls[i] = cls[j], cls[j] = t;
    }
    return n;
}

void da_icl_order_grouped(const da_task_config *c, const da_icl_episode *e, da_rng *r, int *order) {
    int cls[DA_ICL_MAX_SYMBOLS], n = 0;
    const int nc = classes_present(c, e, r, cls);
    for (int k = 0; k < nc; k++)
        for (int i = 0; i < e->demos; i++)
            if (e->label[e->x[i]] == cls[k]) order[n++] = i;
}

void da_icl_order_alternating(const da_task_config *c, const da_icl_episode *e, da_rng *r, int *order) {
    int cls[DA_ICL_MAX_SYMBOLS], next[DA_ICL_MAX_SYMBOLS] = {0}, n = 0; /* next[k]: class k's next demo to place */
    const int nc = classes_present(c, e, r, cls);
    while (n < e->demos)
        for (int k = 0; k < nc; k++) {
            while (next[k] < e->demos && e->label[e->x[next[k]]] != cls[k]) next[k]++;
            if (next[k] < e->demos) order[n++] = next[k]++;
        }
}

void da_icl_write(const da_icl_episode *e, const int *order, int q, int *tokens, int *targets, int *src) {
    const int K = e->demos, T = 2 * K + 2;
    for (int t = 0; t < T; t++) targets[t] = -1, src ? src[t] = -1 : 0;
    for (int i = 0; i < K; i++) {
        const int d = order ? order[i] : i;
        tokens[2 * i] = e->x[d], tokens[2 * i + 1] = e->label[e->x[d]];
        if (src && e->x[d] == q) src[2 * K] = 2 * i;
    }
    tokens[2 * K] = q, tokens[2 * K + 1] = e->label[q];
    targets[2 * K] = e->label[q];
}

/* Training and held-out accuracy: one query per sequence, the symbol of a
 * uniformly drawn demo (so a symbol shown more often is asked more often),
 * the demos in the order drawn (already uniformly random). */
static int sample_icl(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    da_icl_episode e;
    da_icl_episode_sample(c, r, &e);
    da_icl_write(&e, NULL, e.x[uniform(r, e.demos)], tok, tgt, src);
    return 1;
}

/* ---------------------------------------------------------------- checks */

static da_status validate_icl(const da_task_config *c) {
    if (c->demos < 1 || c->demos > DA_ICL_MAX_DEMOS)
        return da_errorf("icl: demos %d must lie in 1..%d", c->demos, DA_ICL_MAX_DEMOS);
    if (c->seq != 2 * c->demos + 2)
        return da_errorf("icl: seq %d must be 2 demos + 2 = %d (the demos' pairs, then the query and its label)",
                         c->seq, 2 * c->demos + 2);
    if (c->classes < 2 || c->symbols < 2 || c->symbols > DA_ICL_MAX_SYMBOLS)
        return da_errorf("icl: classes %d must be at least 2 and symbols %d in 2..%d", c->classes, c->symbols,
                         DA_ICL_MAX_SYMBOLS);
    if (c->symbols + c->classes > c->vocab)
        return da_errorf("icl: vocab %d is smaller than symbols + classes = %d (labels follow the symbols)",
                         c->vocab, c->symbols + c->classes);
    return da_ok();
}

/* mqar and noisy-recall: key-value slots of two tokens. */
static da_status validate_slots(const da_task_config *c) {
    if (c->seq < 8 || c->seq % 2) return da_errorf("task: seq %d must be even and at least 8", c->seq);
    return da_ok();
}

static da_status validate_mqar(const da_task_config *c) {
    da_status st = validate_slots(c);
    if (st.code) return st;
    if (c->pairs < 1 || 4 * c->pairs > c->seq || c->pairs > 512)
        return da_errorf("mqar: pairs %d must lie in 1..min(512, seq/4 = %d) (the queries need as many slots as the pairs)",
                         c->pairs, c->seq / 4);
    if (c->vocab / 2 - 1 < c->pairs || c->vocab - c->vocab / 2 < c->pairs)
        return da_errorf("mqar: vocab %d has too few keys or values for %d distinct pairs (need vocab >= %d)",
                         c->vocab, c->pairs, 2 * c->pairs + 2);
    if (!(c->alpha > 0 && c->alpha <= 1))
        return da_errorf("mqar: alpha %g must lie in (0, 1] (1: uniform gaps)", c->alpha);
    return da_ok();
}

static da_status validate_noisy(const da_task_config *c) {
    da_status st = validate_slots(c);
    if (st.code) return st;
    if (!(c->noise >= 0 && c->noise < 1)) return da_errorf("noisy-recall: noise %g must lie in [0, 1)", c->noise);
    if (c->noise_vocab < 1 || c->vocab - c->noise_vocab < 4)
        return da_errorf("noisy-recall: noise_vocab %d must lie in 1..vocab - 4 = %d (keys and values need the rest)",
                         c->noise_vocab, c->vocab - 4);
    return da_ok();
}

static da_status validate_ruler(const da_task_config *c) { return da_ruler_validate(c, da_task_name(c->kind)); }

/* ---------------------------------------------------------------- the tasks */

/* A task is one row: its name, its checks, the generator of its data
 * source's sequences (da_task_source), and the score of its held-out set. */
typedef struct {
    const char *name;
    da_status (*validate)(const da_task_config *c);
    int (*sample)(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);
    da_task_score_fn score;
} task_row;

/* In da_task_kind order. RULER's tasks score an episode (all of its answer tokens) as one. */
static const task_row TASKS[DA_TASK_N_KINDS] = {
    {"mqar", validate_mqar, sample_mqar, da_score_argmax},
    {"noisy-recall", validate_noisy, sample_noisy, da_score_argmax},
    {"icl", validate_icl, sample_icl, da_score_argmax},
    {"counterfactual", da_cf_validate, da_cf_sample, da_score_argmax},
    {"niah", validate_ruler, da_ruler_sample, da_score_episodes},
    {"niah-multikey", validate_ruler, da_ruler_sample, da_score_episodes},
    {"niah-multivalue", validate_ruler, da_ruler_sample, da_score_episodes},
    {"niah-multiquery", validate_ruler, da_ruler_sample, da_score_episodes},
    {"vt", validate_ruler, da_ruler_sample, da_score_episodes},
    {"cwe", validate_ruler, da_ruler_sample, da_score_episodes},
};

static int known(da_task_kind k) { return k >= 0 && k < DA_TASK_N_KINDS; }

const char *da_task_name(da_task_kind k) { return known(k) ? TASKS[k].name : "unknown"; }

int da_task_parse(const char *s, da_task_kind *out) {
    for (int k = 0; k < DA_TASK_N_KINDS; k++)
        if (!strcmp(s, TASKS[k].name)) {
            *out = (da_task_kind)k;
            return 0;
        }
    return -1;
}

da_status da_task_validate(const da_task_config *c) {
    if (!known(c->kind)) return da_errorf("task: unknown kind %d", (int)c->kind);
    if (c->interleave != 0 && (c->interleave != 1 || c->kind != DA_TASK_NIAH_MULTIQUERY))
        return da_errorf("%s: interleave %d (--interleave) applies to niah-multiquery only, and is 0 or 1",
                         da_task_name(c->kind), c->interleave);
    return TASKS[c->kind].validate(c);
}

int da_task_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src) {
    return TASKS[c->kind].sample(c, r, tokens, targets, src);
}

da_task_score_fn da_task_score(da_task_kind k) { return TASKS[k].score; }
