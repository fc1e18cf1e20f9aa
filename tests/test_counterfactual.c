/* The counterfactual task (docs/tasks.md): its generator, and its scoring on
 * hand-built predictors: one that copies from the context is faithful on
 * every counterfactual query, one that answers from a hand-set memory leaks
 * on every one, one that answers a neighbour's attribute binds wrongly. */
#include "diffattn.h"
#include "tasks/tasks.h"
#include "harness.h"

static void small_task(da_task_config *c) {
    da_task_config_default(c, DA_TASK_COUNTERFACTUAL);
    c->entities = 64, c->attributes = 16, c->context_pairs = 6, c->seq = 2 * 6 + 3 * 6 + 2;
    c->vocab = 2 + 64 + 16;
}

/* Every episode: K context pairs of distinct entities with attributes from
 * their range, then queries `Q e answer` whose target is the context's
 * attribute (counterfactual: != W(e), agreeing: == W(e)) or W(e) when e is
 * absent from the context; src points at the context entity; padding after. */
static int test_episode_structure(void) {
    da_task_config c;
    small_task(&c);
    CHECK(!da_task_validate(&c).code);
    const int T = c.seq, K = c.context_pairs, nq = da_cf_queries_per_episode(&c);
    CHECK(nq == 6);
    int tok[64], tgt[64], src[64];
    da_cf_query q[16];
    da_rng r;
    da_rng_seed(&r, 3);
    long cond[3] = {0}, cf_pairs = 0, pairs = 0;
    for (int n = 0; n < 3000; n++) {
        CHECK(da_cf_episode(&c, &r, tok, tgt, src, q) == nq);
        for (int i = 0; i < K; i++) {
            const int e = tok[2 * i] - 2, a = tok[2 * i + 1] - 2 - c.entities;
            CHECK(e >= 0 && e < c.entities && a >= 0 && a < c.attributes && tgt[2 * i] < 0 && tgt[2 * i + 1] < 0);
            for (int j = 0; j < i; j++) CHECK(tok[2 * j] != tok[2 * i]);
            cf_pairs += a != da_cf_fact(&c, e), pairs++;
        }
        for (int j = 0; j < nq; j++) {
            const int t = 2 * K + 3 * j;
            CHECK(q[j].pos == t + 1 && tok[t] == DA_CF_QUERY && tok[t + 1] == da_cf_entity_token(&c, q[j].entity));
            CHECK(tgt[t + 1] == q[j].answer && tok[t + 2] == q[j].answer && tgt[t] < 0 && tgt[t + 2] < 0);
            CHECK(q[j].memory == da_cf_attribute_token(&c, da_cf_fact(&c, q[j].entity)));
            int at = -1;
            for (int i = 0; i < K; i++)
                if (tok[2 * i] == tok[t + 1]) at = 2 * i;
            for (int k = 0; k < j; k++) CHECK(q[k].entity != q[j].entity);
            cond[q[j].condition]++;
            if (q[j].condition == DA_CF_ABSENT) {
                CHECK(at < 0 && src[t + 1] == -1 && q[j].answer == q[j].memory);
            } else {
                CHECK(at >= 0 && src[t + 1] == at && q[j].answer == tok[at + 1]);
                CHECK((q[j].condition == DA_CF_AGREE) == (q[j].answer == q[j].memory));
            }
        }
        for (int t = 2 * K + 3 * nq; t < T; t++) CHECK(tok[t] == DA_CF_PAD && tgt[t] < 0);
    }
    /* each condition a third of 18,000 queries (sd 63); half the context pairs counterfactual (sd 110) */
    for (int k = 0; k < 3; k++) CHECK(fabs(cond[k] - 6000.0) < 400);
    CHECK(fabs((double)cf_pairs - pairs / 2.0) < 700);
    return 0;
}

/* Training draws memory sequences (`Q e W(e)` triples, every attribute a
 * target) in memory_share of the sequences, episodes otherwise. */
static int test_memory_sequences(void) {
    da_task_config c;
    small_task(&c);
    c.memory_share = 0.25;
    int tok[64], tgt[64];
    da_rng r;
    da_rng_seed(&r, 4);
    int memory = 0;
    for (int n = 0; n < 4000; n++) {
        da_task_sample(&c, &r, tok, tgt, NULL);
        if (tok[0] != DA_CF_QUERY) continue; /* an episode starts with an entity */
        memory++;
        for (int i = 0; i < c.seq / 3; i++) {
            const int e = tok[3 * i + 1] - 2;
            CHECK(tok[3 * i] == DA_CF_QUERY && e >= 0 && e < c.entities);
            CHECK(tgt[3 * i + 1] == da_cf_attribute_token(&c, da_cf_fact(&c, e)) && tok[3 * i + 2] == tgt[3 * i + 1]);
        }
    }
    CHECK(fabs(memory - 1000.0) < 120); /* sd 27 */
    return 0;
}

/* The fact table depends only on facts_seed and covers the attributes. */
static int test_fact_table(void) {
    da_task_config c, d;
    small_task(&c);
    d = c;
    d.facts_seed ^= 1;
    int seen[16] = {0}, same = 0;
    for (int e = 0; e < c.entities; e++) {
        const int a = da_cf_fact(&c, e);
        CHECK(a >= 0 && a < c.attributes && a == da_cf_fact(&c, e));
        seen[a] = 1, same += a == da_cf_fact(&d, e);
    }
    int covered = 0;
    for (int a = 0; a < 16; a++) covered += seen[a];
    CHECK(covered >= 14 && same < 16);
    return 0;
}

static int test_validation(void) {
    da_task_config c;
    small_task(&c);
    c.vocab = 60;
    CHECK(strstr(da_task_validate(&c).msg, "vocab 60"));
    small_task(&c);
    c.seq = 2 * c.context_pairs + 2;
    CHECK(strstr(da_task_validate(&c).msg, "room for one query"));
    small_task(&c);
    c.entities = 8;
    CHECK(strstr(da_task_validate(&c).msg, "entities 8"));
    small_task(&c);
    c.memory_share = 1;
    CHECK(strstr(da_task_validate(&c).msg, "memory_share"));
    return 0;
}

/* Hand-built predictors over many episodes, scored by da_cf_score. */
typedef enum { COPY, MEMORY, NEIGHBOUR } predictor;

static int predict(const da_task_config *c, predictor p, const int *tok, const da_cf_query *q) {
    const int K = c->context_pairs, et = da_cf_entity_token(c, q->entity);
    int at = -1;
    for (int i = 0; i < K; i++)
        if (tok[2 * i] == et) at = 2 * i;
    if (p == MEMORY) return q->memory; /* the hand-set memory: the fact table */
    if (p == COPY) return at >= 0 ? tok[at + 1] : q->memory;
    /* NEIGHBOUR: the attribute of the next context pair (a pair it is not asked about) */
    const int other = at >= 0 ? (at + 2) % (2 * K) : 0;
    return tok[other + 1];
}

static da_cf_counts score_predictor(const da_task_config *c, predictor p) {
    int tok[64], tgt[64], pred[16];
    da_cf_query q[16];
    da_cf_counts n;
    memset(&n, 0, sizeof n);
    da_rng r;
    da_rng_seed(&r, 5);
    for (int e = 0; e < 2000; e++) {
        const int nq = da_cf_episode(c, &r, tok, tgt, NULL, q);
        for (int j = 0; j < nq; j++) pred[j] = predict(c, p, tok, &q[j]);
        da_cf_score(c, tok, q, nq, pred, &n);
    }
    return n;
}

static int test_copying_model_is_faithful(void) {
    da_task_config c;
    small_task(&c);
    const da_cf_counts n = score_predictor(&c, COPY);
    CHECK(n.n[DA_CF_COUNTER] > 3000);
    CHECK(n.right[DA_CF_COUNTER] == n.n[DA_CF_COUNTER] && n.leak == 0 && n.binding[DA_CF_COUNTER] == 0);
    CHECK(n.right[DA_CF_AGREE] == n.n[DA_CF_AGREE] && n.right[DA_CF_ABSENT] == n.n[DA_CF_ABSENT]);
    return 0;
}

static int test_memory_model_leaks(void) {
    da_task_config c;
    small_task(&c);
    const da_cf_counts n = score_predictor(&c, MEMORY);
    CHECK(n.leak == n.n[DA_CF_COUNTER] && n.right[DA_CF_COUNTER] == 0 && n.binding[DA_CF_COUNTER] == 0);
    CHECK(n.right[DA_CF_AGREE] == n.n[DA_CF_AGREE] && n.right[DA_CF_ABSENT] == n.n[DA_CF_ABSENT]);
    return 0;
}

/* Answering another pair's attribute is a binding error, unless that
 * attribute happens to be the answer or W(e) (then it counts as those). */
static int test_neighbour_model_binds_wrongly(void) {
    da_task_config c;
    small_task(&c);
    const da_cf_counts n = score_predictor(&c, NEIGHBOUR);
    for (int k = 0; k < 3; k++) {
        const long rest = n.n[k] - n.right[k] - (k == DA_CF_COUNTER ? n.leak : 0);
        CHECK(n.binding[k] == rest);            /* nothing else */
        CHECK(n.binding[k] > 0.8 * n.n[k]);     /* coincidences are 1/16 each */
    }
    return 0;
}

int main(void) {
    RUN(test_episode_structure);
    RUN(test_memory_sequences);
    RUN(test_fact_table);
    RUN(test_validation);
    RUN(test_copying_model_is_faithful);
    RUN(test_memory_model_leaks);
    RUN(test_neighbour_model_binds_wrongly);
    TH_SUMMARY();
}
