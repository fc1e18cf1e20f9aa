/* RULER's synthetic tasks at token level (docs/tasks.md): the episode layout
 * and loss mask at several lengths, a hand-built reader that scores 1.0 and a
 * reader of distractors that scores 0 through the task's own scorer, the
 * seeded generator, the task file, and the checks that name the flag. */
#include <stdlib.h>
#include <unistd.h>

#include "diffattn.h"
#include "experiments/task_study.h"
#include "tasks/tasks.h"
#include "harness.h"

/* the last: niah-multiquery with --interleave */
static const da_task_kind KINDS[] = {DA_TASK_NIAH,       DA_TASK_NIAH_MULTIKEY, DA_TASK_NIAH_MULTIVALUE,
                                     DA_TASK_NIAH_MULTIQUERY, DA_TASK_VT,        DA_TASK_CWE,
                                     DA_TASK_NIAH_MULTIQUERY};
enum { N_KINDS = 7 };
static const int LENGTHS[] = {256, 300, 777, 1024, 4096};
enum { N_LENGTHS = 5 };

static void config(da_task_config *c, da_task_kind k, int T, double noise) {
    da_task_config_default(c, k);
    c->seq = T, c->noise = noise, c->value_len = 2, c->hops = 3;
}

/* KINDS[k]'s configuration. */
static void config_at(da_task_config *c, int k, int T, double noise) {
    config(c, KINDS[k], T, noise);
    c->interleave = k == N_KINDS - 1;
}

/* The position of the query's i-th key, and the one before answer token j
 * (q keys, n answer tokens; interleaved, each key followed by its n/q). */
static int key_pos(const da_task_config *c, int qp, int q, int n, int i) {
    return qp + 1 + (c->interleave ? i * (1 + n / q) : i);
}
static int answer_pos(const da_task_config *c, int qp, int q, int n, int j) {
    return c->interleave ? key_pos(c, qp, q, n, j / (n / q)) + j % (n / q) : qp + q + j;
}

static int is_key(const da_ruler_layout *L, int x) { return x >= L->key0 && x < L->key0 + L->keys; }
static int is_value(const da_ruler_layout *L, int x) { return x >= L->value0 && x < L->value0 + L->values; }

static int by_count_down(const void *a, const void *b) { return *(const int *)b - *(const int *)a; }

static int query_pos(const int *tok, int T) {
    for (int t = 0; t < T; t++)
        if (tok[t] == DA_RULER_QUERY) return t;
    return -1;
}

/* The answer of a reader of the episode: it parses the context before the
 * query marker (needles, statements or word counts) and answers the query;
 * with distract, it answers with a distractor instead (a needle whose key is
 * not asked, a chain whose value is not asked, the uncommon words). pred (T):
 * the answer tokens at the positions before them, -1 elsewhere. Returns 0, or
 * 1 when the episode cannot be read (the reader fails the test). */
static int read_episode(const da_task_config *c, const int *tok, int distract, int *pred) {
    const int T = c->seq, qp = query_pos(tok, T), m = c->value_len;
    da_ruler_layout L;
    da_ruler_layout_of(c->vocab, &L);
    int n, q, na = 0;
    da_ruler_shape(c, &n, &q);
    int *ans = malloc((size_t)T * sizeof(int)), *count = calloc((size_t)c->vocab, sizeof(int));
    for (int t = 0; t < T; t++) pred[t] = -1;
    if (qp < 0 || !ans || !count) return free(ans), free(count), 1;
    if (c->kind == DA_TASK_VT) {
        int cur = tok[qp + 1];
        if (distract) /* the chain of the first value that is not asked */
            for (int t = 1; t + 1 < qp; t++)
                if (tok[t] == DA_RULER_ASSIGN && is_value(&L, tok[t + 1]) && tok[t + 1] != cur) {
                    cur = tok[t + 1];
                    break;
                }
        for (int from = 0; na < n;) { /* each next statement that assigns the current name */
            int t = from;
            while (t + 1 < qp && !(tok[t] == DA_RULER_ASSIGN && tok[t + 1] == cur)) t++;
            if (t + 1 >= qp) break;
            cur = ans[na++] = tok[t - 1], from = t + 1;
        }
        while (distract && na > 0 && na < n) ans[na] = ans[na - 1], na++; /* a distractor chain may be cut short */
    } else if (c->kind == DA_TASK_CWE) {
        for (int t = 0; t < qp; t++) count[tok[t]]++;
        int *sorted = malloc((size_t)c->vocab * sizeof(int));
        if (!sorted) return free(ans), free(count), 1;
        memcpy(sorted, count, (size_t)c->vocab * sizeof(int));
        qsort(sorted, (size_t)c->vocab, sizeof(int), by_count_down);
        const int th = sorted[n - 1], unique = sorted[n] < th; /* the n most frequent stand above the rest */
        free(sorted);
        for (int t = 0; t < qp && na < n && unique; t++) { /* first seen first */
            const int w = tok[t];
            if (count[w] > 0 && (distract ? count[w] < th : count[w] >= th)) ans[na++] = w, count[w] = 0;
        }
    } else {
        int dval[64], nd = 0; /* distract: the first needle's values whose key is not asked, over the whole answer */
        for (int k = 0; k < q && !(distract && nd); k++) {
            const int key = tok[key_pos(c, qp, q, n, k)];
            for (int t = 0; t < qp; t++) {
                if (!is_key(&L, tok[t])) continue;
                int other = 1;
                for (int j = 0; j < q; j++) other &= tok[t] != tok[key_pos(c, qp, q, n, j)];
                if (distract && other) {
                    for (int j = 0; j < m; j++) dval[nd++] = tok[t + 1 + j];
                    break;
                }
                if (!distract && tok[t] == key) {
                    for (int j = 0; j < m; j++) ans[na++] = tok[t + 1 + j];
                    if (c->kind != DA_TASK_NIAH_MULTIVALUE) break;
                }
                t += m;
            }
        }
        for (; distract && nd && na < n; na++) ans[na] = dval[na % nd];
    }
    free(count);
    if (na != n) return free(ans), 1;
    for (int j = 0; j < n; j++) pred[answer_pos(c, qp, q, n, j)] = ans[j];
    free(ans);
    return 0;
}

/* Every held-out episode of each task, length and noise read by the reader,
 * scored through the task source's own score (one-hot logits at the reader's
 * answers) and through da_ruler_count: want_exact and want_partial. */
static int score_reader(int distract, double want) {
    for (int k = 0; k < N_KINDS; k++)
        for (int li = 0; li < 4; li++)
            for (int ni = 0; ni < 2; ni++) {
                da_task_config c;
                config_at(&c, k, LENGTHS[li], ni ? 0.5 : distract ? 0.2 : 0);
                da_task_source *s = NULL;
                CHECK(!da_task_source_create(&s, &c, li, 20).code);
                const int T = c.seq, V = c.vocab;
                int *pred = malloc((size_t)T * sizeof(int));
                float *logits = calloc((size_t)T * V, sizeof(float));
                da_ruler_counts counts = {0, 0, 0, 0};
                long right = 0, total = 0;
                const da_data_source ds = da_task_source_of(s);
                int unread = 0;
                for (int i = 0; i < s->n; i++) {
                    const int *tok = s->tokens + (size_t)i * T, *tgt = s->targets + (size_t)i * T;
                    unread |= read_episode(&c, tok, distract, pred);
                    for (int t = 0; t < T; t++) logits[(size_t)t * V + (pred[t] >= 0 ? pred[t] : 0)] = 1;
                    ds.score(ds.self, tgt, logits, 1, T, V, &right, &total);
                    da_ruler_count(tgt, pred, 1, T, &counts);
                    memset(logits, 0, (size_t)T * V * sizeof(float));
                }
                const double exact = (double)right / total, partial = (double)counts.tokens_right / counts.tokens;
                if (unread || exact != want || partial != want || total != s->n || counts.right != right)
                    fprintf(stderr, "  %s seq %d noise %g: %s, exact %.3f, partial %.3f (want %.1f), %ld episodes\n",
                            da_task_name(c.kind), T, c.noise, unread ? "unreadable" : "read", exact, partial, want,
                            total);
                free(pred), free(logits);
                da_task_source_free(s);
                CHECK(!unread && exact == want && partial == want && total == 20 && counts.right == right);
            }
    return 0;
}

static int test_ruler_reader_scores_one(void) { return score_reader(0, 1.0); }
static int test_ruler_distractor_reader_scores_zero(void) { return score_reader(1, 0.0); }

/* At every length (not only powers of two), with and without distractors:
 * the answer block ends the sequence (interleaved: each key followed by its
 * answer), the targets are the answer tokens at the positions before them and
 * -1 elsewhere (the loss mask), the marker is there once, every token lies in its range, and niah's distractors number
 * floor(noise R / (1 + m)) exactly. */
static int test_ruler_layout(void) {
    for (int k = 0; k < N_KINDS; k++)
        for (int li = 0; li < N_LENGTHS; li++)
            for (int ni = 0; ni < 2; ni++) {
                da_task_config c;
                config_at(&c, k, LENGTHS[li], ni ? 0.4 : 0);
                CHECK(!da_task_validate(&c).code);
                da_ruler_layout L;
                da_ruler_layout_of(c.vocab, &L);
                const int T = c.seq;
                int n, q, *tok = malloc(3 * (size_t)T * sizeof(int)), *tgt = tok + T, *src = tgt + T;
                da_ruler_shape(&c, &n, &q);
                da_rng r;
                da_rng_seed(&r, 5 + k);
                for (int e = 0; e < 20; e++) {
                    CHECK(da_task_sample(&c, &r, tok, tgt, src) == n);
                    const int qp = query_pos(tok, T), C = T - 1 - q - n;
                    CHECK(qp == C);
                    int keys = 0, *want = calloc((size_t)T, sizeof(int));
                    for (int j = 0; j < n; j++) want[answer_pos(&c, qp, q, n, j)] = 1;
                    for (int t = 0; t < T; t++) {
                        CHECK(tok[t] > 0 && tok[t] < c.vocab);
                        CHECK((tok[t] == DA_RULER_QUERY) == (t == qp));
                        CHECK(tok[t] != DA_RULER_ASSIGN || c.kind == DA_TASK_VT);
                        CHECK(tgt[t] == (want[t] ? tok[t + 1] : -1));
                        CHECK(!c.interleave || t <= qp || want[t - 1] || is_key(&L, tok[t])); /* k v.. k v.. */
                        CHECK(src[t] < 0 || (src[t] < C && tgt[t] >= 0 && tok[src[t] + 1] == tgt[t]));
                        if (c.kind == DA_TASK_CWE) CHECK(t >= C || tok[t] >= L.filler0);
                        keys += t < C && is_key(&L, tok[t]);
                    }
                    free(want);
                    if (c.kind >= DA_TASK_NIAH && c.kind <= DA_TASK_NIAH_MULTIQUERY) {
                        const int nn = c.kind == DA_TASK_NIAH ? 1 : c.needles, R = C - nn * (1 + c.value_len);
                        CHECK(keys - nn == (int)(c.noise * R / (1 + c.value_len)));
                    }
                }
                free(tok);
            }
    return 0;
}

/* The same seed gives the same episodes; another seed others. */
static int test_ruler_seeded(void) {
    for (int k = 0; k < N_KINDS; k++) {
        da_task_config c;
        config(&c, KINDS[k], 300, 0.3);
        int a[300], b[300], ta[300], tb[300];
        da_rng r1, r2, r3;
        da_rng_seed(&r1, 9), da_rng_seed(&r2, 9), da_rng_seed(&r3, 10);
        da_task_sample(&c, &r1, a, ta, NULL), da_task_sample(&c, &r2, b, tb, NULL);
        CHECK(!memcmp(a, b, sizeof a) && !memcmp(ta, tb, sizeof ta));
        da_task_sample(&c, &r3, b, tb, NULL);
        CHECK(memcmp(a, b, sizeof a));
    }
    return 0;
}

/* --depths 0 puts niah's needle first, 1 right before the query; vt's chain
 * keeps its order at any depths. */
static int test_ruler_depths(void) {
    da_task_config c;
    config(&c, DA_TASK_NIAH, 512, 0);
    c.n_depths = 1, c.depths[0] = 0;
    int tok[512], tgt[512], n, q;
    da_ruler_shape(&c, &n, &q);
    da_rng r;
    da_rng_seed(&r, 3);
    da_task_sample(&c, &r, tok, tgt, NULL);
    CHECK(tok[0] == tok[query_pos(tok, 512) + 1]);
    c.depths[0] = 1;
    da_task_sample(&c, &r, tok, tgt, NULL);
    const int C = 512 - 1 - q - n;
    CHECK(tok[C - 1 - c.value_len] == tok[C + 1]);
    config(&c, DA_TASK_VT, 512, 0.3);
    c.n_depths = 3, c.depths[0] = 0.9, c.depths[1] = 0.1, c.depths[2] = 0.5;
    int pred[512];
    for (int e = 0; e < 50; e++) {
        da_task_sample(&c, &r, tok, tgt, NULL);
        CHECK(!read_episode(&c, tok, 0, pred));
        for (int t = 0; t < 512; t++) CHECK(pred[t] == tgt[t]);
    }
    return 0;
}

/* An error names the flag to change. */
static int expect_invalid(da_task_config *c, const char *flag) {
    da_status st = da_task_validate(c);
    if (!st.code || !strstr(st.msg, flag)) {
        fprintf(stderr, "  want an error naming %s, got: %s\n", flag, st.code ? st.msg : "(valid)");
        return 1;
    }
    return 0;
}

static int test_ruler_invalid(void) {
    da_task_config c;
    config(&c, DA_TASK_NIAH, 256, 1.0);
    CHECK(!expect_invalid(&c, "--noise"));
    c.noise = -0.1;
    CHECK(!expect_invalid(&c, "--noise"));
    config(&c, DA_TASK_NIAH_MULTIKEY, 256, 0.2);
    c.value_len = 0;
    CHECK(!expect_invalid(&c, "--value-len"));
    config(&c, DA_TASK_VT, 256, 0.2);
    c.hops = 0;
    CHECK(!expect_invalid(&c, "--hops"));
    config(&c, DA_TASK_NIAH, 256, 0.2);
    c.n_depths = 2, c.depths[0] = 0.5, c.depths[1] = 1.5;
    CHECK(!expect_invalid(&c, "--depths"));
    c.depths[1] = -0.01;
    CHECK(!expect_invalid(&c, "--depths"));
    config(&c, DA_TASK_NIAH_MULTIVALUE, 20, 0); /* 4 needles of 3 tokens, the answer 8 and the query 2 */
    CHECK(!expect_invalid(&c, "--seq"));
    c.seq = 22;
    CHECK(!da_task_validate(&c).code);
    config(&c, DA_TASK_VT, 17, 0); /* 4 statements of 3 tokens, the answer 4 and the query 2 */
    CHECK(!expect_invalid(&c, "--seq"));
    c.seq = 18;
    CHECK(!da_task_validate(&c).code);
    config(&c, DA_TASK_CWE, 25, 0);
    CHECK(!expect_invalid(&c, "--seq"));
    config(&c, DA_TASK_CWE, 256, 0);
    c.cw_ratio = 1.5;
    CHECK(!expect_invalid(&c, "--cw-ratio"));
    config(&c, DA_TASK_NIAH_MULTIQUERY, 256, 0.2);
    c.vocab = 20; /* 4 keys: too few for 4 asked keys and a distractor's */
    CHECK(!expect_invalid(&c, "--vocab"));
    config(&c, DA_TASK_NIAH_MULTIKEY, 256, 0.2);
    c.interleave = 1; /* one key asked: nothing to interleave */
    CHECK(!expect_invalid(&c, "--interleave"));
    config(&c, DA_TASK_MQAR, 256, 0.2);
    c.interleave = 1;
    CHECK(!expect_invalid(&c, "--interleave"));
    config(&c, DA_TASK_NIAH_MULTIQUERY, 256, 0.2);
    c.interleave = 2;
    CHECK(!expect_invalid(&c, "--interleave"));
    return 0;
}

/* cwe: every common word is more frequent than every other word of the
 * list, at every length, and the answer lists them in order of first
 * appearance. */
static int test_ruler_cwe_counts(void) {
    for (int li = 0; li < N_LENGTHS; li++) {
        da_task_config c;
        config(&c, DA_TASK_CWE, LENGTHS[li], 0);
        const int T = c.seq, C = T - 1 - c.needles;
        int *tok = malloc(2 * (size_t)T * sizeof(int)), *tgt = tok + T, count[256] = {0};
        da_rng r;
        da_rng_seed(&r, 8);
        da_task_sample(&c, &r, tok, tgt, NULL);
        for (int t = 0; t < C; t++) count[tok[t]]++;
        int least_common = 1 << 30, most_other = 0, first[256];
        for (int v = 0; v < 256; v++) first[v] = -1;
        for (int t = C - 1; t >= 0; t--) first[tok[t]] = t;
        for (int j = 0; j < c.needles; j++) {
            const int w = tok[C + 1 + j];
            least_common = count[w] < least_common ? count[w] : least_common;
            CHECK(!j || first[w] > first[tok[C + j]]);
            count[w] = -count[w];
        }
        for (int v = 0; v < 256; v++) most_other = count[v] > most_other ? count[v] : most_other;
        free(tok);
        CHECK(least_common > most_other);
    }
    return 0;
}

/* The scorer: one wrong answer token makes the episode wrong and costs
 * 1/n of the partial credit; an episode without answers is not counted. */
static int test_ruler_scorer(void) {
    const int tgt[2][6] = {{-1, 7, 8, 9, -1, -1}, {-1, -1, -1, -1, -1, -1}};
    const int pred[2][6] = {{0, 7, 5, 9, 0, 0}, {0, 0, 0, 0, 0, 0}};
    da_ruler_counts k = {0, 0, 0, 0};
    da_ruler_count(&tgt[0][0], &pred[0][0], 2, 6, &k);
    CHECK(k.episodes == 1 && k.right == 0 && k.tokens == 3 && k.tokens_right == 2);
    da_ruler_count(&tgt[0][0], &tgt[0][0], 1, 6, &k);
    CHECK(k.episodes == 2 && k.right == 1 && k.tokens == 6 && k.tokens_right == 5);
    return 0;
}

/* A run's task file rebuilds the same held-out episodes (depths and
 * interleave included). */
static int test_ruler_task_file(void) {
    char dir[] = "/tmp/test_ruler_XXXXXX", path[64];
    CHECK(mkdtemp(dir));
    da_task_config c;
    config(&c, DA_TASK_NIAH_MULTIQUERY, 333, 0.25);
    c.n_depths = 2, c.depths[0] = 0.25, c.depths[1] = 0.75, c.interleave = 1;
    da_task_source *a = NULL, *b = NULL;
    CHECK(!da_task_source_create(&a, &c, 2, 8).code);
    CHECK(!da_task_source_save(a, dir).code);
    snprintf(path, sizeof path, "%s/task.txt", dir);
    da_status st = da_task_source_load(&b, path);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    const int same = !st.code && b->task.n_depths == 2 && b->task.depths[1] == 0.75 && b->task.value_len == 2 &&
                     b->task.interleave == 1 &&
                     !memcmp(a->tokens, b->tokens, (size_t)8 * 333 * sizeof(int));
    da_task_source_free(a), da_task_source_free(b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    CHECK(same);
    return 0;
}

int main(void) {
    RUN(test_ruler_layout);
    RUN(test_ruler_seeded);
    RUN(test_ruler_reader_scores_one);
    RUN(test_ruler_distractor_reader_scores_zero);
    RUN(test_ruler_depths);
    RUN(test_ruler_invalid);
    RUN(test_ruler_cwe_counts);
    RUN(test_ruler_scorer);
    RUN(test_ruler_task_file);
    TH_SUMMARY();
}
