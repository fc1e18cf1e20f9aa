/* compare --task mqar|noisy-recall|icl|counterfactual: the cells of a study,
 * and each run: train on the generated stream from the shared
 * initialisation, score the held-out sequences, analyse the trained model,
 * write the result file (see diffattn/experiments.h and docs/tasks.md). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attn/variant.h"
#include "model/probe.h"
#include "core/clock.h"
#include "experiments/arch_column.h"
#include "experiments/compare.h"
#include "experiments/task_study.h"
#include "io/atomic_file.h"
#include "io/run_lock.h"

static const int QBITS[TASK_N_QBITS] = TASK_QBITS;

int task_baseline_slot(const da_task_compare_config *c) {
    for (int i = 0; i < c->n_archs; i++)
        if (c->archs[i] == da_arch_baseline() && !c->windows[i] && !c->columns[i][0]) return i;
    return -1;
}

int task_has_lambda(const da_task_compare_config *c, int a) { return da_arch_describe(c->archs[a]).per_layer_lambda; }

int task_lambda_slot(const da_task_compare_config *c) {
    for (int i = 0; i < c->n_archs; i++)
        if (task_has_lambda(c, i) && !c->windows[i] && !c->columns[i][0]) return i;
    return -1;
}

const char *task_arch_name(const da_task_compare_config *c, int a) {
    return c->windows[a] ? "swa" : c->columns[a][0] ? c->columns[a] : da_arch_name(c->archs[a]);
}

const char *task_arch_label(const da_task_compare_config *c, int a) {
    return c->windows[a] ? "SWA" : c->columns[a][0] ? c->columns[a] : da_compare_arch_label(c->archs[a]);
}

da_status da_task_parse_archs(da_task_compare_config *c, const char *list) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list);
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS], n = 0;
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX], names[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        const int swa = !strcmp(tok, "swa");
        da_arch a = da_arch_baseline(); /* swa: the baseline with a window */
        int options = 0;
        if (!swa && strlen(tok) >= DA_COLUMN_NAME_MAX)
            return da_errorf("--archs: \"%s\" is longer than %d characters", tok, DA_COLUMN_NAME_MAX - 1);
        if (!swa) {
            da_status st = da_arch_column_parse(tok, &a, &options);
            char all[128];
            if (st.code)
                return da_errorf("%s (columns: %s, swa, or arch:flag=value with flags %s)", st.msg,
                                 da_arch_names_all(all, sizeof all, ", "), ARCH_COLUMN_OPTIONS);
        }
        if (swa && c->swa_window < 1)
            return da_errorf("--archs: swa (softmax with a sliding window) needs --swa-window W (W >= 1)");
        if (n == DA_COMPARE_MAX_ARCHS) return da_errorf("--archs: at most %d architectures", DA_COMPARE_MAX_ARCHS);
        snprintf(columns[n], sizeof columns[n], "%s", options ? tok : "");
        snprintf(names[n], sizeof names[n], "%s", swa ? "swa" : options ? tok : da_arch_name(a));
        for (int i = 0; i < n; i++)
            if (!strcmp(names[i], names[n])) return da_errorf("--archs: %s is listed twice", tok);
        archs[n] = a, windows[n++] = swa ? c->swa_window : 0;
    }
    char defaults[128];
    if (!n)
        return da_errorf("--archs: empty list (expected e.g. %s,swa)", da_arch_names_default(defaults, sizeof defaults, ","));
    memcpy(c->archs, archs, sizeof archs), memcpy(c->windows, windows, sizeof windows);
    memcpy(c->columns, columns, sizeof columns);
    c->n_archs = n;
    return da_ok();
}

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
    c->n_archs = da_arch_compare_defaults(c->archs);
    c->perms = 10;
    c->perm_episodes = 128;
    c->cf_episodes = 1024;
}

long da_steps_to_threshold(const long *steps, const double *acc, int n, double threshold) {
    for (int i = 0; i < n; i++)
        if (acc[i] >= threshold) return steps[i];
    return -1;
}

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
        e->answers += t->kind == DA_TASK_COUNTERFACTUAL /* held out: episodes only, no memory sequences */
                          ? da_cf_episode(t, &r, e->tokens + o, e->targets + o, e->src + o, NULL)
                          : da_task_sample(t, &r, e->tokens + o, e->targets + o, e->src + o);
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

/* Attention shares at the answer positions of the first `n` evaluation
 * sequences, and the outliers (attention logits, hidden states) over them. */
static da_status analyse(da_model *m, const da_task_config *t, const eval_set *e, int n, task_run *r) {
    const da_config *c = &m->cfg;
    const attn_variant *var = da_attn_variant_of(c->arch);
    const int T = e->T, C = c->dim, n_q = var->logit_maps(c);
    const size_t n_logits = (size_t)n * c->n_layers * n_q * T * (T + 1) / 2, n_hidden = (size_t)n * c->n_layers * T * C;
    float *logits = malloc(n_logits * sizeof(float)), *hidden = malloc(n_hidden * sizeof(float));
    float *scratch = malloc((n_logits > n_hidden ? n_logits : n_hidden) * sizeof(float));
    float *row = malloc((size_t)T * sizeof(float)), *tmp = malloc((size_t)T * sizeof(float));
    da_acts *a = NULL;
    da_status st = da_ok();
    if (!logits || !hidden || !scratch || !row || !tmp) st = da_errorf("out of memory for the attention analysis");
    if (!st.code) st = da_acts_create(&a, c, 1, T);
    size_t nl = 0, nh = 0;
    double ans = 0, noise = 0, noise_tok = 0, look[3] = {0};
    long rows = 0, look_rows[3] = {0};
    const int cf = t->kind == DA_TASK_COUNTERFACTUAL, ctx_end = 2 * t->context_pairs;
    for (int i = 0; i < n && !st.code; i++) {
        const int *tok = e->tokens + (size_t)i * T, *src = e->src + (size_t)i * T;
        da_forward(m, a, tok, NULL, 1, T);
        for (int l = 0; l < c->n_layers; l++) {
            attn_probe pr;
            da_acts_probe(a, m, l, &pr);
            for (int p = 0; p < T; p++) {
                const int *tgt = e->targets + (size_t)i * T;
                if (cf && tgt[p] >= 0) { /* the lookback ratio at every answer, per condition */
                    const int cond = src[p] < 0 ? DA_CF_ABSENT
                                  : tgt[p] == da_cf_attribute_token(t, da_cf_fact(t, tok[p] - 2)) ? DA_CF_AGREE
                                                                                                 : DA_CF_COUNTER;
                    for (int h = 0; h < c->n_heads; h++) {
                        var->attention_row(&pr, h, p, row, tmp);
                        double on_ctx = 0, on_query = 0;
                        for (int j = 0; j <= p; j++) j < ctx_end ? (on_ctx += row[j]) : (on_query += row[j]);
                        look[cond] += on_ctx + on_query != 0 ? on_ctx / (on_ctx + on_query) : 0, look_rows[cond]++;
                    }
                }
                if (src[p] < 0) continue;
                for (int h = 0; h < c->n_heads; h++) {
                    var->attention_row(&pr, h, p, row, tmp);
                    for (int j = 0; j < p; j++) {
                        if (j == src[p] || j == src[p] + 1) ans += row[j];
                        else noise += row[j];
                        if (da_task_is_noise(t, tok[j])) noise_tok += row[j];
                    }
                    rows++;
                }
            }
            for (int s = 0; s < n_q; s++)
                for (int p = 0; p < T; p++) {
                    nl += (size_t)var->logits(&pr, s, p, 0, logits + nl);
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
        for (int k = 0; k < 3; k++) r->cf.lookback[k] = look_rows[k] ? look[k] / look_rows[k] : 0;
    }
    da_acts_free(a);
    free(logits), free(hidden), free(scratch), free(row), free(tmp);
    return st;
}

static void model_config(const da_task_compare_config *c, const task_cell *cell, int a, da_config *cfg) {
    const da_arch arch = c->archs[a];
    da_config_default(cfg);
    cfg->arch = arch;
    cfg->window = c->windows[a];
    cfg->dim = cell->dim;
    cfg->n_layers = cell->layers;
    cfg->n_heads = cfg->n_kv_heads = da_arch_heads(arch, cell->heads);
    cfg->ffn_hidden = da_default_ffn_hidden(cell->dim);
    cfg->vocab_size = cell->task.vocab;
    cfg->max_seq_len = cell->task.seq;
    /* checked by da_task_parse_archs; an error shows when the model is created */
    if (c->columns[a][0] && da_arch_column_apply(c->columns[a], cfg).code) cfg->arch = DA_ARCH_N;
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
static da_status train_one(const da_task_compare_config *c, const task_cell *cell, da_model *m, uint64_t data_seed,
                           const eval_set *e, uint64_t order_seed, const char *what, task_run *r) {
    const da_task_config *t = &cell->task;
    const int B = cell->batch, T = t->seq;
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
            if (r->n_evals >= TASK_MAX_EVALS) { /* da_task_compare checks steps / eval_every first */
                st = da_errorf("more than %d evaluations: raise --eval-every", TASK_MAX_EVALS);
                break;
            }
            const int i = r->n_evals++;
            r->step[i] = step;
            r->acc[i] = answer_accuracy(m, a, B, e);
            for (int l = 0; l < m->cfg.n_layers && l < TASK_MAX_LAYERS; l++)
                r->lambda[i][l] = da_arch_describe(m->cfg.arch).per_layer_lambda ? da_model_lambda(m, l) : NAN;
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
        da_adamw_step(&opt, m, &ac, da_lr_schedule(step, warmup, c->steps, cell->lr, cell->lr / 10));
    }
    r->train_s = da_now_s() - t0;
    if (!st.code) r->final_acc = r->acc[r->n_evals - 1];
    for (int i = 0; i < TASK_N_QBITS && !st.code; i++) /* NaN where the engine has no quantized logits for the arch */
        if (da_arch_describe(m->cfg.arch).exact_logits_only) r->quant_acc[i] = NAN;
        else st = quantized_answer_accuracy(m, e, QBITS[i], &r->quant_acc[i]);
    if (!st.code) st = analyse(m, t, e, e->n < 16 ? e->n : 16, r);
    if (!st.code && t->kind == DA_TASK_ICL)
        st = da_icl_order_robustness(m, t, c->perm_episodes, c->perms, order_seed, &r->order);
    if (!st.code && t->kind == DA_TASK_COUNTERFACTUAL) { /* the counts, then the lookback ratios analyse measured */
        double look[3];
        memcpy(look, r->cf.lookback, sizeof look);
        st = da_cf_evaluate(m, t, c->cf_episodes, order_seed ^ 0xC0FFEEULL, &r->cf);
        memcpy(r->cf.lookback, look, sizeof look);
    }
    da_acts_free(a);
    da_adamw_free(&opt);
    free(tok), free(tgt);
    return st;
}

/* ---------------------------------------------------------------- the grid and its cells */

static const char *const GRID_KEYS[DA_GRID_N_KEYS] = {"heads", "dim", "layers", "lr", "batch"};

da_status da_task_grid_parse(da_task_compare_config *c, const char *spec) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    c->n_grid = 0;
    for (char *save = NULL, *ax = strtok_r(buf, " ;", &save); ax; ax = strtok_r(NULL, " ;", &save)) {
        char *eq = strchr(ax, '=');
        if (!eq) return da_errorf("--grid: \"%s\" is not key=v1,v2,... (keys heads, dim, layers, lr, batch)", ax);
        *eq = 0;
        int key = -1;
        for (int k = 0; k < DA_GRID_N_KEYS; k++)
            if (!strcmp(ax, GRID_KEYS[k])) key = k;
        if (key < 0) return da_errorf("--grid: unknown axis \"%s\" (heads, dim, layers, lr, batch)", ax);
        for (int i = 0; i < c->n_grid; i++)
            if ((int)c->grid[i].key == key) return da_errorf("--grid: axis %s given twice", ax);
        da_grid_axis *g = &c->grid[c->n_grid++];
        g->key = (da_grid_key)key, g->n = 0;
        for (char *s2 = NULL, *v = strtok_r(eq + 1, ",", &s2); v; v = strtok_r(NULL, ",", &s2)) {
            char *end;
            const double x = strtod(v, &end);
            const int integral = key != DA_GRID_LR;
            if (end == v || *end || !(x > 0) || (integral && x != floor(x)))
                return da_errorf("--grid: %s=%s: expected %s", GRID_KEYS[key], v,
                                 integral ? "positive integers" : "positive numbers");
            if (integral && x > 1 << 20)
                return da_errorf("--grid: %s=%s is out of range (1..%d)", GRID_KEYS[key], v, 1 << 20);
            if (g->n == DA_GRID_MAX_VALUES) return da_errorf("--grid: at most %d values per axis", DA_GRID_MAX_VALUES);
            g->values[g->n++] = x;
        }
        if (!g->n) return da_errorf("--grid: axis %s has no values", ax);
    }
    return da_ok();
}

/* The task sweep points of c: seq x (pairs | noise | demos). */
static int task_points(const da_task_compare_config *c, da_task_config *pts, char (*names)[64]) {
    int n = 0;
    const da_task_kind k = c->task.kind;
    const int ns = c->n_seqs ? c->n_seqs : 1, np = c->n_pairs ? c->n_pairs : 1, nn = c->n_noises ? c->n_noises : 1;
    const int nd = c->n_demos ? c->n_demos : 1;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < (k == DA_TASK_MQAR ? np : k == DA_TASK_NOISY_RECALL ? nn : k == DA_TASK_ICL ? nd : 1); j++) {
            da_task_config t = c->task;
            if (c->n_seqs) t.seq = c->seqs[i];
            if (k == DA_TASK_MQAR && c->n_pairs) t.pairs = c->pairs[j];
            if (k == DA_TASK_NOISY_RECALL && c->n_noises) t.noise = c->noises[j];
            if (k == DA_TASK_ICL) { /* its length follows from the demos */
                if (c->n_demos) t.demos = c->demos[j];
                t.seq = 2 * t.demos + 2;
            }
            pts[n] = t;
            if (k == DA_TASK_MQAR) snprintf(names[n], 64, "pairs %d, seq %d", t.pairs, t.seq);
            else if (k == DA_TASK_NOISY_RECALL) snprintf(names[n], 64, "noise %.2f, seq %d", t.noise, t.seq);
            else if (k == DA_TASK_ICL) snprintf(names[n], 64, "demos %d, classes %d, symbols %d", t.demos, t.classes, t.symbols);
            else snprintf(names[n], 64, "facts %d x %d, %d pairs, seq %d", t.entities, t.attributes, t.context_pairs, t.seq);
            n++;
        }
    return n;
}

da_status task_cells(const da_task_compare_config *c, task_cell **out, int *n_cells, int *n_points) {
    da_task_config pts[64];
    char names[64][64];
    const int np = task_points(c, pts, names);
    int combos = 1;
    for (int a = 0; a < c->n_grid; a++) combos *= c->grid[a].n;
    if ((long)np * combos > TASK_MAX_CELLS)
        return da_errorf("compare --task: %d cells (task points x grid); at most %d", np * combos, TASK_MAX_CELLS);
    task_cell *cells = calloc((size_t)np * combos, sizeof *cells);
    if (!cells) return da_errorf("out of memory for %d cells", np * combos);
    for (int p = 0, n = 0; p < np; p++)
        for (int g = 0; g < combos; g++, n++) {
            task_cell *x = &cells[n];
            x->task = pts[p], x->point = p;
            x->dim = c->dim, x->layers = c->layers, x->heads = c->heads, x->batch = c->batch, x->lr = c->lr;
            snprintf(x->point_name, sizeof x->point_name, "%s", names[p]);
            int rest = g, len = 0;
            for (int a = c->n_grid - 1; a >= 0; a--) { /* the last axis varies fastest */
                x->grid_index[a] = rest % c->grid[a].n, rest /= c->grid[a].n;
            }
            for (int a = 0; a < c->n_grid; a++) {
                const double v = c->grid[a].values[x->grid_index[a]];
                switch (c->grid[a].key) {
                case DA_GRID_HEADS: x->heads = (int)v; break;
                case DA_GRID_DIM: x->dim = (int)v; break;
                case DA_GRID_LAYERS: x->layers = (int)v; break;
                case DA_GRID_LR: x->lr = (float)v; break;
                default: x->batch = (int)v; break;
                }
                len += snprintf(x->grid_name + len, sizeof x->grid_name - (size_t)len, "%s%s %g", a ? ", " : "",
                                GRID_KEYS[c->grid[a].key], v);
                if (len >= (int)sizeof x->grid_name) len = (int)sizeof x->grid_name - 1;
            }
            snprintf(x->name, sizeof x->name, "%s%s%s", x->point_name, c->n_grid ? "; " : "", x->grid_name);
        }
    *out = cells, *n_cells = np * combos, *n_points = np;
    return da_ok();
}

/* ---------------------------------------------------------------- run files */

/* out_dir/runs/cell<i>_<arch>_seed<s>.run: "DASTUDY1", the size of task_run,
 * the settings the run was made with (a file made with others is not reused),
 * then the task_run itself. */
typedef struct {
    char magic[8];
    uint32_t run_size, reserved;
    char key[512];
} run_header;
_Static_assert(sizeof(run_header) == 528, "run_header layout changed");

static void run_index(const da_task_compare_config *c, int k, int *cell, int *seed, int *arch) {
    *arch = k % c->n_archs, *seed = (k / c->n_archs) % c->seeds, *cell = k / c->n_archs / c->seeds;
}

static void run_path(const da_task_compare_config *c, int cell, int arch, int seed, char *buf, size_t n) {
    snprintf(buf, n, "%s/runs/cell%d_%s_seed%d.run", c->out_dir, cell, task_arch_name(c, arch), c->seed0 + seed);
}

static void run_key(const da_task_compare_config *c, const task_cell *x, int arch, int seed, char *key, size_t n) {
    const da_task_config *t = &x->task;
    memset(key, 0, n);
    snprintf(key, n,
             "task %s seq %d vocab %d pairs %d alpha %g noise %g noise_vocab %d demos %d classes %d symbols %d "
             "entities %d attributes %d context_pairs %d memory_share %g facts_seed %llu | arch %s first_arch %s "
             "window %d seed %d point %d | dim %d layers %d heads %d batch %d lr %g steps %ld | eval_every %d eval_seqs %d "
             "perms %d perm_episodes %d cf_episodes %d",
             da_task_name(t->kind), t->seq, t->vocab, t->pairs, t->alpha, t->noise, t->noise_vocab, t->demos,
             t->classes, t->symbols, t->entities, t->attributes, t->context_pairs, t->memory_share,
             (unsigned long long)t->facts_seed, task_arch_name(c, arch), task_arch_name(c, 0),
             c->windows[arch], c->seed0 + seed, x->point, x->dim, x->layers, x->heads, x->batch, (double)x->lr, c->steps, c->eval_every,
             c->eval_seqs, c->perms, c->perm_episodes, c->cf_episodes);
}

/* Reads run (cell, arch, seed) into r when its file holds these settings; 0 on success. */
static int run_load(const da_task_compare_config *c, const task_cell *cells, int cell, int arch, int seed,
                    task_run *r) {
    char path[4300];
    run_header h, want;
    run_path(c, cell, arch, seed, path, sizeof path);
    run_key(c, &cells[cell], arch, seed, want.key, sizeof want.key);
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    const int ok = fread(&h, sizeof h, 1, fp) == 1 && !memcmp(h.magic, "DASTUDY1", 8) &&
                   h.run_size == sizeof *r && !memcmp(h.key, want.key, sizeof h.key) && fread(r, sizeof *r, 1, fp) == 1;
    fclose(fp);
    return ok ? 0 : -1;
}

static da_status run_save(const da_task_compare_config *c, const task_cell *cells, int cell, int arch, int seed,
                          const task_run *r) {
    char path[4300];
    run_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "DASTUDY1", 8);
    h.run_size = sizeof *r;
    run_key(c, &cells[cell], arch, seed, h.key, sizeof h.key);
    run_path(c, cell, arch, seed, path, sizeof path);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    if (fwrite(&h, sizeof h, 1, af.fp) != 1 || fwrite(r, sizeof *r, 1, af.fp) != 1) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

/* ---------------------------------------------------------------- one run */

static da_status check_config(const da_task_compare_config *c) {
    if (c->seeds < 1 || c->seeds > TASK_MAX_SEEDS) return da_errorf("--seeds must be 1..%d", TASK_MAX_SEEDS);
    if (c->steps < 1 || c->eval_every < 1 || c->steps / c->eval_every + 2 > TASK_MAX_EVALS)
        return da_errorf("--steps %ld and --eval-every %d: need steps >= 1 and at most %d evaluations", c->steps,
                         c->eval_every, TASK_MAX_EVALS - 2);
    if (c->eval_seqs < 1) return da_errorf("--eval-seqs must be positive");
    const da_task_kind k = c->task.kind;
    if (k != DA_TASK_NOISY_RECALL && c->n_noises) return da_errorf("--noise applies to noisy-recall only");
    if (k != DA_TASK_MQAR && c->n_pairs)
        return da_errorf("--pairs applies to mqar only (noisy-recall's pairs fill the sequence)");
    if (k == DA_TASK_ICL && c->n_seqs)
        return da_errorf("--pairs, --noise and --seq do not apply to icl (its length is 2 demos + 2: set --demos)");
    if (k != DA_TASK_ICL && c->n_demos) return da_errorf("--demos applies to icl only");
    if (k == DA_TASK_ICL && (c->perms < 2 || c->perm_episodes < 1))
        return da_errorf("--perms %d and --perm-episodes %d: need at least 2 orders and 1 episode", c->perms,
                         c->perm_episodes);
    if (k == DA_TASK_COUNTERFACTUAL && c->cf_episodes < 1) return da_errorf("--cf-episodes must be positive");
    if (c->n_archs < 1 || c->n_archs > DA_COMPARE_MAX_ARCHS)
        return da_errorf("compare --task: %d architectures (1..%d; --archs)", c->n_archs, DA_COMPARE_MAX_ARCHS);
    return da_ok();
}

/* A cell's training settings through train's field table, as train checks
 * them: --lr -1, 0 and 1e30 ran here (1e30's report held bare nan). */
static da_status train_fields_check(const da_task_compare_config *c, const task_cell *x) {
    da_train_config tc;
    da_train_config_default(&tc);
    tc.lr = x->lr, tc.min_lr = x->lr / 10, tc.batch = x->batch, tc.steps = c->steps, tc.warmup = c->steps / 10;
    return da_train_config_validate(&tc);
}

/* The settings and cells of a study, checked: every cell's task and every model. */
static da_status study_cells(const da_task_compare_config *c, task_cell **cells, int *n_cells, int *n_points) {
    da_status st = check_config(c);
    if (!st.code) st = task_cells(c, cells, n_cells, n_points);
    if (st.code) return st;
    for (int i = 0; i < *n_cells && !st.code; i++) {
        const task_cell *x = &(*cells)[i];
        if (x->layers > TASK_MAX_LAYERS)
            st = da_errorf("--layers %d: at most %d for the task comparison", x->layers, TASK_MAX_LAYERS);
        else if ((st = da_task_validate(&x->task)).code)
            st = da_errorf("%s: %s", x->point_name, st.msg);
        else if ((st = train_fields_check(c, x)).code)
            st = da_errorf("%s: %s", x->name, st.msg);
        for (int a = 0; a < c->n_archs && !st.code; a++) {
            da_config mc;
            model_config(c, x, a, &mc);
            if ((st = da_config_validate(&mc)).code) st = da_errorf("%s: %s", x->name, st.msg);
        }
    }
    if (st.code) free(*cells), *cells = NULL;
    return st;
}

static da_status run_train(const da_task_compare_config *c, const task_cell *cells, int k, task_run *r) {
    int ci, s, a;
    run_index(c, k, &ci, &s, &a);
    const task_cell *x = &cells[ci];
    const uint64_t seed = (uint64_t)(c->seed0 + s);
    da_model first, m;
    memset(&first, 0, sizeof first), memset(&m, 0, sizeof m);
    da_config mc;
    /* the first architecture's initialisation, copied where shapes agree: every arch of a seed starts alike */
    model_config(c, x, 0, &mc);
    da_status st = da_model_create(&first, &mc);
    if (!st.code) da_model_init(&first, seed);
    if (!st.code && a) {
        model_config(c, x, a, &mc);
        if (!(st = da_model_create(&m, &mc)).code) {
            da_model_init(&m, seed);
            da_copy_shared_init(&m, &first);
        }
    }
    eval_set e;
    memset(&e, 0, sizeof e);
    /* held out: a seed no training stream uses (those are seed0 + s, mixed below) */
    if (!st.code) st = eval_set_make(&e, &x->task, c->eval_seqs, 0xE7A15E7ULL + (uint64_t)x->point);
    char what[256];
    snprintf(what, sizeof what, "%s %s seed %llu", x->name, task_arch_label(c, a), (unsigned long long)seed);
    memset(r, 0, sizeof *r);
    /* the same stream for every architecture; the order episodes, like the evaluation set, for every seed */
    if (!st.code)
        st = train_one(c, x, a ? &m : &first, seed * 0x9E3779B97F4A7C15ULL + (uint64_t)x->point, &e,
                       0x0DE450DEULL + (uint64_t)x->point, what, r);
    eval_set_free(&e);
    da_model_free(&first);
    if (a) da_model_free(&m);
    return st;
}

da_status da_task_compare_run(const da_task_compare_config *c, int k) {
    task_cell *cells;
    int n_cells, n_points;
    da_status st = study_cells(c, &cells, &n_cells, &n_points);
    if (st.code) return st;
    if (k < 0 || k >= n_cells * c->n_archs * c->seeds) {
        free(cells);
        return da_errorf("run %d: the study has %d runs", k, n_cells * c->n_archs * c->seeds);
    }
    task_run *r = calloc(1, sizeof *r); /* calloc: the padding bytes of the file are zero too */
    if (!r) st = da_errorf("out of memory for a run's results");
    if (!st.code) st = run_train(c, cells, k, r);
    int ci, s, a;
    run_index(c, k, &ci, &s, &a);
    if (!st.code) st = run_save(c, cells, ci, a, s, r);
    free(r), free(cells);
    return st;
}

int da_task_compare_run_done(const da_task_compare_config *c, int k) {
    task_cell *cells;
    int n_cells, n_points, ci, s, a;
    if (study_cells(c, &cells, &n_cells, &n_points).code) return 0;
    task_run *r = malloc(sizeof *r);
    run_index(c, k, &ci, &s, &a);
    const int done = r && ci < n_cells && !run_load(c, cells, ci, a, s, r);
    free(r), free(cells);
    return done;
}

double da_task_compare_run_cost(const da_task_compare_config *c, int k) {
    task_cell *cells;
    int n_cells, n_points, ci, s, a;
    if (study_cells(c, &cells, &n_cells, &n_points).code) return 1;
    run_index(c, k, &ci, &s, &a);
    const task_cell *x = &cells[ci < n_cells ? ci : 0];
    const double T = x->task.seq, d = x->dim, V = x->task.vocab;
    /* training FLOPs per step: per token and layer the matmuls (about 12 d^2 with the FFN) and the attention
     * maps, and the output head (2 V d) */
    const double cost = (double)c->steps * x->batch * T * (x->layers * (12 * d * d + 2 * T * d) + 2 * V * d);
    free(cells);
    return cost;
}

int da_task_compare_schedule(const da_task_compare_config *c, int i, int n_runs) {
    const int per_seed = n_runs / c->seeds, s = i / per_seed, rest = i % per_seed;
    const int cell = rest / c->n_archs, a = rest % c->n_archs;
    return (cell * c->seeds + s) * c->n_archs + a;
}

void da_task_compare_run_name(const da_task_compare_config *c, int k, char *buf, size_t n) {
    task_cell *cells;
    int n_cells, n_points, ci, s, a;
    run_index(c, k, &ci, &s, &a);
    if (study_cells(c, &cells, &n_cells, &n_points).code) {
        snprintf(buf, n, "run %d", k);
        return;
    }
    snprintf(buf, n, "%s, %s, seed %d", cells[ci].name, task_arch_label(c, a), c->seed0 + s);
    free(cells);
}

/* ---------------------------------------------------------------- the study */

/* Removes the run files in out_dir/runs (and their temporaries): --force starts afresh. */
static void remove_run_files(const char *out_dir) {
    char dir[4200], path[4600];
    snprintf(dir, sizeof dir, "%s/runs", out_dir);
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".run")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

da_status da_task_compare_prepare(const da_task_compare_config *c, int *n_runs) {
    task_cell *cells;
    int n_cells, n_points;
    da_status st = study_cells(c, &cells, &n_cells, &n_points);
    if (st.code) return st;
    free(cells);
    static const char *const existing[] = {"report.json", "runs"};
    if (!c->force && !c->resume && (st = da_refuse_existing(c->out_dir, "compare", existing, 2)).code) return st;
    char runs[4200];
    snprintf(runs, sizeof runs, "%s/runs", c->out_dir);
    if ((st = da_make_dirs(runs)).code) return st;
    if (c->force) remove_run_files(c->out_dir);
    *n_runs = n_cells * c->n_archs * c->seeds;
    return da_ok();
}

da_status da_task_compare_report(const da_task_compare_config *c, double wall_s) {
    task_study s = {c, 0, 0, NULL, NULL};
    da_status st = study_cells(c, &s.cells, &s.n_cells, &s.n_points);
    if (st.code) return st;
    const size_t n = (size_t)s.n_cells * c->n_archs * c->seeds;
    s.runs = calloc(n, sizeof *s.runs);
    if (!s.runs) st = da_errorf("out of memory for %zu runs' results", n);
    for (int i = 0; i < s.n_cells && !st.code; i++)
        for (int a = 0; a < c->n_archs && !st.code; a++)
            for (int k = 0; k < c->seeds && !st.code; k++)
                if (run_load(c, s.cells, i, a, k, study_run(&s, i, a, k))) {
                    char path[4300];
                    run_path(c, i, a, k, path, sizeof path);
                    st = da_errorf("%s: missing or made with other settings (run the study with --resume)", path);
                }
    if (!st.code) st = task_write_report(&s, wall_s);
    free(s.runs), free(s.cells);
    return st;
}

static da_status task_compare_locked(const da_task_compare_config *c);

/* The whole study in one process holds out_dir's lock (io/run_lock.h). */
da_status da_task_compare_lock(const da_task_compare_config *c, int *fd) {
    *fd = -1;
    da_status st = da_make_dirs(c->out_dir);
    return st.code ? st : da_run_lock(c->out_dir, fd);
}

void da_task_compare_unlock(int fd) { da_run_unlock(fd); }

da_status da_task_compare(const da_task_compare_config *c) {
    int lock_fd;
    da_status st = da_task_compare_lock(c, &lock_fd);
    if (!st.code) st = task_compare_locked(c);
    da_run_unlock(lock_fd);
    return st;
}

static da_status task_compare_locked(const da_task_compare_config *c) {
    int n_runs;
    da_status st = da_task_compare_prepare(c, &n_runs);
    if (st.code) return st;
    const double t_start = da_now_s();
    double total = 0, todo_cost = 0;
    for (int k = 0; k < n_runs; k++) total += da_task_compare_run_cost(c, k);
    for (int i = 0; i < n_runs && !st.code; i++) {
        const int k = da_task_compare_schedule(c, i, n_runs);
        const double cost = da_task_compare_run_cost(c, k);
        if (da_task_compare_run_done(c, k)) { /* --resume: kept */
            total -= cost;
            continue;
        }
        if (c->stop && *c->stop) {
            st = da_errorf("interrupted: the finished runs are kept; the same command with --resume continues");
            st.code = DA_INTERRUPTED;
            break;
        }
        if (!c->quiet) {
            char name[320];
            da_task_compare_run_name(c, k, name, sizeof name);
            const double el = da_now_s() - t_start;
            if (todo_cost > 0) fprintf(stderr, "compare: [%d/%d] %s (ETA %.0f s)\n", i + 1, n_runs, name,
                                       el / todo_cost * (total - todo_cost));
            else fprintf(stderr, "compare: [%d/%d] %s\n", i + 1, n_runs, name);
        }
        st = da_task_compare_run(c, k);
        if (st.code == DA_INTERRUPTED) {
            st = da_errorf("%s; the finished runs are kept: the same command with --resume continues", st.msg);
            st.code = DA_INTERRUPTED;
        }
        todo_cost += cost;
    }
    if (st.code) return st;
    return da_task_compare_report(c, da_now_s() - t_start);
}
