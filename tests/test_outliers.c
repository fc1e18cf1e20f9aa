/* eval outliers on known tensors: the statistics of hand-made arrays, and a
 * hand-built model whose hidden states are its embeddings and whose
 * attention logits are all zero. */
#include <unistd.h>

#include "diffattn.h"
#include "eval/outliers.h"
#include "harness.h"

static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int test_known_array(void) {
    /* x = i - 500, i = 0..1000: |x| holds 0 once and 1..500 twice */
    float x[1001], scratch[1001];
    for (int i = 0; i <= 1000; i++) x[i] = (float)(i - 500);
    da_outlier_stats s;
    da_outlier_stats_of(x, 1001, scratch, &s);
    CHECK(s.count == 1001);
    CHECK(s.top[0] == 500 && s.top[1] == 500 && s.top[2] == 499 && s.top[3] == 496 && s.top[4] == 451);
    CHECK(s.median == 250); /* sorted |x|: 0, 1, 1, 2, 2, ...: index 500 is 250 */
    /* even count: the median is the mean of the two middle values */
    float y[4] = {-4, 1, 3, -2}, sy[4];
    da_outlier_stats_of(y, 4, sy, &s);
    CHECK(s.median == 2.5 && s.top[0] == 4 && s.top[3] == 0 /* fewer than 10 values */);
    return 0;
}

static int test_random_against_sort(void) {
    enum { N = 20011 };
    static float x[N], scratch[N], sorted[N];
    da_rng r;
    da_rng_seed(&r, 9);
    for (int i = 0; i < N; i++) x[i] = 3.0f * da_rng_normal(&r);
    for (int i = 0; i < N; i++) sorted[i] = fabsf(x[i]);
    qsort(sorted, N, sizeof(float), cmp_desc);
    da_outlier_stats s;
    da_outlier_stats_of(x, N, scratch, &s);
    CHECK(s.top[0] == sorted[0] && s.top[1] == sorted[1] && s.top[2] == sorted[2]);
    CHECK(s.top[3] == sorted[9] && s.top[4] == sorted[99]);
    CHECK(s.median == sorted[N / 2]);
    return 0;
}

static int test_hand_built_model(void) {
    char corpus[64]; /* the pid: suites of two builds may run at once */
    snprintf(corpus, sizeof corpus, "/tmp/da_outliers_corpus_%ld.txt", (long)getpid());
    FILE *fp = fopen(corpus, "w");
    for (int i = 0; i < 200; i++) fprintf(fp, "outlier %d? ABC xyz.\n", i);
    fclose(fp);
    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 2, c.n_heads = 2, c.n_kv_heads = 2, c.ffn_hidden = 64, c.max_seq_len = 16;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    /* every weight 0 except the embedding: each layer passes its input through,
     * so the hidden states are the embeddings and q = k = 0 */
    for (int v = 0; v < 256; v++)
        for (int e = 0; e < 32; e++) m.w.tok_embeddings[v * 32 + e] = (float)(v + 1) * 0.01f * (e % 2 ? -1.0f : 1.0f);
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, 0.1f, 16).code);
    da_outliers_result r;
    CHECK(!da_eval_outliers(&m, &d, 16, 3, &r).code);
    /* the largest byte in the windows decides the top hidden value */
    int tok[16], tgt[16], maxv = 0;
    for (long w = 0; w < 3; w++) {
        da_text_data_val_window(&d, w, 3, 16, tok, tgt);
        for (int t = 0; t < 16; t++) maxv = tok[t] > maxv ? tok[t] : maxv;
    }
    printf("     hidden top-1 %.4f (expected %.4f), logits top-1 %.4f\n", r.hidden.top[0], (maxv + 1) * 0.01,
           r.logits.top[0]);
    CHECK(fabs(r.hidden.top[0] - (maxv + 1) * 0.01) < 1e-6);
    CHECK(r.logits.top[0] == 0 && r.logits.median == 0);
    CHECK(r.logits.count == (size_t)3 * 2 * 4 * (16 * 17 / 2)); /* windows x layers x sub-heads x causal pairs */
    CHECK(r.hidden.count == (size_t)3 * 2 * 16 * 32);
    CHECK(r.n_lambda == 2); /* DIFF: each layer's one lambda */
    for (int l = 0; l < 2; l++)
        CHECK(r.lambda_mean[l] == da_model_lambda(&m, l) && r.lambda_std[l] == 0 &&
              r.lambda_min[l] == r.lambda_max[l]);
    da_text_data_free(&d);
    da_model_free(&m);
    unlink(corpus);
    return 0;
}

/* NSA: the logits are every query head's over its three branches, each
 * branch's own keys: the visible compressed blocks, the chosen blocks'
 * tokens, the window. l 4, s 2, l' 4, n 3, w 5 over T = 16: from t = 12 on,
 * the three forced blocks (0, 2, 3) leave block 1 out. */
static int test_nsa_logits(void) {
    char corpus[64]; /* the pid: suites of two builds may run at once */
    snprintf(corpus, sizeof corpus, "/tmp/da_outliers_corpus3_%ld.txt", (long)getpid());
    FILE *fp = fopen(corpus, "w");
    for (int i = 0; i < 200; i++) fprintf(fp, "nsa %d: three branches %d.\n", i, i * 7);
    fclose(fp);
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_NSA, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_hidden = 64;
    c.max_seq_len = 16, c.nsa_block = 4, c.nsa_stride = 2, c.nsa_select = 4, c.nsa_topn = 3, c.nsa_window = 5;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 3);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] *= 20.0f;
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, 0.1f, 16).code);
    da_outliers_result r;
    CHECK(!da_eval_outliers(&m, &d, 16, 2, &r).code);
    const int T = 16;
    size_t per_head = 0;
    for (int t = 0; t < T; t++) {
        const int cmp = t + 1 >= 4 ? (t + 1 - 4) / 2 + 1 : 0, slc = t >= 12 ? 8 + t - 12 + 1 : t + 1;
        per_head += (size_t)(cmp + slc + (t + 1 < 5 ? t + 1 : 5));
    }
    CHECK(r.logits.count == (size_t)2 * 2 * 4 * per_head); /* windows x layers x heads x their keys */
    printf("     nsa: %zu logits, top-1 %.4f\n", r.logits.count, r.logits.top[0]);
    CHECK(r.logits.top[0] > 1.0);
    da_text_data_free(&d);
    da_model_free(&m);
    unlink(corpus);
    return 0;
}

/* DIFF2 with GQA and a window: the logits are both maps' scores of every
 * query head (2H of them) over the keys in its window, and the largest
 * equals a brute-force scan that pairs query head j with KV group
 * j / (2H / n_kv), flash_attn's GQA rule in the official module. */
static int test_diff2_window_logits(void) {
    char corpus[64]; /* the pid: suites of two builds may run at once */
    snprintf(corpus, sizeof corpus, "/tmp/da_outliers_corpus2_%ld.txt", (long)getpid());
    FILE *fp = fopen(corpus, "w");
    for (int i = 0; i < 200; i++) fprintf(fp, "window %d: diff2 GQA %d.\n", i, i * 7);
    fclose(fp);
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_DIFF2, c.dim = 32, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_hidden = 64;
    c.max_seq_len = 16, c.window = 5;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 3);
    for (size_t i = 0; i < m.n_params; i++) m.params[i] *= 20.0f; /* logits well away from zero */
    da_text_data d;
    CHECK(!da_text_data_load(&d, corpus, 0.1f, 16).code);
    da_outliers_result r;
    CHECK(!da_eval_outliers(&m, &d, 16, 2, &r).code);
    const int T = 16, W = 5, d8 = 8, Cq = 64, Ckv = 16, nq = 8;
    size_t pairs = 0;
    for (int t = 0; t < T; t++) pairs += (size_t)(t < W ? t + 1 : W);
    CHECK(r.logits.count == (size_t)2 * 2 * nq * pairs); /* windows x layers x query heads x windowed pairs */
    da_acts *a;
    CHECK(!da_acts_create(&a, &c, 1, T).code);
    double top = 0, lam_sum[2] = {0, 0}, lam_min[2] = {1, 1}, lam_max[2] = {0, 0};
    int tok[16], tgt[16];
    for (long w = 0; w < 2; w++) {
        da_text_data_val_window(&d, w, 2, T, tok, tgt);
        da_forward(&m, a, tok, NULL, 1, T);
        for (int l = 0; l < 2; l++) {
            const float *q, *k, *lam = da_acts_lam(a, l);
            for (int i = 0; i < T * c.n_heads; i++) {
                lam_sum[l] += lam[i];
                lam_min[l] = fmin(lam_min[l], lam[i]);
                lam_max[l] = fmax(lam_max[l], lam[i]);
            }
            da_acts_qk(a, l, &q, &k);
            for (int j = 0; j < nq; j++)
                for (int t = 0; t < T; t++)
                    for (int s = t - W + 1 < 0 ? 0 : t - W + 1; s <= t; s++) {
                        double dot = 0;
                        for (int e = 0; e < d8; e++)
                            dot += (double)q[t * Cq + j * d8 + e] * k[s * Ckv + (j / (nq / 2)) * d8 + e];
                        top = fmax(top, fabs(dot) / sqrt((double)d8));
                    }
        }
    }
    printf("     diff2 window: logits top-1 %.4f (brute force %.4f), %zu logits\n", r.logits.top[0], top,
           r.logits.count);
    CHECK(fabs(r.logits.top[0] - top) <= 1e-4 * top && top > 1.0);
    /* lambda per layer: sigmoid(x . lambda_proj) over both windows' tokens and heads */
    CHECK(r.n_lambda == 2);
    for (int l = 0; l < 2; l++) {
        printf("     diff2 lambda, layer %d: mean %.4f (brute force %.4f), min %.4f, max %.4f, std %.4f\n", l,
               r.lambda_mean[l], lam_sum[l] / (2 * T * c.n_heads), r.lambda_min[l], r.lambda_max[l], r.lambda_std[l]);
        CHECK(fabs(r.lambda_mean[l] - lam_sum[l] / (2 * T * c.n_heads)) < 1e-6);
        CHECK(r.lambda_min[l] == lam_min[l] && r.lambda_max[l] == lam_max[l] && r.lambda_std[l] > 0);
        CHECK(r.lambda_min[l] >= 0 && r.lambda_max[l] <= 1); /* a sigmoid (saturated by the x20 weights) */
    }
    da_acts_free(a);
    da_text_data_free(&d);
    da_model_free(&m);
    unlink(corpus);
    return 0;
}

int main(void) {
    RUN(test_known_array);
    RUN(test_random_against_sort);
    RUN(test_hand_built_model);
    RUN(test_diff2_window_logits);
    RUN(test_nsa_logits);
    TH_SUMMARY();
}
