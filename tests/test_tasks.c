/* Retrieval task generators (docs/tasks.md), the loss mask through the
 * model, steps-to-threshold and the shared initialisation of compare --task. */
#include "diffattn.h"
#include "experiments/compare.h"
#include "experiments/tasks.h"
#include "harness.h"

enum { N_SAMPLES = 4000 };

/* Each answer's key occurs exactly twice (in the context and asked once),
 * its value follows it in the context, keys and values come from disjoint
 * halves of the vocabulary, and there are exactly `pairs` answers. */
static int test_mqar_answers_unique(void) {
    da_task_config c;
    da_task_config_default(&c, DA_TASK_MQAR);
    c.seq = 64, c.pairs = 8, c.vocab = 40;
    CHECK(!da_task_validate(&c).code);
    int tok[64], tgt[64], src[64];
    da_rng r;
    da_rng_seed(&r, 11);
    for (int n = 0; n < 500; n++) {
        CHECK(da_task_sample(&c, &r, tok, tgt, src) == c.pairs);
        int answers = 0;
        for (int t = 0; t < c.seq; t++) {
            if (t < 2 * c.pairs) CHECK(t % 2 ? tok[t] >= c.vocab / 2 : tok[t] >= 1 && tok[t] < c.vocab / 2);
            CHECK(tok[t] >= 0 && tok[t] < c.vocab);
            if (tgt[t] < 0) {
                CHECK(src[t] == -1);
                continue;
            }
            answers++;
            CHECK(t >= 2 * c.pairs && (t - 2 * c.pairs) % 2 == 0); /* a query slot */
            CHECK(src[t] >= 0 && src[t] < 2 * c.pairs && src[t] % 2 == 0);
            CHECK(tok[src[t]] == tok[t] && tok[src[t] + 1] == tgt[t]);
            int seen = 0;
            for (int j = 0; j < c.seq; j++) seen += tok[j] == tok[t];
            CHECK(seen == 2);
        }
        CHECK(answers == c.pairs);
    }
    return 0;
}

/* With one pair the gap g of the query is drawn from p(g) ~ (g+1)^(alpha-1)
 * exactly: the empirical distribution stays within 4 sigma per gap. */
static int test_mqar_gaps_follow_power_law(void) {
    da_task_config c;
    da_task_config_default(&c, DA_TASK_MQAR);
    c.seq = 32, c.pairs = 1, c.vocab = 64, c.alpha = 0.3;
    const int space = (c.seq - 2) / 2;
    double want[16], z = 0, count[16] = {0};
    for (int g = 0; g < space; g++) z += want[g] = pow(g + 1.0, c.alpha - 1);
    int tok[32], tgt[32];
    da_rng r;
    da_rng_seed(&r, 12);
    for (int n = 0; n < N_SAMPLES * 5; n++) {
        da_task_sample(&c, &r, tok, tgt, NULL);
        for (int t = 2; t < c.seq; t++)
            if (tgt[t] >= 0) count[(t - 2) / 2]++;
    }
    double worst = 0;
    for (int g = 0; g < space; g++) {
        const double p = want[g] / z, emp = count[g] / (N_SAMPLES * 5), sigma = sqrt(p * (1 - p) / (N_SAMPLES * 5));
        if (fabs(emp - p) / sigma > worst) worst = fabs(emp - p) / sigma;
    }
    if (worst > 4) fprintf(stderr, "  worst gap deviation %.1f sigma\n", worst);
    CHECK(worst <= 4);
    /* and the law matters: gap 0 is far likelier than the last gap */
    CHECK(count[0] > 5 * count[space - 1]);
    return 0;
}

/* Noise slots come at the set rate (every slot but the forced pair and the
 * probe), noise tokens only from the noise vocabulary, and every answer's
 * key was seen before with the same value, src pointing at its latest
 * occurrence; the last slot is always an answer. */
static int test_noisy_recall(void) {
    da_task_config c;
    da_task_config_default(&c, DA_TASK_NOISY_RECALL);
    c.seq = 64, c.vocab = 48, c.noise_vocab = 16, c.noise = 0.4;
    CHECK(!da_task_validate(&c).code);
    const int slots = c.seq / 2, K = (c.vocab - c.noise_vocab) / 2;
    int tok[64], tgt[64], src[64];
    da_rng r;
    da_rng_seed(&r, 13);
    long noise_slots = 0;
    for (int n = 0; n < N_SAMPLES; n++) {
        const int answers = da_task_sample(&c, &r, tok, tgt, src);
        int counted = 0;
        for (int s = 0; s < slots; s++) {
            const int t = 2 * s, nz = da_task_is_noise(&c, tok[t]);
            CHECK(nz == da_task_is_noise(&c, tok[t + 1]));
            noise_slots += nz;
            CHECK(tgt[t + 1] == -1);
            if (nz) {
                CHECK(tgt[t] == -1);
                continue;
            }
            CHECK(tok[t] < K && tok[t + 1] >= K && tok[t + 1] < 2 * K);
            int last = -1;
            for (int j = 0; j < t; j += 2)
                if (tok[j] == tok[t]) {
                    last = j;
                    CHECK(tok[j + 1] == tok[t + 1]);
                }
            CHECK(src[t] == last);
            CHECK((tgt[t] >= 0) == (last >= 0));
            if (last >= 0) {
                CHECK(tgt[t] == tok[t + 1]);
                counted++;
            }
        }
        CHECK(counted == answers && tgt[c.seq - 2] >= 0);
    }
    const double want = c.noise * (slots - 2) / slots, got = (double)noise_slots / ((double)N_SAMPLES * slots);
    const double sigma = sqrt(c.noise * (1 - c.noise) / ((double)N_SAMPLES * (slots - 2))) * (slots - 2) / slots;
    if (fabs(got - want) > 4 * sigma) fprintf(stderr, "  noise share %.4f, want %.4f\n", got, want);
    CHECK(fabs(got - want) <= 4 * sigma);
    return 0;
}

/* The same seed gives the same sequences; parameters out of range are refused with the field named. */
static int test_task_seeded_and_validated(void) {
    da_task_config c;
    da_task_config_default(&c, DA_TASK_MQAR);
    c.seq = 64, c.vocab = 128, c.pairs = 8;
    int a[64], b[64], ta[64], tb[64];
    da_rng r1, r2;
    da_rng_seed(&r1, 5), da_rng_seed(&r2, 5);
    da_task_sample(&c, &r1, a, ta, NULL);
    da_task_sample(&c, &r2, b, tb, NULL);
    CHECK(!memcmp(a, b, sizeof a) && !memcmp(ta, tb, sizeof ta));
    c.pairs = 17; /* > seq/4 */
    da_status st = da_task_validate(&c);
    CHECK(st.code && strstr(st.msg, "pairs"));
    da_task_config_default(&c, DA_TASK_NOISY_RECALL);
    c.noise = 1.0;
    st = da_task_validate(&c);
    CHECK(st.code && strstr(st.msg, "noise"));
    return 0;
}

/* With only position 3 counted, the loss is that position's cross-entropy
 * and the tokens after it get exactly zero gradient (causality + mask). */
static int test_loss_mask_through_model(void) {
    da_config cfg;
    da_config_default(&cfg);
    cfg.dim = 32, cfg.n_layers = 2, cfg.n_heads = cfg.n_kv_heads = 2, cfg.vocab_size = 16, cfg.max_seq_len = 8;
    cfg.ffn_hidden = 64;
    da_model m;
    CHECK(!da_model_create(&m, &cfg).code);
    da_model_init(&m, 3);
    CHECK(!da_model_alloc_grads(&m).code);
    da_acts *a = NULL;
    CHECK(!da_acts_create(&a, &cfg, 1, 8).code);
    const int tok[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tgt[8] = {-1, -1, -1, 9, -1, -1, -1, -1};
    da_model_zero_grads(&m);
    const float loss = da_forward(&m, a, tok, tgt, 1, 8);
    const float *z = da_acts_logits(a) + 3 * cfg.vocab_size;
    double s = 0;
    for (int v = 0; v < cfg.vocab_size; v++) s += exp((double)z[v]);
    const double want = log(s) - z[9];
    da_backward(&m, a);
    int ok = fabs(loss - want) < 1e-4;
    if (!ok) fprintf(stderr, "  masked loss %.6f, position 3 alone %.6f\n", loss, want);
    double after = 0, before = 0;
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < cfg.dim; i++) {
            const double g = fabs(m.g.tok_embeddings[(size_t)tok[t] * cfg.dim + i]);
            if (t > 3) after += g;
            else before += g;
        }
    if (after != 0 || before == 0) fprintf(stderr, "  embedding grads: before %.3g, after the answer %.3g\n", before, after);
    ok &= after == 0 && before > 0;
    da_acts_free(a);
    da_model_free(&m);
    return !ok;
}

/* First step at or above each threshold of a known curve; -1 when never. */
static int test_steps_to_threshold(void) {
    const long steps[5] = {0, 50, 100, 150, 200};
    const double acc[5] = {0.02, 0.6, 0.45, 0.93, 0.991};
    CHECK(da_steps_to_threshold(steps, acc, 5, 0.5) == 50);
    CHECK(da_steps_to_threshold(steps, acc, 5, 0.9) == 150);
    CHECK(da_steps_to_threshold(steps, acc, 5, 0.99) == 200);
    CHECK(da_steps_to_threshold(steps, acc, 5, 0.995) == -1);
    return 0;
}

/* At equal parameters every softmax tensor has a DIFF twin of the same
 * shape: all are copied, and DIFF's own (lambdas, head norm) are not in it. */
static int test_shared_init(void) {
    da_config cd, cs;
    da_config_default(&cd);
    cd.dim = 32, cd.n_layers = 2, cd.n_heads = cd.n_kv_heads = 1, cd.vocab_size = 32, cd.max_seq_len = 16;
    cd.ffn_hidden = 64;
    cs = cd;
    cs.arch = DA_ARCH_SOFTMAX, cs.n_heads = cs.n_kv_heads = 2;
    cd.arch = DA_ARCH_DIFF;
    da_model d, s;
    CHECK(!da_model_create(&d, &cd).code && !da_model_create(&s, &cs).code);
    da_model_init(&d, 1), da_model_init(&s, 2);
    CHECK(da_copy_shared_init(&s, &d) == s.n_tensors);
    for (int i = 0; i < s.n_tensors; i++) {
        const da_tensor *a = &s.tensors[i], *b = da_model_find(&d, a->name);
        CHECK(b && !memcmp(s.params + a->offset, d.params + b->offset, a->numel * sizeof(float)));
    }
    da_model_free(&d), da_model_free(&s);
    return 0;
}

/* A 2-layer softmax model built by hand to solve MQAR (an induction head):
 * layer 0 attends to the previous position by RoPE alone and writes the
 * previous token into the residual; layer 1 matches the current token (a
 * query key) against that "previous token" and copies the token found there
 * (the key's value) to the output. Residual: [0, 16) current token, [16, 32)
 * previous token, 32 a constant, [40, 56) the retrieved value. RoPE theta
 * 1e10 on 32-dim heads: pairs 0 and 1 turn at 1 and 0.215 rad per position
 * (the positional match), pairs 5-12 at under 5e-4 (a content match that
 * ignores position). Its held-out answer accuracy must be exactly 1. */
static int test_hand_built_mqar_solver(void) {
    enum { V = 16, C = 64, T = 32 };
    da_config cfg;
    da_config_default(&cfg);
    cfg.arch = DA_ARCH_SOFTMAX, cfg.dim = C, cfg.n_layers = 2, cfg.n_heads = cfg.n_kv_heads = 2, cfg.vocab_size = V;
    cfg.max_seq_len = T, cfg.ffn_hidden = 64, cfg.rope_theta = 1e10f, cfg.tie_embeddings = 0;
    da_model m;
    CHECK(!da_model_create(&m, &cfg).code);
    memset(m.params, 0, m.n_params * sizeof(float));
    const da_weights *w = &m.w;
    for (int v = 0; v < V; v++) w->tok_embeddings[v * C + v] = 1, w->tok_embeddings[v * C + 32] = 1;
    for (int i = 0; i < C; i++) w->norm[i] = 1;
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < C; i++) w->layers[l].attention_norm[i] = w->layers[l].ffn_norm[i] = 1;
    /* layer 0: q = g (1, 0) on pairs 0 and 1 from the constant; k = g (cos w, sin w): the logit is largest
     * where (j - t + 1) w = 0 on both pairs, the previous position */
    const float g = 4;
    const da_layer_weights *l0 = &w->layers[0], *l1 = &w->layers[1];
    for (int j = 0; j < 2; j++) {
        const double freq = pow(1e10, -(double)j / 15);
        l0->wq[(2 * j) * C + 32] = g;
        l0->wk[(2 * j) * C + 32] = g * (float)cos(freq);
        l0->wk[(2 * j + 1) * C + 32] = g * (float)sin(freq);
    }
    for (int i = 0; i < V; i++) {
        l0->wv[i * C + i] = 1;                 /* the current token ... */
        l0->wo[(16 + i) * C + i] = 0.1767767f; /* ... written as the next position's previous token (undo rmsnorm) */
        l1->wq[(10 + i) * C + i] = 3;          /* current token against ... */
        l1->wk[(10 + i) * C + 16 + i] = 3;     /* ... each position's previous token, less its own token: */
        l1->wk[(10 + i) * C + i] = -3;         /* position 0's "previous token" is itself (nothing before it) */
        l1->wv[i * C + i] = 1;                 /* the token found there */
        l1->wo[(40 + i) * C + i] = 1;
        w->output[i * C + 40 + i] = 10;
    }
    da_task_config t;
    da_task_config_default(&t, DA_TASK_MQAR);
    t.seq = T, t.pairs = 4, t.vocab = V;
    double acc = 0, acc4 = 0;
    CHECK(!da_task_answer_accuracy(&m, &t, 200, 77, 0, &acc).code);
    CHECK(!da_task_answer_accuracy(&m, &t, 200, 77, 8, &acc4).code);
    printf("     hand-built solver: answer accuracy %.4f, with 8-bit logits %.4f\n", acc, acc4);
    /* scrambling the value read-out breaks it: the accuracy measures retrieval, not a constant */
    for (int i = 0; i < V; i++) w->output[i * C + 40 + i] = 0, w->output[i * C + 40 + (i + 1) % V] = 10;
    double scrambled = 1;
    CHECK(!da_task_answer_accuracy(&m, &t, 200, 77, 0, &scrambled).code);
    da_model_free(&m);
    CHECK(acc == 1.0 && acc4 == 1.0 && scrambled == 0.0);
    return 0;
}

int main(void) {
    RUN(test_mqar_answers_unique);
    RUN(test_mqar_gaps_follow_power_law);
    RUN(test_noisy_recall);
    RUN(test_task_seeded_and_validated);
    RUN(test_loss_mask_through_model);
    RUN(test_steps_to_threshold);
    RUN(test_shared_init);
    RUN(test_hand_built_mqar_solver);
    TH_SUMMARY();
}
