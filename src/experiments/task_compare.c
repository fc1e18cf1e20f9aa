/* compare --task mqar|noisy-recall|icl: every architecture trained on the same
 * generated stream from the same initialisation, scored on the same held-out
 * sequences (see compare.h and docs/tasks.md). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "eval/outliers.h"
#include "experiments/compare.h"
#include "experiments/plot.h"
#include "io/atomic_file.h"
#include "io/run_lock.h"

/* The architectures compared are c->archs, in report order (--archs); each
 * one's heads come from da_arch_heads, which keeps the parameters equal to
 * DIFF's. The baseline of the verdicts is the softmax row, when listed. */
enum { N_ARCHS = DA_COMPARE_MAX_ARCHS, MAX_EVALS = 512, MAX_LAYERS = 16, MAX_POINTS = 64, MAX_SEEDS = 8 };


/* The index of arch a in c->archs, -1 when not listed. */
static int arch_slot(const da_task_compare_config *c, da_arch a) {
    for (int i = 0; i < c->n_archs; i++)
        if (c->archs[i] == a) return i;
    return -1;
}
static const int QBITS[3] = {8, 6, 4};
static const double THRESH[3] = {0.5, 0.9, 0.99};

void da_task_compare_config_default(da_task_compare_config *c) {
    memset(c, 0, sizeof *c);
    c->out_dir = "runs/compare-task";
    da_task_config_default(&c->task, DA_TASK_MQAR);
    c->steps = 1000;
    c->eval_every = 50;
    c->eval_seqs = 256;
    c->dim = 64;
    c->layers = 2;
    c->heads = 1;
    c->batch = 32;
    c->lr = 3e-3f;
    c->seeds = 1;
    c->seed0 = 1337;
    c->archs[0] = DA_ARCH_DIFF, c->archs[1] = DA_ARCH_DIFF2, c->archs[2] = DA_ARCH_SOFTMAX;
    c->n_archs = 3;
    c->perms = 10;
    c->perm_episodes = 128;
}

long da_steps_to_threshold(const long *steps, const double *acc, int n, double threshold) {
    for (int i = 0; i < n; i++)
        if (acc[i] >= threshold) return steps[i];
    return -1;
}

typedef struct {
    int n_evals;
    long step[MAX_EVALS];
    double acc[MAX_EVALS];
    float lambda[MAX_EVALS][MAX_LAYERS];
    double final_acc, quant_acc[3];
    double attn_answer, attn_noise, attn_noise_tokens; /* shares, mean over answers, layers, heads */
    da_outliers_result out;
    da_icl_order_result order; /* icl only */
    double train_s;
    size_t n_params;
} task_run;

typedef struct {
    int n, T, answers;
    int *tokens, *targets, *src; /* (n, T) */
} eval_set;


static da_status eval_set_make(eval_set *e, const da_task_config *t, int n, uint64_t seed) {
    memset(e, 0, sizeof *e);
    e->n = n, e->T = t->seq;
    const size_t sz = (size_t)n * t->seq * sizeof(int);
    e->tokens = malloc(sz), e->targets = malloc(sz), e->src = malloc(sz);
    if (!e->tokens || !e->targets || !e->src) return da_errorf("out of memory for %d evaluation sequences", n);
    da_rng r;
    da_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        const size_t o = (size_t)i * t->seq;
        e->answers += da_task_sample(t, &r, e->tokens + o, e->targets + o, e->src + o);
    }
    return da_ok();
}

static void eval_set_free(eval_set *e) { free(e->tokens), free(e->targets), free(e->src); }

/* Teacher-forced answer accuracy: the share of answer positions whose argmax
 * logit is the answer, over the whole set, in batches of a's size B. */
static double answer_accuracy(da_model *m, da_acts *a, int B, const eval_set *e) {
    const int V = m->cfg.vocab_size, T = e->T;
    long right = 0, total = 0;
    for (int i = 0; i < e->n; i += B) {
        const int b = e->n - i < B ? e->n - i : B;
        da_forward(m, a, e->tokens + (size_t)i * T, NULL, b, T);
        const float *lg = da_acts_logits(a);
        for (int p = 0; p < b * T; p++) {
            const int want = e->targets[(size_t)i * T + p];
            if (want < 0) continue;
            const float *z = lg + (size_t)p * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
            right += best == want, total++;
        }
    }
    return total ? (double)right / total : 0;
}

/* The one place that runs a model with quantized attention logits: the
 * inference engine's session option (the reference attention math, logits
 * fake-quantized per query row before each softmax), over the same
 * sequences and answer positions as answer_accuracy. */
static da_status quantized_answer_accuracy(const da_model *m, const eval_set *e, int logit_bits, double *acc) {
    da_engine *en = NULL;
    da_session *s = NULL;
    da_status st = da_engine_from_model(&en, m);
    da_session_opts o = da_session_opts_default();
    o.logit_bits = logit_bits;
    o.max_T = e->T;
    if (!st.code) st = da_session_create(&s, en, &o);
    const int V = m->cfg.vocab_size, T = e->T;
    long right = 0, total = 0;
    for (int i = 0; i < e->n && !st.code; i++) {
        const float *lg;
        da_session_reset(s);
        if ((st = da_session_feed(s, e->tokens + (size_t)i * T, T, 1, &lg)).code) break;
        for (int p = 0; p < T; p++) {
            const int want = e->targets[(size_t)i * T + p];
            if (want < 0) continue;
            const float *z = lg + (size_t)p * V;
            int best = 0;
            for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
            right += best == want, total++;
        }
    }
    *acc = total ? (double)right / total : 0;
    da_session_free(s);
    da_engine_free(en);
    return st;
}

da_status da_task_answer_accuracy(da_model *m, const da_task_config *t, int n, uint64_t seed, int logit_bits,
                                  double *acc) {
    da_status st = da_task_validate(t);
    if (st.code) return st;
    if (t->vocab > m->cfg.vocab_size || t->seq > m->cfg.max_seq_len)
        return da_errorf("the task (vocab %d, seq %d) exceeds the model (vocab_size %d, max_seq_len %d)", t->vocab,
                         t->seq, m->cfg.vocab_size, m->cfg.max_seq_len);
    eval_set e;
    da_acts *a = NULL;
    const int B = n < 16 ? n : 16;
    st = eval_set_make(&e, t, n, seed);
    if (!st.code && logit_bits) st = quantized_answer_accuracy(m, &e, logit_bits, acc);
    else if (!st.code && !(st = da_acts_create(&a, &m->cfg, B, t->seq)).code) *acc = answer_accuracy(m, a, B, &e);
    da_acts_free(a);
    eval_set_free(&e);
    return st;
}

/* row[0..t]: position t's attention in head h, as in eval attention: DIFF's
 * combined map A1 - lambda A2 divided by its absolute mass, so a share is
 * signed and the absolute shares of a row sum to at most 1. */
static void attention_row(const da_config *c, const float *q, const float *k, float lambda, int h, int t, float *row,
                          float *tmp) {
    const int d = da_head_dim(c), Cq = da_q_dim(c), rep = c->n_heads / c->n_kv_heads, Ckv = c->dim / rep;
    const int diff = c->arch == DA_ARCH_DIFF, maps = da_arch_maps(c->arch);
    const float scale = 1.0f / sqrtf((float)d);
    for (int mp = 0; mp < maps; mp++) {
        /* DIFF: sub-heads 2h+m against K sub-heads 2g+m; DIFF2: query heads 2h+m against the one K of g */
        const int qs = maps == 2 ? 2 * h + mp : h, ks = diff ? 2 * (h / rep) + mp : h / rep;
        float *a = mp ? tmp : row, mx = -INFINITY;
        for (int j = 0; j <= t; j++) {
            float dot = 0.0f;
            for (int x = 0; x < d; x++) dot += q[(size_t)t * Cq + (size_t)qs * d + x] * k[(size_t)j * Ckv + (size_t)ks * d + x];
            a[j] = dot * scale;
            mx = a[j] > mx ? a[j] : mx;
        }
        double sum = 0;
        for (int j = 0; j <= t; j++) sum += a[j] = expf(a[j] - mx);
        for (int j = 0; j <= t; j++) a[j] = (float)(a[j] / sum);
    }
    if (maps == 2)
        for (int j = 0; j <= t; j++) row[j] -= lambda * tmp[j];
    double mass = 0;
    for (int j = 0; j <= t; j++) mass += fabsf(row[j]);
    for (int j = 0; j <= t; j++) row[j] = mass > 0 ? (float)(row[j] / mass) : 0.0f;
}

/* Attention shares at the answer positions of the first `n` evaluation
 * sequences, and the outliers (attention logits, hidden states) over them. */
static da_status analyse(da_model *m, const da_task_config *t, const eval_set *e, int n, task_run *r) {
    const da_config *c = &m->cfg;
    const int T = e->T, d = da_head_dim(c), C = c->dim, Cq = da_q_dim(c), rep = c->n_heads / c->n_kv_heads;
    const int Ckv = C / rep, n_q = Cq / d; /* q sub-heads, both maps */
    const size_t n_logits = (size_t)n * c->n_layers * n_q * T * (T + 1) / 2, n_hidden = (size_t)n * c->n_layers * T * C;
    float *logits = malloc(n_logits * sizeof(float)), *hidden = malloc(n_hidden * sizeof(float));
    float *scratch = malloc((n_logits > n_hidden ? n_logits : n_hidden) * sizeof(float));
    float *row = malloc((size_t)T * sizeof(float)), *tmp = malloc((size_t)T * sizeof(float));
    da_acts *a = NULL;
    da_status st = da_ok();
    if (!logits || !hidden || !scratch || !row || !tmp) st = da_errorf("out of memory for the attention analysis");
    if (!st.code) st = da_acts_create(&a, c, 1, T);
    size_t nl = 0, nh = 0;
    double ans = 0, noise = 0, noise_tok = 0;
    long rows = 0;
    const float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < n && !st.code; i++) {
        const int *tok = e->tokens + (size_t)i * T, *src = e->src + (size_t)i * T;
        da_forward(m, a, tok, NULL, 1, T);
        for (int l = 0; l < c->n_layers; l++) {
            const float *q, *k;
            da_acts_qk(a, l, &q, &k);
            const float lambda = c->arch == DA_ARCH_DIFF ? da_model_lambda(m, l) : 0.0f;
            const float *lam = da_acts_lam(a, l); /* DIFF2: (T, H), per token */
            for (int p = 0; p < T; p++) {
                if (src[p] < 0) continue;
                for (int h = 0; h < c->n_heads; h++) {
                    attention_row(c, q, k, lam ? lam[(size_t)p * c->n_heads + h] : lambda, h, p, row, tmp);
                    for (int j = 0; j < p; j++) {
                        if (j == src[p] || j == src[p] + 1) ans += row[j];
                        else noise += row[j];
                        if (da_task_is_noise(t, tok[j])) noise_tok += row[j];
                    }
                    rows++;
                }
            }
            for (int s = 0; s < n_q; s++) { /* DIFF: q sub-head 2i+m with k sub-head 2g+m; DIFF2: with k head g */
                const int ks = c->arch == DA_ARCH_DIFF    ? 2 * ((s / 2) / rep) + s % 2
                               : c->arch == DA_ARCH_DIFF2 ? (s / 2) / rep
                                                          : s / rep;
                for (int p = 0; p < T; p++)
                    for (int j = 0; j <= p; j++) {
                        float dot = 0.0f;
                        for (int x = 0; x < d; x++) dot += q[(size_t)p * Cq + (size_t)s * d + x] * k[(size_t)j * Ckv + (size_t)ks * d + x];
                        logits[nl++] = dot * scale;
                    }
            }
            memcpy(hidden + nh, da_acts_hidden(a, l), (size_t)T * C * sizeof(float));
            nh += (size_t)T * C;
        }
    }
    if (!st.code) {
        r->attn_answer = rows ? ans / rows : 0, r->attn_noise = rows ? noise / rows : 0;
        r->attn_noise_tokens = rows ? noise_tok / rows : 0;
        da_outlier_stats_of(logits, nl, scratch, &r->out.logits);
        da_outlier_stats_of(hidden, nh, scratch, &r->out.hidden);
        r->out.tokens = (long)n * T;
    }
    da_acts_free(a);
    free(logits), free(hidden), free(scratch), free(row), free(tmp);
    return st;
}

static void model_config(const da_task_compare_config *c, const da_task_config *t, da_arch arch, da_config *cfg) {
    da_config_default(cfg);
    cfg->arch = arch;
    cfg->dim = c->dim;
    cfg->n_layers = c->layers;
    cfg->n_heads = cfg->n_kv_heads = da_arch_heads(arch, c->heads);
    cfg->ffn_hidden = da_default_ffn_hidden(c->dim);
    cfg->vocab_size = t->vocab;
    cfg->max_seq_len = t->seq;
}

/* Every tensor of dst whose name and shape src has too gets src's values:
 * at equal parameters that is every tensor but DIFF's lambdas and head norm. */
int da_copy_shared_init(da_model *dst, const da_model *src) {
    int copied = 0;
    for (int i = 0; i < dst->n_tensors; i++) {
        const da_tensor *a = &dst->tensors[i], *b = da_model_find(src, a->name);
        if (!b || a->ndim != b->ndim || a->shape[0] != b->shape[0] || (a->ndim > 1 && a->shape[1] != b->shape[1]))
            continue;
        memcpy(dst->params + a->offset, src->params + b->offset, a->numel * sizeof(float));
        copied++;
    }
    return copied;
}

static void progress(const da_task_compare_config *c, const char *what, long step, double acc, double loss) {
    if (c->quiet) return;
    if (step == 0) /* no training step yet, so no loss */
        fprintf(stderr, "\r  %s step 0/%ld  answer accuracy %.3f   ", what, c->steps, acc);
    else fprintf(stderr, "\r  %s step %ld/%ld  loss %.4f  answer accuracy %.3f   ", what, step, c->steps, loss, acc);
    if (step == c->steps) fprintf(stderr, "\n");
    fflush(stderr);
}

/* Trains model m on the stream of seed `data_seed` and evaluates it; icl:
 * order robustness on the episodes of order_seed. */
static da_status train_one(const da_task_compare_config *c, const da_task_config *t, da_model *m,
                           uint64_t data_seed, const eval_set *e, uint64_t order_seed, const char *what, task_run *r) {
    const int B = c->batch, T = t->seq;
    da_acts *a = NULL;
    da_adamw opt = {0};
    int *tok = malloc((size_t)B * T * sizeof(int)), *tgt = malloc((size_t)B * T * sizeof(int));
    da_status st = !tok || !tgt ? da_errorf("out of memory for a batch") : da_ok();
    if (!st.code) st = da_acts_create(&a, &m->cfg, B, T);
    if (!st.code) st = da_model_alloc_grads(m);
    if (!st.code) st = da_adamw_create(&opt, m->n_params);
    da_rng data;
    da_rng_seed(&data, data_seed);
    const da_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f};
    const long warmup = c->steps / 10;
    const double t0 = da_now_s();
    float loss = NAN;
    r->n_params = m->n_params;
    for (long step = 0; !st.code; step++) {
        if (step % c->eval_every == 0 || step == c->steps) {
            if (r->n_evals >= MAX_EVALS) { /* da_task_compare checks steps / eval_every first */
                st = da_errorf("more than %d evaluations: raise --eval-every", MAX_EVALS);
                break;
            }
            const int i = r->n_evals++;
            r->step[i] = step;
            r->acc[i] = answer_accuracy(m, a, B, e);
            for (int l = 0; l < m->cfg.n_layers && l < MAX_LAYERS; l++)
                r->lambda[i][l] = m->cfg.arch == DA_ARCH_DIFF ? da_model_lambda(m, l) : NAN;
            progress(c, what, step, r->acc[i], loss);
        }
        if (step == c->steps) break;
        if (c->stop && *c->stop) {
            st = da_errorf("interrupted while training %s", what);
            st.code = DA_INTERRUPTED;
            break;
        }
        for (int b = 0; b < B; b++) da_task_sample(t, &data, tok + (size_t)b * T, tgt + (size_t)b * T, NULL);
        da_model_zero_grads(m);
        loss = da_forward(m, a, tok, tgt, B, T);
        if (!isfinite(loss)) {
            st = da_errorf("%s: step %ld: the loss is %g; the model's numbers are not finite (lower --lr)", what,
                           step + 1, (double)loss);
            break;
        }
        da_backward(m, a);
        const float norm = da_grad_norm(m);
        if (norm > 1.0f) da_grad_scale(m, 1.0f / norm);
        da_adamw_step(&opt, m, &ac, da_lr_schedule(step, warmup, c->steps, c->lr, c->lr / 10));
    }
    r->train_s = da_now_s() - t0;
    if (!st.code) r->final_acc = r->acc[r->n_evals - 1];
    for (int i = 0; i < 3 && !st.code; i++) st = quantized_answer_accuracy(m, e, QBITS[i], &r->quant_acc[i]);
    if (!st.code) st = analyse(m, t, e, e->n < 16 ? e->n : 16, r);
    if (!st.code && t->kind == DA_TASK_ICL)
        st = da_icl_order_robustness(m, t, c->perm_episodes, c->perms, order_seed, &r->order);
    da_acts_free(a);
    da_adamw_free(&opt);
    free(tok), free(tgt);
    return st;
}

typedef struct {
    da_task_config task;
    char name[64];
} point;

static int make_points(const da_task_compare_config *c, point *p) {
    int n = 0;
    const da_task_kind k = c->task.kind;
    const int ns = c->n_seqs ? c->n_seqs : 1, np = c->n_pairs ? c->n_pairs : 1, nn = c->n_noises ? c->n_noises : 1;
    const int nd = c->n_demos ? c->n_demos : 1;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < (k == DA_TASK_MQAR ? np : k == DA_TASK_NOISY_RECALL ? nn : nd) && n < MAX_POINTS; j++) {
            da_task_config t = c->task;
            if (c->n_seqs) t.seq = c->seqs[i];
            if (k == DA_TASK_MQAR && c->n_pairs) t.pairs = c->pairs[j];
            if (k == DA_TASK_NOISY_RECALL && c->n_noises) t.noise = c->noises[j];
            if (k == DA_TASK_ICL) { /* its length follows from the demos */
                if (c->n_demos) t.demos = c->demos[j];
                t.seq = 2 * t.demos + 2;
            }
            p[n].task = t;
            if (k == DA_TASK_MQAR) snprintf(p[n].name, sizeof p[n].name, "pairs %d, seq %d", t.pairs, t.seq);
            else if (k == DA_TASK_NOISY_RECALL) snprintf(p[n].name, sizeof p[n].name, "noise %.2f, seq %d", t.noise, t.seq);
            else snprintf(p[n].name, sizeof p[n].name, "demos %d, classes %d, symbols %d", t.demos, t.classes, t.symbols);
            n++;
        }
    return n;
}

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

/* compare's rule: two seed means differ when their gap exceeds the sum of
 * their spreads. lower_better: steps; else accuracies. */
static const char *verdict(int seeds, double m0, double sd0, double m1, double sd1, int lower_better) {
    if (seeds < 2) return "one seed: spread unknown";
    if (fabs(m0 - m1) <= sd0 + sd1) return "within noise";
    return (m0 < m1) == lower_better ? "better" : "worse";
}

static task_run runs[MAX_POINTS][N_ARCHS][MAX_SEEDS];

/* Steps to a threshold over seeds: mean and sd when every seed reached it;
 * *reached gets how many did. */
static void steps_stats(const task_run *rs, int seeds, double thr, double *mean, double *sd, int *reached) {
    double v[MAX_SEEDS];
    *reached = 0;
    for (int s = 0; s < seeds; s++) {
        long k = da_steps_to_threshold(rs[s].step, rs[s].acc, rs[s].n_evals, thr);
        if (k >= 0) v[(*reached)++] = (double)k;
    }
    if (*reached == seeds) mean_sd(v, seeds, mean, sd);
    else *mean = NAN, *sd = NAN;
}

#define RUN_FIELD(expr, out_mean, out_sd)                                                                          \
    do {                                                                                                            \
        double v_[MAX_SEEDS];                                                                                       \
        for (int s = 0; s < c->seeds; s++) {                                                                        \
            const task_run *r = &rs[s];                                                                             \
            v_[s] = (expr);                                                                                         \
        }                                                                                                           \
        mean_sd(v_, c->seeds, &(out_mean), &(out_sd));                                                              \
    } while (0)

/* The file name of point p's order-robustness figure. */
static void margin_figure_name(char *buf, size_t n, int n_pts, int p) {
    if (n_pts == 1) snprintf(buf, n, "permutation_margin.png");
    else snprintf(buf, n, "permutation_margin_%d.png", p);
}

/* icl: the order-robustness table, mean ± sd over seeds of each episode-mean figure. */
static void write_md_orders(FILE *fp, const da_task_compare_config *c, const point *pts, int n_pts, int base) {
    fprintf(fp, "## Order robustness (in-context classification)\n\n| task | arch | accuracy, mean over %d random "
                "orders | best order | worst order | margin (best − worst) | grouped by class | alternating classes | "
                "verdict: margin | verdict: grouped |\n|---|---|---|---|---|---|---|---|---|---|\n",
            c->perms);
    for (int p = 0; p < n_pts; p++) {
        double bm = 0, bsd = 0, bg = 0, bgsd = 0;
        if (base >= 0) {
            const task_run *rs = runs[p][base];
            RUN_FIELD(r->order.margin, bm, bsd);
            RUN_FIELD(r->order.grouped, bg, bgsd);
        }
        for (int a = 0; a < c->n_archs; a++) {
            const task_run *rs = runs[p][a];
            double m, sd, mm, msd, g, gsd;
            fprintf(fp, "| %s | %s |", pts[p].name, da_compare_arch_label(c->archs[a]));
            RUN_FIELD(r->order.mean, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            RUN_FIELD(r->order.best, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            RUN_FIELD(r->order.worst, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            RUN_FIELD(r->order.margin, mm, msd);
            fprintf(fp, " %.3f ± %.3f |", mm, msd);
            RUN_FIELD(r->order.grouped, g, gsd);
            fprintf(fp, " %.3f ± %.3f |", g, gsd);
            RUN_FIELD(r->order.alternating, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            if (a == base) fprintf(fp, " baseline | baseline |\n");
            else if (base < 0) fprintf(fp, " no softmax baseline listed | – |\n");
            else fprintf(fp, " %s | %s |\n", verdict(c->seeds, mm, msd, bm, bsd, 1), verdict(c->seeds, g, gsd, bg, bgsd, 0));
        }
    }
    fprintf(fp, "\nEach of %d held-out episodes (a rule and its demonstrations) is scored on every distinct symbol of "
                "its demos, with the same demos in %d random orders, grouped by class, and with the classes taking "
                "turns. Best, worst and margin are per episode (the best and worst of its random orders), then "
                "averaged over the episodes; the paper's margin is that of one fixed set of demonstrations. A smaller "
                "margin is better.\n\n",
            c->perm_episodes, c->perms);
    char name[64];
    for (int p = 0; p < n_pts; p++) {
        margin_figure_name(name, sizeof name, n_pts, p);
        fprintf(fp, "![order robustness, %s](%s)\n\n", pts[p].name, name);
    }
}

static void write_md(FILE *fp, const da_task_compare_config *c, const point *pts, int n_pts, double wall_s) {
    fprintf(fp, "# Retrieval: %s, each architecture against the softmax baseline\n\n", da_task_name(c->task.kind));
    fprintf(fp, "dim %d, %d layers, heads per layer at equal parameters:", c->dim, c->layers);
    for (int a = 0; a < c->n_archs; a++)
        fprintf(fp, "%s %s %d", a ? "," : "", da_compare_arch_label(c->archs[a]), da_arch_heads(c->archs[a], c->heads));
    fprintf(fp, "; batch %d, %ld steps, lr %g, %d seed(s); held-out evaluation on %d sequences every %d steps. Wall "
                "time %.0f s.\n\n",
            c->batch, c->steps, (double)c->lr, c->seeds, c->eval_seqs, c->eval_every, wall_s);
    fprintf(fp, "## Steps to answer accuracy and final accuracy\n\n| task | arch | to 50%% | to 90%% | to 99%% | final "
                "accuracy | verdict: steps to 90%% | verdict: final accuracy |\n|---|---|---|---|---|---|---|---|\n");
    const int base = arch_slot(c, DA_ARCH_SOFTMAX);
    for (int p = 0; p < n_pts; p++) {
        double base_m = 0, base_sd = 0, base_fm = 0, base_fsd = 0;
        int base_reached = 0;
        if (base >= 0) { /* the baseline first, for the verdicts */
            const task_run *rs = runs[p][base];
            steps_stats(rs, c->seeds, 0.9, &base_m, &base_sd, &base_reached);
            RUN_FIELD(r->final_acc, base_fm, base_fsd);
        }
        for (int a = 0; a < c->n_archs; a++) {
            const task_run *rs = runs[p][a];
            fprintf(fp, "| %s | %s |", pts[p].name, da_compare_arch_label(c->archs[a]));
            double m90 = NAN, sd90 = NAN;
            int reached90 = 0;
            for (int k = 0; k < 3; k++) {
                double m, sd;
                int reached;
                steps_stats(rs, c->seeds, THRESH[k], &m, &sd, &reached);
                if (k == 1) m90 = m, sd90 = sd, reached90 = reached;
                if (reached == c->seeds) fprintf(fp, " %.0f ± %.0f |", m, sd);
                else if (reached) fprintf(fp, " %d/%d seeds |", reached, c->seeds);
                else fprintf(fp, " not reached |");
            }
            double fm, fsd;
            RUN_FIELD(r->final_acc, fm, fsd);
            fprintf(fp, " %.3f ± %.3f |", fm, fsd);
            if (a == base || base < 0) {
                fprintf(fp, a == base ? " baseline | baseline |\n" : " no softmax baseline listed | – |\n");
                continue;
            }
            if (reached90 == c->seeds && base_reached == c->seeds)
                fprintf(fp, " %s |", verdict(c->seeds, m90, sd90, base_m, base_sd, 1));
            else if (reached90 == c->seeds && base_reached < c->seeds)
                fprintf(fp, " better (baseline %d/%d seeds reached) |", base_reached, c->seeds);
            else if (reached90 < c->seeds && base_reached == c->seeds)
                fprintf(fp, " worse (%d/%d seeds reached) |", reached90, c->seeds);
            else
                fprintf(fp, " neither reached in every seed |");
            fprintf(fp, " %s |\n", verdict(c->seeds, fm, fsd, base_fm, base_fsd, 0));
        }
    }
    fprintf(fp, "\nSteps are the first evaluation (every %d steps) at or above the threshold, mean ± sample sd over "
                "seeds; \"k/n seeds\" when only some seeds reached it. A verdict calls a difference only when the "
                "means differ by more than the sum of the seed spreads (compare's rule).\n\n",
            c->eval_every);
    fprintf(fp, "## The trained models\n\n| task | arch | accuracy, 8-bit logits | 6-bit | 4-bit | attention on the "
                "answer pair | attention elsewhere | attention on noise tokens | top-1 \\|attn logit\\| | top-1 "
                "\\|hidden\\| | λ per layer (first seed) |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int p = 0; p < n_pts; p++)
        for (int a = 0; a < c->n_archs; a++) {
            const task_run *rs = runs[p][a];
            double m, sd;
            fprintf(fp, "| %s | %s |", pts[p].name, da_compare_arch_label(c->archs[a]));
            for (int i = 0; i < 3; i++) {
                RUN_FIELD(r->quant_acc[i], m, sd);
                fprintf(fp, " %.3f ± %.3f |", m, sd);
            }
            RUN_FIELD(r->attn_answer, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            RUN_FIELD(r->attn_noise, m, sd);
            fprintf(fp, " %.3f ± %.3f |", m, sd);
            if (c->task.kind == DA_TASK_NOISY_RECALL) {
                RUN_FIELD(r->attn_noise_tokens, m, sd);
                fprintf(fp, " %.3f ± %.3f |", m, sd);
            } else {
                fprintf(fp, " – |");
            }
            RUN_FIELD(r->out.logits.top[0], m, sd);
            fprintf(fp, " %.2f ± %.2f |", m, sd);
            RUN_FIELD(r->out.hidden.top[0], m, sd);
            fprintf(fp, " %.2f ± %.2f |", m, sd);
            const task_run *r0 = &rs[0];
            for (int l = 0; l < c->layers && l < MAX_LAYERS; l++)
                if (c->archs[a] == DA_ARCH_DIFF) fprintf(fp, "%s%.3f", l ? ", " : " ", r0->lambda[r0->n_evals - 1][l]);
            fprintf(fp, "%s |\n", c->archs[a] == DA_ARCH_DIFF ? "" : " –");
        }
    fprintf(fp, "\nAccuracies with quantized logits run the inference engine with the attention logits of each query "
                "row fake-quantized (dynamic absmax, symmetric) before the softmax, on the same held-out sequences. Attention shares are taken at "
                "every answer position of 16 held-out sequences, per layer and head; DIFF's map is A1 - λA2 over "
                "its absolute mass (as in `eval attention`). \"Answer pair\": the retrieved key and its value; "
                "\"elsewhere\": every other earlier position. Every number, and every curve, is in report.json.\n\n");
    if (c->task.kind == DA_TASK_ICL) write_md_orders(fp, c, pts, n_pts, base);
    for (int p = 0; p < n_pts; p++) fprintf(fp, "![accuracy, %s](accuracy_%d.png)\n\n", pts[p].name, p);
    fprintf(fp, "![steps to 90%%](steps_to_90.png)\n");
    if (arch_slot(c, DA_ARCH_DIFF) >= 0) fprintf(fp, "\n![lambda](lambda.png)\n");
}

static void write_json(FILE *fp, const da_task_compare_config *c, const point *pts, int n_pts, double wall_s) {
    fprintf(fp, "{\"task\":\"%s\",\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,\"batch\":%d,\"steps\":%ld,\"lr\":%g,"
                "\"seeds\":%d,\"eval_seqs\":%d,\"eval_every\":%d,\"wall_seconds\":%.1f,\"points\":[",
            da_task_name(c->task.kind), c->dim, c->layers, c->heads, c->batch, c->steps, (double)c->lr, c->seeds,
            c->eval_seqs, c->eval_every, wall_s);
    for (int p = 0; p < n_pts; p++) {
        const da_task_config *t = &pts[p].task;
        fprintf(fp, "%s{\"name\":\"%s\",\"seq\":%d,\"vocab\":%d,\"pairs\":%d,\"alpha\":%g,\"noise\":%g,"
                    "\"noise_vocab\":%d,",
                p ? "," : "", pts[p].name, t->seq, t->vocab, t->pairs, t->alpha, t->noise, t->noise_vocab);
        if (t->kind == DA_TASK_ICL)
            fprintf(fp, "\"demos\":%d,\"classes\":%d,\"symbols\":%d,\"perms\":%d,\"perm_episodes\":%d,", t->demos,
                    t->classes, t->symbols, c->perms, c->perm_episodes);
        fprintf(fp, "\"archs\":{");
        for (int a = 0; a < c->n_archs; a++) {
            fprintf(fp, "%s\"%s\":[", a ? "," : "", da_arch_name(c->archs[a]));
            for (int s = 0; s < c->seeds; s++) {
                const task_run *r = &runs[p][a][s];
                fprintf(fp, "%s{\"seed\":%d,\"n_params\":%zu,\"train_seconds\":%.1f,\"final_accuracy\":%.4f,", s ? "," : "",
                        c->seed0 + s, r->n_params, r->train_s, r->final_acc);
                for (int k = 0; k < 3; k++)
                    fprintf(fp, "\"steps_to_%d\":%ld,", (int)(THRESH[k] * 100 + 0.5),
                            da_steps_to_threshold(r->step, r->acc, r->n_evals, THRESH[k]));
                fprintf(fp, "\"quant_accuracy\":{\"8\":%.4f,\"6\":%.4f,\"4\":%.4f},", r->quant_acc[0], r->quant_acc[1],
                        r->quant_acc[2]);
                fprintf(fp, "\"attention_answer\":%.4f,\"attention_elsewhere\":%.4f,\"attention_noise_tokens\":%.4f,",
                        r->attn_answer, r->attn_noise, r->attn_noise_tokens);
                fprintf(fp, "\"attn_logit_top1\":%.4f,\"attn_logit_median\":%.4f,\"hidden_top1\":%.4f,"
                            "\"hidden_median\":%.4f,",
                        r->out.logits.top[0], r->out.logits.median, r->out.hidden.top[0], r->out.hidden.median);
                if (t->kind == DA_TASK_ICL) {
                    const da_icl_order_result *o = &r->order;
                    fprintf(fp, "\"order\":{\"mean\":%.4f,\"best\":%.4f,\"worst\":%.4f,\"margin\":%.4f,\"grouped\":%.4f,"
                                "\"alternating\":%.4f},",
                            o->mean, o->best, o->worst, o->margin, o->grouped, o->alternating);
                }
                fprintf(fp, "\"curve\":[");
                for (int i = 0; i < r->n_evals; i++) {
                    fprintf(fp, "%s{\"step\":%ld,\"accuracy\":%.4f", i ? "," : "", r->step[i], r->acc[i]);
                    if (c->archs[a] == DA_ARCH_DIFF) {
                        fprintf(fp, ",\"lambda\":[");
                        for (int l = 0; l < c->layers && l < MAX_LAYERS; l++)
                            fprintf(fp, "%s%.4f", l ? "," : "", r->lambda[i][l]);
                        fprintf(fp, "]");
                    }
                    fprintf(fp, "}");
                }
                fprintf(fp, "]}");
            }
            fprintf(fp, "]");
        }
        fprintf(fp, "}}");
    }
    fprintf(fp, "]}\n");
}

/* icl: per point, the seed means of each architecture's order figures as bars. */
static da_status margin_figures(const da_task_compare_config *c, const point *pts, int n_pts) {
    static const char *const cats[5] = {"mean over random orders", "best order", "worst order", "grouped by class",
                                        "alternating classes"};
    char path[4200], name[64], title[160];
    da_status st = da_ok();
    for (int p = 0; p < n_pts && !st.code; p++) {
        double v[N_ARCHS][5];
        const double *vp[N_ARCHS];
        const char *groups[N_ARCHS];
        for (int a = 0; a < c->n_archs; a++) {
            const task_run *rs = runs[p][a];
            double sd;
            RUN_FIELD(r->order.mean, v[a][0], sd);
            RUN_FIELD(r->order.best, v[a][1], sd);
            RUN_FIELD(r->order.worst, v[a][2], sd);
            RUN_FIELD(r->order.grouped, v[a][3], sd);
            RUN_FIELD(r->order.alternating, v[a][4], sd);
            vp[a] = v[a], groups[a] = da_compare_arch_label(c->archs[a]);
        }
        margin_figure_name(name, sizeof name, n_pts, p);
        snprintf(path, sizeof path, "%s/%s", c->out_dir, name);
        snprintf(title, sizeof title, "Accuracy by demo order, %s (mean over episodes%s)", pts[p].name,
                 c->seeds > 1 ? " and seeds" : "");
        st = da_plot_bars(path, title, "accuracy", cats, 5, groups, vp, c->n_archs);
    }
    return st;
}

static da_status figures(const da_task_compare_config *c, const point *pts, int n_pts) {
    char path[4200], title[160];
    da_status st = da_ok();
    /* accuracy against steps: per architecture the seed mean and the band of mean ± sd */
    for (int p = 0; p < n_pts && !st.code; p++) {
        static double x[MAX_EVALS], y[N_ARCHS][3][MAX_EVALS];
        const int n = runs[p][0][0].n_evals;
        da_series s[N_ARCHS];
        for (int a = 0; a < c->n_archs; a++) {
            for (int i = 0; i < n; i++) {
                double v[MAX_SEEDS], m, sd;
                for (int k = 0; k < c->seeds; k++) v[k] = runs[p][a][k].acc[i];
                mean_sd(v, c->seeds, &m, &sd);
                x[i] = (double)runs[p][0][0].step[i];
                y[a][0][i] = m, y[a][1][i] = fmax(m - sd, 0), y[a][2][i] = fmin(m + sd, 1); /* accuracies */
            }
        }
        const double *lo[N_ARCHS], *hi[N_ARCHS];
        for (int a = 0; a < c->n_archs; a++) {
            s[a] = (da_series){da_compare_arch_label(c->archs[a]), x, y[a][0], n};
            lo[a] = c->seeds > 1 ? y[a][1] : NULL, hi[a] = c->seeds > 1 ? y[a][2] : NULL;
        }
        snprintf(path, sizeof path, "%s/accuracy_%d.png", c->out_dir, p);
        snprintf(title, sizeof title, "%s (%s): held-out answer accuracy%s", da_task_name(c->task.kind), pts[p].name,
                 c->seeds > 1 ? ", mean ± sd over seeds" : "");
        st = da_plot_lines_band(path, title, "step", "answer accuracy", s, lo, hi, c->n_archs);
    }
    if (st.code) return st;
    /* steps to 90% against difficulty (the sweep point's index); NAN where a seed did not reach it */
    static double px[MAX_POINTS], py[N_ARCHS][MAX_POINTS];
    da_series s90[N_ARCHS];
    for (int a = 0; a < c->n_archs; a++) {
        for (int p = 0; p < n_pts; p++) {
            double m, sd;
            int reached;
            steps_stats(runs[p][a], c->seeds, 0.9, &m, &sd, &reached);
            px[p] = p, py[a][p] = m;
        }
        s90[a] = (da_series){da_compare_arch_label(c->archs[a]), px, py[a], n_pts};
    }
    snprintf(path, sizeof path, "%s/steps_to_90.png", c->out_dir);
    if ((st = da_plot_lines(path, "Steps to 90% answer accuracy by sweep point (report.md lists them)",
                            "sweep point", "steps", s90, c->n_archs)).code)
        return st;
    if (c->task.kind == DA_TASK_ICL && (st = margin_figures(c, pts, n_pts)).code) return st;
    /* lambda per layer during training: DIFF, first point and seed */
    const int diff = arch_slot(c, DA_ARCH_DIFF);
    if (diff < 0) return st;
    const task_run *r = &runs[0][diff][0];
    static double lx[MAX_EVALS], ly[MAX_LAYERS][MAX_EVALS];
    static char lnames[MAX_LAYERS][32];
    da_series ls[MAX_LAYERS];
    const int L = c->layers < MAX_LAYERS ? c->layers : MAX_LAYERS;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < r->n_evals; i++) lx[i] = (double)r->step[i], ly[l][i] = r->lambda[i][l];
        snprintf(lnames[l], sizeof lnames[l], "layer %d", l);
        ls[l] = (da_series){lnames[l], lx, ly[l], r->n_evals};
    }
    snprintf(path, sizeof path, "%s/lambda.png", c->out_dir);
    snprintf(title, sizeof title, "DIFF lambda per layer during training (%s, first seed)", pts[0].name);
    return da_plot_lines(path, title, "step", "lambda", ls, L);
}

static da_status task_compare_locked(const da_task_compare_config *cfg, int *lock_fd);

/* The whole comparison holds out_dir's lock (io/run_lock.h). */
da_status da_task_compare(const da_task_compare_config *cfg) {
    int lock_fd = -1;
    da_status st = task_compare_locked(cfg, &lock_fd);
    da_run_unlock(lock_fd);
    return st;
}

static da_status task_compare_locked(const da_task_compare_config *cfg, int *lock_fd) {
    const da_task_compare_config *c = cfg;
    if (c->seeds < 1 || c->seeds > MAX_SEEDS) return da_errorf("--seeds must be 1..%d", MAX_SEEDS);
    if (c->layers > MAX_LAYERS) return da_errorf("--layers %d: at most %d for the task comparison", c->layers, MAX_LAYERS);
    if (c->steps < 1 || c->eval_every < 1 || c->steps / c->eval_every + 2 > MAX_EVALS)
        return da_errorf("--steps %ld and --eval-every %d: need steps >= 1 and at most %d evaluations", c->steps,
                         c->eval_every, MAX_EVALS - 2);
    if (c->eval_seqs < 1) return da_errorf("--eval-seqs must be positive");
    if (c->task.kind == DA_TASK_MQAR && c->n_noises) return da_errorf("--noise applies to noisy-recall, not mqar");
    if (c->task.kind == DA_TASK_NOISY_RECALL && c->n_pairs)
        return da_errorf("--pairs applies to mqar, not noisy-recall (its pairs fill the sequence)");
    if (c->task.kind == DA_TASK_ICL && (c->n_pairs || c->n_noises || c->n_seqs))
        return da_errorf("--pairs, --noise and --seq do not apply to icl (its length is 2 demos + 2: set --demos)");
    if (c->task.kind != DA_TASK_ICL && c->n_demos) return da_errorf("--demos applies to icl only");
    if (c->task.kind == DA_TASK_ICL && (c->perms < 2 || c->perm_episodes < 1))
        return da_errorf("--perms %d and --perm-episodes %d: need at least 2 orders and 1 episode", c->perms,
                         c->perm_episodes);
    if (c->n_archs < 1 || c->n_archs > N_ARCHS)
        return da_errorf("compare --task: %d architectures (1..%d; --archs)", c->n_archs, N_ARCHS);
    static point pts[MAX_POINTS];
    const int n_pts = make_points(c, pts);
    da_status st = da_ok();
    for (int p = 0; p < n_pts && !st.code; p++) {
        if ((st = da_task_validate(&pts[p].task)).code) return da_errorf("%s: %s", pts[p].name, st.msg);
        for (int a = 0; a < c->n_archs && !st.code; a++) {
            da_config mc;
            model_config(c, &pts[p].task, c->archs[a], &mc);
            st = da_config_validate(&mc);
        }
    }
    if (st.code) return st;
    da_train_config tc; /* the training flags through train's table: --lr -1, 0 and 1e30 are refused alike */
    da_train_config_default(&tc);
    tc.lr = c->lr, tc.min_lr = c->lr / 10, tc.batch = c->batch, tc.steps = c->steps, tc.warmup = c->steps / 10;
    if ((st = da_train_config_validate(&tc)).code) return da_errorf("compare --task: %s", st.msg);
    static const char *const report[] = {"report.json"};
    if (!c->force && (st = da_refuse_existing(c->out_dir, "compare", report, 1)).code) return st;
    if ((st = da_make_dirs(c->out_dir)).code) return st;
    if ((st = da_run_lock(c->out_dir, lock_fd)).code) return st;
    memset(runs, 0, sizeof runs);
    const double t_start = da_now_s();
    for (int p = 0; p < n_pts && !st.code; p++) {
        const da_task_config *t = &pts[p].task;
        eval_set e;
        /* held out: a seed no training stream uses (those are seed0 + s, mixed below) */
        st = eval_set_make(&e, t, c->eval_seqs, 0xE7A15E7ULL + (uint64_t)p);
        for (int s = 0; s < c->seeds && !st.code; s++) {
            const uint64_t seed = (uint64_t)(c->seed0 + s);
            da_model models[N_ARCHS];
            memset(models, 0, sizeof models);
            for (int a = 0; a < c->n_archs && !st.code; a++) {
                da_config mc;
                model_config(c, t, c->archs[a], &mc);
                if ((st = da_model_create(&models[a], &mc)).code) break;
                da_model_init(&models[a], seed);
                if (a) da_copy_shared_init(&models[a], &models[0]);
            }
            for (int a = 0; a < c->n_archs && !st.code; a++) {
                char what[128];
                snprintf(what, sizeof what, "%s %s seed %llu", pts[p].name, da_compare_arch_label(c->archs[a]),
                         (unsigned long long)seed);
                if (!c->quiet) fprintf(stderr, "compare: %s\n", what);
                /* the same stream for every architecture; the order episodes, like the evaluation set, for every seed */
                st = train_one(c, t, &models[a], seed * 0x9E3779B97F4A7C15ULL + (uint64_t)p, &e,
                               0x0DE450DEULL + (uint64_t)p, what, &runs[p][a][s]);
            }
            for (int a = 0; a < c->n_archs; a++) da_model_free(&models[a]);
        }
        eval_set_free(&e);
    }
    if (st.code) return st;
    const double wall = da_now_s() - t_start;
    char path[4200];
    da_atomic_file af;
    snprintf(path, sizeof path, "%s/report.json", c->out_dir);
    if ((st = da_atomic_open(&af, path)).code) return st;
    char *json = NULL;
    size_t json_n = 0;
    FILE *ms = open_memstream(&json, &json_n);
    if (ms) write_json(ms, c, pts, n_pts, wall);
    if (!ms || fclose(ms) || da_json_write_finite(af.fp, json)) st = da_atomic_fail(&af, errno ? errno : ENOMEM);
    free(json);
    if (st.code || (st = da_atomic_commit(&af)).code) return st;
    if ((st = figures(c, pts, n_pts)).code) return st;
    snprintf(path, sizeof path, "%s/report.md", c->out_dir);
    if ((st = da_atomic_open(&af, path)).code) return st;
    write_md(af.fp, c, pts, n_pts, wall);
    return da_atomic_commit(&af);
}
