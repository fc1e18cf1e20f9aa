/* The counterfactual task: contextual faithfulness without a judge (see
 * tasks.h and docs/tasks.md). */
#include <stdlib.h>
#include <string.h>

#include "tasks/tasks.h"

static int uniform(da_rng *r, int n) { return (int)(da_rng_next(r) % (uint64_t)n); }

/* splitmix64: W(e) is a hash of (facts_seed, e), so the table needs no storage
 * and every process draws the same one. */
static uint64_t mix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

int da_cf_fact(const da_task_config *c, int entity) {
    return (int)(mix64(c->facts_seed ^ mix64((uint64_t)entity)) % (uint64_t)c->attributes);
}
int da_cf_entity_token(const da_task_config *c, int e) { (void)c; return 2 + e; }
int da_cf_attribute_token(const da_task_config *c, int a) { return 2 + c->entities + a; }

int da_cf_queries_per_episode(const da_task_config *c) {
    const int n = (c->seq - 2 * c->context_pairs) / 3;
    return n < c->context_pairs ? n : c->context_pairs;
}

/* n distinct entities into out (n <= E). */
static void distinct_entities(const da_task_config *c, da_rng *r, int n, int *out) {
    for (int i = 0; i < n; i++) {
        int e, dup;
        do {
            e = uniform(r, c->entities);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= out[j] == e;
        } while (dup);
        out[i] = e;
    }
}

/* A counterfactual attribute of e: uniform over the A - 1 others. */
static int counterfactual(const da_task_config *c, da_rng *r, int e) {
    return (da_cf_fact(c, e) + 1 + uniform(r, c->attributes - 1)) % c->attributes;
}

/* T/3 facts `Q e W(e)` of distinct entities, then padding. */
static int memory_sequence(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    const int T = c->seq, n = T / 3 < c->entities ? T / 3 : c->entities;
    int *ents = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    for (int t = 0; t < T; t++) tok[t] = DA_CF_PAD, tgt[t] = -1, src ? src[t] = -1 : 0;
    if (!ents) return 0;
    distinct_entities(c, r, n, ents);
    for (int i = 0; i < n; i++) {
        const int t = 3 * i, a = da_cf_attribute_token(c, da_cf_fact(c, ents[i]));
        tok[t] = DA_CF_QUERY, tok[t + 1] = da_cf_entity_token(c, ents[i]), tok[t + 2] = a;
        tgt[t + 1] = a;
    }
    free(ents);
    return n;
}

int da_cf_episode(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src, da_cf_query *q) {
    const int T = c->seq, K = c->context_pairs, nq = da_cf_queries_per_episode(c);
    int *ents = malloc((size_t)(K + nq) * sizeof(int)), *attr = malloc((size_t)K * sizeof(int));
    int *slot = malloc((size_t)K * sizeof(int)), *cond = malloc((size_t)nq * sizeof(int));
    for (int t = 0; t < T; t++) tok[t] = DA_CF_PAD, tgt[t] = -1, src ? src[t] = -1 : 0;
    if (!ents || !attr || !slot || !cond) {
        free(ents), free(attr), free(slot), free(cond);
        return 0;
    }
    /* conditions first: the in-context queries take context pairs 0, 1, ... in order */
    int m = 0;
    for (int j = 0; j < nq; j++) m += (cond[j] = uniform(r, 3)) != DA_CF_ABSENT;
    distinct_entities(c, r, K + nq, ents); /* [0, K): the context; [K, K + nq): absent entities */
    for (int i = 0, j = 0; i < K; i++) {
        while (i < m && cond[j] == DA_CF_ABSENT) j++;
        const int cf = i < m ? cond[j++] == DA_CF_COUNTER : uniform(r, 2); /* distractors: either, 1/2 each */
        attr[i] = cf ? counterfactual(c, r, ents[i]) : da_cf_fact(c, ents[i]);
    }
    for (int i = 0; i < K; i++) slot[i] = i;
    for (int i = K - 1; i > 0; i--) { /* the pairs in a random order */
        const int j = uniform(r, i + 1), s = slot[i];
        slot[i] = slot[j], slot[j] = s;
    }
    for (int i = 0; i < K; i++) {
        tok[2 * slot[i]] = da_cf_entity_token(c, ents[i]);
        tok[2 * slot[i] + 1] = da_cf_attribute_token(c, attr[i]);
    }
    for (int j = 0, pair = 0, absent = 0; j < nq; j++) {
        const int t = 2 * K + 3 * j, in = cond[j] != DA_CF_ABSENT;
        const int e = in ? ents[pair] : ents[K + absent];
        const int w = da_cf_attribute_token(c, da_cf_fact(c, e));
        const int ans = in ? da_cf_attribute_token(c, attr[pair]) : w;
        tok[t] = DA_CF_QUERY, tok[t + 1] = da_cf_entity_token(c, e), tok[t + 2] = ans;
        tgt[t + 1] = ans;
        if (src && in) src[t + 1] = 2 * slot[pair];
        if (q) q[j] = (da_cf_query){t + 1, cond[j], e, ans, w};
        in ? pair++ : absent++;
    }
    free(ents), free(attr), free(slot), free(cond);
    return nq;
}

int da_cf_sample(const da_task_config *c, da_rng *r, int *tok, int *tgt, int *src) {
    if (da_rng_uniform(r) < c->memory_share) return memory_sequence(c, r, tok, tgt, src);
    return da_cf_episode(c, r, tok, tgt, src, NULL);
}

da_status da_cf_validate(const da_task_config *c) {
    const int K = c->context_pairs;
    if (c->entities < 2 || c->attributes < 2)
        return da_errorf("counterfactual: entities %d and attributes %d must be at least 2", c->entities, c->attributes);
    if (c->vocab < 2 + c->entities + c->attributes)
        return da_errorf("counterfactual: vocab %d is smaller than 2 + entities + attributes = %d", c->vocab,
                         2 + c->entities + c->attributes);
    if (K < 1 || c->seq < 2 * K + 3)
        return da_errorf("counterfactual: context_pairs %d must be at least 1 and seq %d at least 2 pairs + 3 = %d "
                         "(room for one query)", K, c->seq, 2 * K + 3);
    if (c->entities < K + da_cf_queries_per_episode(c))
        return da_errorf("counterfactual: entities %d must be at least context_pairs + queries = %d", c->entities,
                         K + da_cf_queries_per_episode(c));
    if (!(c->memory_share >= 0 && c->memory_share < 1))
        return da_errorf("counterfactual: memory_share %g must lie in [0, 1)", c->memory_share);
    return da_ok();
}

/* Whether token p is the attribute of a context pair other than entity e's. */
static int is_other_context_value(const da_task_config *c, const int *tokens, int e, int p) {
    const int et = da_cf_entity_token(c, e);
    for (int i = 0; i < c->context_pairs; i++)
        if (tokens[2 * i] != et && tokens[2 * i + 1] == p) return 1;
    return 0;
}

void da_cf_score(const da_task_config *c, const int *tokens, const da_cf_query *q, int n_q, const int *pred,
                 da_cf_counts *out) {
    for (int j = 0; j < n_q; j++) {
        const int k = q[j].condition, p = pred[j];
        out->n[k]++;
        if (p == q[j].answer) out->right[k]++;
        else if (k == DA_CF_COUNTER && p == q[j].memory) out->leak++;
        else if (is_other_context_value(c, tokens, q[j].entity, p)) out->binding[k]++;
    }
}

da_status da_cf_evaluate(da_model *m, const da_task_config *t, int episodes, uint64_t seed, da_cf_counts *out) {
    da_status st = da_cf_validate(t);
    if (st.code) return st;
    if (t->vocab > m->cfg.vocab_size || t->seq > m->cfg.max_seq_len)
        return da_errorf("counterfactual: the task (vocab %d, seq %d) exceeds the model (vocab_size %d, max_seq_len %d)",
                         t->vocab, t->seq, m->cfg.vocab_size, m->cfg.max_seq_len);
    const int B = 16, T = t->seq, V = m->cfg.vocab_size, nq = da_cf_queries_per_episode(t);
    int *tok = malloc((size_t)B * T * sizeof(int)), *tgt = malloc((size_t)T * sizeof(int));
    da_cf_query *q = malloc((size_t)B * nq * sizeof *q);
    int *pred = malloc((size_t)nq * sizeof(int));
    da_acts *a = NULL;
    if (!tok || !tgt || !q || !pred) st = da_errorf("out of memory for the counterfactual evaluation");
    if (!st.code) st = da_acts_create(&a, &m->cfg, B, T);
    memset(out, 0, sizeof *out);
    da_rng r;
    da_rng_seed(&r, seed);
    for (int i = 0; i < episodes && !st.code; i += B) {
        const int b = episodes - i < B ? episodes - i : B;
        for (int s = 0; s < b; s++) da_cf_episode(t, &r, tok + (size_t)s * T, tgt, NULL, q + (size_t)s * nq);
        da_forward(m, a, tok, NULL, b, T);
        const float *lg = da_acts_logits(a);
        for (int s = 0; s < b; s++) {
            for (int j = 0; j < nq; j++) {
                const float *z = lg + ((size_t)s * T + q[(size_t)s * nq + j].pos) * V;
                int best = 0;
                for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
                pred[j] = best;
            }
            da_cf_score(t, tok + (size_t)s * T, q + (size_t)s * nq, nq, pred, out);
        }
    }
    da_acts_free(a);
    free(tok), free(tgt), free(q), free(pred);
    return st;
}
