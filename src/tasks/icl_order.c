/* Order robustness of in-context classification (the paper's §3.5 in
 * synthetic form; docs/tasks.md): the same demonstrations in several orders,
 * each order scored on every distinct symbol of the demos. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tasks/tasks.h"

void da_icl_order_summary(const double *acc, int episodes, int perms, da_icl_order_result *r) {
    memset(r, 0, sizeof *r);
    r->episodes = episodes, r->perms = perms;
    if (episodes < 1 || perms < 1) return;
    for (int e = 0; e < episodes; e++) {
        const double *row = acc + (size_t)e * (perms + 2);
        double sum = 0, best = row[0], worst = row[0];
        for (int p = 0; p < perms; p++) {
            sum += row[p];
            best = fmax(best, row[p]), worst = fmin(worst, row[p]);
        }
        r->mean += sum / perms, r->best += best, r->worst += worst;
        r->grouped += row[perms], r->alternating += row[perms + 1];
    }
    r->mean /= episodes, r->best /= episodes, r->worst /= episodes;
    r->grouped /= episodes, r->alternating /= episodes;
    r->margin = r->best - r->worst;
}

/* A batch of sequences and the activations to run them (the scoring shared by both entry points). */
typedef struct {
    da_acts *a;
    int B;
    int *tokens, *targets; /* (B, T) */
} scorer;

static da_status scorer_open(scorer *s, const da_model *m, const da_task_config *t) {
    memset(s, 0, sizeof *s);
    s->B = 64;
    const size_t n = (size_t)s->B * t->seq;
    s->tokens = malloc(n * sizeof(int)), s->targets = malloc(n * sizeof(int));
    if (!s->tokens || !s->targets) return da_errorf("out of memory for the order evaluation's batch");
    return da_acts_create(&s->a, &m->cfg, s->B, t->seq);
}

static void scorer_close(scorer *s) {
    da_acts_free(s->a);
    free(s->tokens), free(s->targets);
}

/* acc (n): e's accuracy under each of its n orders (n, K), every distinct
 * query asked once per order; all n * queries sequences in batches of s->B. */
static void score_orders(da_model *m, scorer *s, const da_icl_episode *e, const int *orders, int n, double *acc) {
    const int K = e->demos, T = 2 * K + 2, V = m->cfg.vocab_size;
    int queries[DA_ICL_MAX_DEMOS];
    const int nq = da_icl_queries(e, queries);
    const long total = (long)n * nq;
    for (int o = 0; o < n; o++) acc[o] = 0;
    for (long i0 = 0; i0 < total; i0 += s->B) {
        const int b = total - i0 < s->B ? (int)(total - i0) : s->B;
        for (int j = 0; j < b; j++) {
            const long i = i0 + j;
            da_icl_write(e, orders + (size_t)(i / nq) * K, queries[i % nq], s->tokens + (size_t)j * T,
                         s->targets + (size_t)j * T, NULL);
        }
        da_forward(m, s->a, s->tokens, NULL, b, T);
        const float *lg = da_acts_logits(s->a);
        for (int j = 0; j < b; j++) {
            const float *z = lg + ((size_t)j * T + 2 * K) * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
            acc[(i0 + j) / nq] += best == s->targets[(size_t)j * T + 2 * K]; /* counts: exact */
        }
    }
    for (int o = 0; o < n; o++) acc[o] /= nq;
}

static da_status check_model(const da_model *m, const da_task_config *t) {
    da_status st = da_task_validate(t);
    if (st.code) return st;
    if (t->kind != DA_TASK_ICL) return da_errorf("order robustness needs the icl task, not %s", da_task_name(t->kind));
    if (t->vocab > m->cfg.vocab_size || t->seq > m->cfg.max_seq_len)
        return da_errorf("the task (vocab %d, seq %d) exceeds the model (vocab_size %d, max_seq_len %d)", t->vocab,
                         t->seq, m->cfg.vocab_size, m->cfg.max_seq_len);
    return da_ok();
}

da_status da_icl_order_accuracy(da_model *m, const da_task_config *t, const da_icl_episode *e, const int *order,
                                double *acc) {
    da_status st = check_model(m, t);
    if (st.code) return st;
    if (e->demos != t->demos) return da_errorf("icl: the episode has %d demos, the task %d", e->demos, t->demos);
    scorer s = {0};
    if (!(st = scorer_open(&s, m, t)).code) score_orders(m, &s, e, order, 1, acc);
    scorer_close(&s);
    return st;
}

da_status da_icl_order_robustness(da_model *m, const da_task_config *t, int episodes, int perms, uint64_t seed,
                                  da_icl_order_result *r) {
    da_status st = check_model(m, t);
    if (st.code) return st;
    if (episodes < 1 || perms < 2)
        return da_errorf("order robustness: %d episodes and %d orders (need at least 1 and 2)", episodes, perms);
    const int K = t->demos, n = perms + 2;
    int *orders = malloc((size_t)n * K * sizeof(int));
    double *acc = malloc((size_t)episodes * n * sizeof(double));
    da_icl_episode *e = malloc(sizeof *e);
    scorer s = {0};
    st = !orders || !acc || !e ? da_errorf("out of memory for %d episodes of %d orders", episodes, n) : da_ok();
    if (!st.code) st = scorer_open(&s, m, t);
    da_rng rng;
    da_rng_seed(&rng, seed);
    for (int i = 0; i < episodes && !st.code; i++) {
        da_icl_episode_sample(t, &rng, e);
        for (int p = 0; p < perms; p++) da_icl_order_random(K, &rng, orders + (size_t)p * K);
        da_icl_order_grouped(t, e, &rng, orders + (size_t)perms * K);
        da_icl_order_alternating(t, e, &rng, orders + (size_t)(perms + 1) * K);
        score_orders(m, &s, e, orders, n, acc + (size_t)i * n);
    }
    if (!st.code) da_icl_order_summary(acc, episodes, perms, r);
    scorer_close(&s);
    free(orders), free(acc), free(e);
    return st;
}
