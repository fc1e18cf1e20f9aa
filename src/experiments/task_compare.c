/* compare --task (a task of tasks/): the cells of a study, and each run:
 * train on the generated stream from the shared initialisation, score the
 * held-out sequences, analyse the trained model, write the result file (see
 * compare.h and docs/tasks.md).
 *
 * From `diffattn compare --task mqar` to report.md, in order:
 *   cli/cmd_compare.c   cmd_compare_task: shape_opts + task_opts, then da_task_compare
 *   da_task_compare     (end of this file) study_cells: the cells (task_cells, the grid)
 *   study/study.c       da_study_run: every run not done, through run_one -> da_task_compare_run
 *                         (this file: run_train on the task's data source, train_stages, evaluate
 *                          and analyse the model, then task_run_save of task_run_file.c)
 *   study_report        (this file) loads every result file, then task_write_report
 *   task_report.c       task_write_report -> write_files: report.json, the figures, report.md */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "bench/bench.h"
#include "study/arch_column.h"
#include "experiments/compare.h"
#include "study/grid.h"
#include "io/atomic_file.h"
#include "study/study.h"
#include "experiments/task_study.h"

static const int QBITS[TASK_N_QBITS] = TASK_QBITS;

void da_task_compare_config_default(da_task_compare_config *c) {
    *c = (da_task_compare_config){.shape = {.study = {.out_dir = "runs/compare-task", .jobs = 1}, .steps = 1000,
                                            .dim = 64, .layers = 2, .heads = 1, .batch = 32, .seeds = 1},
                                  .eval_every = 50, .eval_seqs = 256, .lr = 3e-3f, .seed0 = 1337, .perms = 10,
                                  .perm_episodes = 128, .cf_episodes = 1024};
    /* train's defaults, with a checkpoint at the end only: a run that stops is done again */
    da_train_config_default(&c->train);
    c->train.save_every = 0;
    da_task_config_default(&c->task, DA_TASK_MQAR);
    c->shape.n_archs = da_arch_compare_defaults(c->shape.archs);
}

/* Adds b sequences' answers (logits (b, T, V)) to the counts: RULER's tasks
 * count episodes (all of their answer tokens right) and answer tokens, the
 * others answer positions. */
static void count_answers(const da_task_source *s, const int *targets, const float *logits, int b, int V, long *right,
                          long *total, da_ruler_counts *k) {
    if (da_task_is_ruler(s->task.kind)) da_ruler_count_logits(targets, logits, b, s->T, V, k);
    else da_score_argmax(NULL, targets, logits, b, s->T, V, right, total);
}

/* The shares of the counts; partial (may be NULL): of RULER's answer tokens right. */
static void shares(const da_task_source *s, long right, long total, const da_ruler_counts *k, double *acc,
                   double *partial) {
    if (da_task_is_ruler(s->task.kind)) right = k->right, total = k->episodes;
    *acc = total ? (double)right / total : 0;
    if (partial) *partial = k->tokens ? (double)k->tokens_right / k->tokens : 0;
}

/* The share of the answer positions of s whose largest logit is the answer
 * (RULER's tasks: of the episodes with every answer token right, and in
 * *partial, when not NULL, of the answer tokens right),
 * through the inference engine with attention logits fake-quantized to
 * logit_bits per query row before each softmax (0: the training forward, in
 * batches of 16). */
static da_status task_accuracy(const da_model *m, const da_task_source *s, int logit_bits, double *acc,
                               double *partial) {
    const int V = m->cfg.vocab_size, T = s->T, B = s->n < 16 ? s->n : 16;
    long right = 0, total = 0;
    da_ruler_counts k = {0, 0, 0, 0};
    if (!logit_bits) {
        da_acts *a = NULL;
        da_status st = da_acts_create(&a, &m->cfg, B, T);
        for (int i = 0; i < s->n && !st.code; i += B) {
            const int b = s->n - i < B ? s->n - i : B;
            da_forward((da_model *)m, a, s->tokens + (size_t)i * T, NULL, b, T);
            count_answers(s, s->targets + (size_t)i * T, da_acts_logits(a), b, V, &right, &total, &k);
        }
        da_acts_free(a);
        shares(s, right, total, &k, acc, partial);
        return st;
    }
    da_engine *en = NULL;
    da_session *ses = NULL;
    da_status st = da_engine_from_model(&en, m);
    da_session_opts o = da_session_opts_default();
    o.logit_bits = logit_bits;
    o.max_T = T;
    if (!st.code) st = da_session_create(&ses, en, &o);
    for (int i = 0; i < s->n && !st.code; i++) {
        const float *lg;
        da_session_reset(ses);
        if (!(st = da_session_feed(ses, s->tokens + (size_t)i * T, T, 1, &lg)).code)
            count_answers(s, s->targets + (size_t)i * T, lg, 1, V, &right, &total, &k);
    }
    shares(s, right, total, &k, acc, partial);
    da_session_free(ses);
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
    da_task_source *s;
    if ((st = task_source_new(&s, t, 0, n, seed)).code) return st;
    st = task_accuracy(m, s, logit_bits, acc, NULL);
    da_task_source_free(s);
    return st;
}

/* Sums over one held-out sequence's attention rows (da_eval_attention_rows). */
typedef struct {
    const da_task_config *t;
    const int *tok, *tgt, *src; /* (T) the sequence */
    double ans, noise, noise_tok, look[3];
    long rows, look_rows[3];
} share_sums;

static void add_shares(void *ctx, int layer, int head, int p, const float *row) {
    share_sums *s = ctx;
    const da_task_config *t = s->t;
    (void)layer, (void)head;
    if (t->kind == DA_TASK_COUNTERFACTUAL && s->tgt[p] >= 0) { /* the lookback ratio at every answer, per condition */
        const int cond = s->src[p] < 0 ? DA_CF_ABSENT
                      : s->tgt[p] == da_cf_attribute_token(t, da_cf_fact(t, s->tok[p] - 2)) ? DA_CF_AGREE
                                                                                          : DA_CF_COUNTER;
        double on_ctx = 0, on_query = 0;
        for (int j = 0; j <= p; j++) j < 2 * t->context_pairs ? (on_ctx += row[j]) : (on_query += row[j]);
        s->look[cond] += on_ctx + on_query != 0 ? on_ctx / (on_ctx + on_query) : 0, s->look_rows[cond]++;
    }
    if (s->src[p] < 0) return;
    for (int j = 0; j < p; j++) {
        if (j == s->src[p] || j == s->src[p] + 1) s->ans += row[j];
        else s->noise += row[j];
        if (da_task_is_noise(t, s->tok[j])) s->noise_tok += row[j];
    }
    s->rows++;
}

/* Through eval/: the attention shares at the answer positions of the first
 * n held-out sequences (and counterfactual's lookback ratios), and the
 * outliers (attention logits, hidden states) over them. */
static da_status analyse(da_model *m, const da_task_source *e, int n, task_run *r) {
    const int T = e->T, cf = e->task.kind == DA_TASK_COUNTERFACTUAL;
    share_sums s;
    memset(&s, 0, sizeof s);
    s.t = &e->task;
    unsigned char *want = malloc((size_t)T);
    da_status st = want ? da_ok() : da_errorf("out of memory for the attention analysis");
    for (int i = 0; i < n && !st.code; i++) {
        s.tok = e->tokens + (size_t)i * T, s.tgt = e->targets + (size_t)i * T, s.src = e->src + (size_t)i * T;
        for (int p = 0; p < T; p++) want[p] = s.src[p] >= 0 || (cf && s.tgt[p] >= 0);
        st = da_eval_attention_rows(m, s.tok, T, want, add_shares, &s);
    }
    free(want);
    if (!st.code) st = da_eval_outliers_of(m, e->tokens, n, T, &r->out);
    if (st.code) return st;
    r->attn_answer = s.rows ? s.ans / s.rows : 0, r->attn_noise = s.rows ? s.noise / s.rows : 0;
    r->attn_noise_tokens = s.rows ? s.noise_tok / s.rows : 0;
    for (int k = 0; k < 3; k++) r->cf.lookback[k] = s.look_rows[k] ? s.look[k] / s.look_rows[k] : 0;
    return st;
}

/* Column a's model in the cell, before --match-params. */
static void column_config(const da_task_compare_config *c, const task_cell *cell, int a, da_config *cfg) {
    const da_arch arch = c->shape.archs[a];
    da_config_default(cfg);
    cfg->arch = arch;
    cfg->window = c->shape.windows[a];
    cfg->dim = cell->dim;
    cfg->n_layers = cell->layers;
    cfg->n_heads = cfg->n_kv_heads = da_arch_heads(arch, cell->heads);
    cfg->ffn_hidden = da_default_ffn_hidden(cell->dim);
    cfg->vocab_size = cell->task.vocab;
    cfg->max_seq_len = cell->task.seq;
    if (c->n_train_seqs) { /* long enough for every stage of the curriculum and every evaluation length */
        int lengths[16];
        const int n = task_eval_lengths(c, lengths);
        memcpy(lengths + n, c->train_seqs, (size_t)c->n_train_seqs * sizeof(int));
        for (int i = 0; i < n + c->n_train_seqs; i++)
            if (lengths[i] > cfg->max_seq_len) cfg->max_seq_len = lengths[i];
    }
    /* checked by da_study_parse_archs; an error shows when the model is created */
    if (c->shape.columns[a][0] && da_arch_column_apply(c->shape.columns[a], cfg).code) cfg->arch = DA_ARCH_N;
}

/* Column a's model configuration in cell (every field, --match-params applied). */
static void task_model_config(const da_task_compare_config *c, const task_cell *cell, int a, da_config *cfg) {
    if (!c->shape.match_params) {
        column_config(c, cell, a, cfg);
        return;
    }
    da_config all[DA_COMPARE_MAX_ARCHS];
    for (int i = 0; i < c->shape.n_archs; i++) {
        column_config(c, cell, i, &all[i]);
        if (da_config_validate(&all[i]).code) { /* its own error shows when it is checked or created */
            column_config(c, cell, a, cfg);
            return;
        }
    }
    da_match_params(all, c->shape.n_archs);
    *cfg = all[a];
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
    if (c->shape.study.quiet) return;
    if (step == 0) /* no training step yet, so no loss */
        fprintf(stderr, "\r  %s step 0/%ld  answer accuracy %.3f   ", what, c->shape.steps, acc);
    else fprintf(stderr, "\r  %s step %ld/%ld  loss %.4f  answer accuracy %.3f   ", what, step, c->shape.steps, loss, acc);
    if (step == c->shape.steps) fprintf(stderr, "\n");
    fflush(stderr);
}

/* One run as the hooks of the training loop see it. */
typedef struct {
    const da_task_compare_config *c;
    const task_cell *x;
    int arch;
    uint64_t seed;
    task_run *r;
    char what[256];
} run_ctx;

/* Every architecture of a seed starts from the first one's initialisation,
 * copied where shapes agree. */
static da_status shared_init(void *ctx, da_model *m) {
    const run_ctx *k = ctx;
    if (!k->arch) return da_ok();
    da_config mc;
    da_model first;
    task_model_config(k->c, k->x, 0, &mc);
    da_status st = da_model_create(&first, &mc);
    if (st.code) return st;
    da_model_init(&first, k->seed);
    da_copy_shared_init(m, &first);
    da_model_free(&first);
    return st;
}

static void record_eval(void *ctx, const da_model *m, const da_train_log *g) {
    run_ctx *k = ctx;
    task_run *r = k->r;
    if (r->n_evals >= TASK_MAX_EVALS) return; /* check_config bounds steps / eval_every */
    const int i = r->n_evals++;
    r->step[i] = g->step, r->acc[i] = g->accuracy;
    for (int l = 0; l < m->cfg.n_layers && l < TASK_MAX_LAYERS; l++)
        r->lambda[i][l] = da_arch_describe(m->cfg.arch).per_layer_lambda ? da_model_lambda(m, l) : NAN;
    progress(k->c, k->what, g->step, g->accuracy, g->train_loss);
}

/* The trained model's scores beyond the training curve: quantized logits,
 * attention and outliers, icl's orders (episodes of order_seed),
 * counterfactual's counts. */
static da_status evaluate(const da_task_compare_config *c, da_model *m, const da_task_source *e, uint64_t order_seed,
                          task_run *r) {
    const da_task_config *t = &e->task;
    da_status st = da_ok();
    r->n_params = m->n_params;
    r->ffn_hidden = m->cfg.ffn_hidden;
    r->flops_per_token = da_train_flops_per_token(&m->cfg, e->T);
    r->final_acc = r->n_evals ? r->acc[r->n_evals - 1] : 0;
    if (da_task_is_ruler(t->kind)) { /* the partial credit beside the exact score */
        double exact;
        st = task_accuracy(m, e, 0, &exact, &r->partial_acc);
    }
    for (int i = 0; i < TASK_N_QBITS && !st.code; i++) /* NaN where the engine has no quantized logits for the arch */
        if (da_arch_describe(m->cfg.arch).exact_logits_only) r->quant_acc[i] = NAN;
        else st = task_accuracy(m, e, QBITS[i], &r->quant_acc[i], NULL);
    if (!st.code) st = analyse(m, e, e->n < 16 ? e->n : 16, r);
    if (!st.code && t->kind == DA_TASK_ICL)
        st = da_icl_order_robustness(m, t, c->perm_episodes, c->perms, order_seed, &r->order);
    if (!st.code && t->kind == DA_TASK_COUNTERFACTUAL) { /* the counts, then the lookback ratios analyse measured */
        double look[3];
        memcpy(look, r->cf.lookback, sizeof look);
        st = da_cf_evaluate(m, t, c->cf_episodes, order_seed ^ 0xC0FFEEULL, &r->cf);
        memcpy(r->cf.lookback, look, sizeof look);
    }
    return st;
}

/* ---------------------------------------------------------------- the grid and its cells */

/* The task sweep points of c: seq x (pairs | noise | demos). */
static int task_points(const da_task_compare_config *c, da_task_config *pts, char (*names)[64]) {
    int n = 0;
    const da_task_kind k = c->task.kind;
    const int ns = c->n_seqs && !c->n_train_seqs ? c->n_seqs : 1, np = c->n_pairs ? c->n_pairs : 1;
    const int nn = c->n_noises ? c->n_noises : 1;
    const int nd = c->n_demos ? c->n_demos : 1, noisy = k == DA_TASK_NOISY_RECALL || da_task_is_ruler(k);
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < (k == DA_TASK_MQAR ? np : noisy ? nn : k == DA_TASK_ICL ? nd : 1); j++) {
            da_task_config t = c->task;
            if (c->n_train_seqs) t.seq = c->train_seqs[c->n_train_seqs - 1]; /* the last stage's */
            else if (c->n_seqs) t.seq = c->seqs[i];
            if (k == DA_TASK_MQAR && c->n_pairs) t.pairs = c->pairs[j];
            if (noisy && c->n_noises) t.noise = c->noises[j];
            if (k == DA_TASK_ICL) { /* its length follows from the demos */
                if (c->n_demos) t.demos = c->demos[j];
                t.seq = 2 * t.demos + 2;
            }
            pts[n] = t;
            if (k == DA_TASK_MQAR) snprintf(names[n], 64, "pairs %d, seq %d", t.pairs, t.seq);
            else if (noisy) snprintf(names[n], 64, "noise %.2f, seq %d", t.noise, t.seq);
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
    const int combos = grid_cells(c->shape.grid, c->shape.n_grid);
    if ((long)np * combos > TASK_MAX_CELLS)
        return da_errorf("compare --task: %d cells (task points x grid); at most %d", np * combos, TASK_MAX_CELLS);
    task_cell *cells = calloc((size_t)np * combos, sizeof *cells);
    if (!cells) return da_errorf("out of memory for %d cells", np * combos);
    for (int p = 0, n = 0; p < np; p++)
        for (int g = 0; g < combos; g++, n++) {
            task_cell *x = &cells[n];
            grid_shape sh = {c->shape.dim, c->shape.layers, c->shape.heads, c->shape.batch, c->lr};
            grid_cell(c->shape.grid, c->shape.n_grid, g, x->grid_index, &sh, x->grid_name, sizeof x->grid_name);
            x->task = pts[p], x->point = p;
            x->dim = sh.dim, x->layers = sh.layers, x->heads = sh.heads, x->batch = sh.batch, x->lr = sh.lr;
            snprintf(x->point_name, sizeof x->point_name, "%s", names[p]);
            snprintf(x->name, sizeof x->name, "%s%s%s", x->point_name, c->shape.n_grid ? "; " : "", x->grid_name);
        }
    *out = cells, *n_cells = np * combos, *n_points = np;
    return da_ok();
}

/* ---------------------------------------------------------------- one run */

/* out_dir/runs/cell<i>_<arch>_seed<s>: an ordinary training run folder, with
 * task.txt (the data source) and result.bin (task_run_file.c). */
static void run_dir(const da_task_compare_config *c, study_slot q, char *buf, size_t n) {
    study_run_dir(buf, n, c->shape.study.out_dir, q.cell, da_study_column_name(&c->shape, q.arch), c->seed0 + q.seed);
}

/* A cell's training settings: train's fields as given, warmup a tenth of the
 * steps and the final lr a tenth of the peak unless given. */
static void train_config(const da_task_compare_config *c, const task_cell *x, uint64_t seed, da_train_config *tc) {
    *tc = c->train;
    tc->batch = x->batch, tc->seq = x->task.seq, tc->steps = c->shape.steps, tc->lr = x->lr, tc->seed = seed;
    tc->eval_every = c->eval_every;
    if (!c->warmup_given) tc->warmup = c->shape.steps / 10;
    if (!c->min_lr_given) tc->min_lr = x->lr / 10;
}

/* The settings run k was made with: a result file made with others is not reused. */
static void run_key(const da_task_compare_config *c, const task_cell *x, int arch, int seed, char *key, size_t n) {
    const da_task_config *t = &x->task;
    da_train_config tc;
    train_config(c, x, (uint64_t)(c->seed0 + seed), &tc);
    char depths[16 * DA_TASK_MAX_DEPTHS + 8] = "uniform";
    for (int i = 0, len = 0; i < t->n_depths; i++)
        len += snprintf(depths + len, sizeof depths - (size_t)len, "%s%g", i ? "," : "", t->depths[i]);
    char lengths[160] = "";
    int ev[8], len = 0;
    const int n_ev = c->n_train_seqs ? task_eval_lengths(c, ev) : 0;
    for (int i = 0; i < c->n_train_seqs; i++)
        len += snprintf(lengths + len, sizeof lengths - (size_t)len, "%s%d", i ? "," : "train ", c->train_seqs[i]);
    for (int i = 0; i < n_ev; i++)
        len += snprintf(lengths + len, sizeof lengths - (size_t)len, "%s%d", i ? "," : " eval ", ev[i]);
    memset(key, 0, n);
    snprintf(key, n,
             "task %s seq %d vocab %d pairs %d alpha %g noise %g noise_vocab %d demos %d classes %d symbols %d "
             "entities %d attributes %d context_pairs %d memory_share %g facts_seed %llu | arch %s first_arch %s "
             "window %d seed %d point %d | dim %d layers %d heads %d | batch %d accum %d lr %g min_lr %g warmup %ld "
             "steps %ld wd %g clip %g betas %g %g eps %g bf16 %d | eval_every %d eval_seqs %d perms %d "
             "perm_episodes %d cf_episodes %d | value_len %d needles %d hops %d cw_ratio %g depths %s | "
             "match_params %d lengths %s",
             da_task_name(t->kind), t->seq, t->vocab, t->pairs, t->alpha, t->noise, t->noise_vocab, t->demos,
             t->classes, t->symbols, t->entities, t->attributes, t->context_pairs, t->memory_share,
             (unsigned long long)t->facts_seed, da_study_column_name(&c->shape, arch), da_study_column_name(&c->shape, 0), c->shape.windows[arch],
             c->seed0 + seed, x->point, x->dim, x->layers, x->heads, tc.batch, tc.grad_accum, (double)tc.lr,
             (double)tc.min_lr, tc.warmup, tc.steps, (double)tc.weight_decay, (double)tc.clip, (double)tc.beta1,
             (double)tc.beta2, (double)tc.adam_eps, tc.bf16, c->eval_every, c->eval_seqs, c->perms, c->perm_episodes,
             c->cf_episodes, t->value_len, t->needles, t->hops, t->cw_ratio, depths, c->shape.match_params, lengths);
    /* only when set: the keys of the runs made before the field existed stay as they were */
    if (t->interleave) snprintf(key + strlen(key), n - strlen(key), " interleave 1");
}

int task_eval_lengths(const da_task_compare_config *c, int *out) {
    const int n = c->n_train_seqs && !c->n_seqs ? c->n_train_seqs : c->n_seqs;
    memcpy(out, c->n_train_seqs && !c->n_seqs ? c->train_seqs : c->seqs, (size_t)n * sizeof(int));
    return n;
}

/* The training of run ctx in dir: one call of the training loop, or with a length curriculum one per stage,
 * stage i ending at step steps (i + 1) / n and the next resuming the run at its length. *src: the last
 * stage's source (the caller frees it). */
static da_status train_stages(const da_task_compare_config *c, run_ctx *ctx, const da_config *mc,
                              da_train_config *tc, const char *dir, da_task_source **src) {
    const int n = c->n_train_seqs ? c->n_train_seqs : 1;
    da_status st = da_ok();
    for (int i = 0; i < n && !st.code; i++) {
        da_task_config t = ctx->x->task;
        if (c->n_train_seqs) t.seq = c->train_seqs[i];
        tc->seq = t.seq;
        da_task_source_free(*src), *src = NULL;
        if ((st = da_task_source_create(src, &t, ctx->x->point, c->eval_seqs)).code) break;
        if ((st = da_task_source_save(*src, dir)).code) break;
        const da_data_source ds = da_task_source_of(*src);
        da_train_hooks hooks = {.ctx = ctx, .stop = c->shape.study.stop, .on_init = shared_init, .on_eval = record_eval};
        hooks.stop_at_step = i + 1 < n ? c->shape.steps * (i + 1) / n : 0;
        st = da_train_source(mc, tc, &ds, dir, i ? DA_RUN_RESUME : DA_RUN_OVERWRITE, &hooks);
        if (st.code == DA_INTERRUPTED && i + 1 < n && !(c->shape.study.stop && *c->shape.study.stop)) st = da_ok(); /* stage end */
    }
    return st;
}

/* The answer accuracy of m at every evaluation length, on held-out sequences of that length drawn as the
 * cell's (the same for every architecture and seed). */
static da_status score_lengths(const da_task_compare_config *c, const task_cell *x, da_model *m, task_run *r) {
    r->n_lengths = c->n_train_seqs ? task_eval_lengths(c, r->length) : 0;
    da_status st = da_ok();
    for (int i = 0; i < r->n_lengths && !st.code; i++) {
        da_task_config t = x->task;
        t.seq = r->length[i];
        da_task_source *s = NULL;
        if (!(st = da_task_source_create(&s, &t, x->point, c->eval_seqs)).code)
            st = task_accuracy(m, s, 0, &r->length_acc[i], NULL);
        da_task_source_free(s);
    }
    return st;
}

/* Trains run k in its run folder through the training loop, then scores the
 * trained model as the folder holds it. */
static da_status run_train(const da_task_compare_config *c, const task_cell *cells, int k, task_run *r) {
    const study_slot q = study_slot_of(k, c->shape.n_archs, c->shape.seeds);
    const int a = q.arch;
    const task_cell *x = &cells[q.cell];
    run_ctx ctx = {c, x, a, (uint64_t)(c->seed0 + q.seed), r, ""};
    snprintf(ctx.what, sizeof ctx.what, "%s %s seed %llu", x->name, da_study_column_label(&c->shape, a), (unsigned long long)ctx.seed);
    char dir[4200], path[4300];
    run_dir(c, q, dir, sizeof dir);
    da_config mc;
    da_train_config tc;
    task_model_config(c, x, a, &mc);
    train_config(c, x, ctx.seed, &tc);
    da_task_source *src = NULL;
    da_model m;
    memset(&m, 0, sizeof m);
    const double t0 = da_now_s();
    da_status st = train_stages(c, &ctx, &mc, &tc, dir, &src);
    r->train_s = da_now_s() - t0;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!st.code) st = da_model_load(&m, path);
    if (!st.code) st = evaluate(c, &m, src, 0x0DE450DEULL + (uint64_t)x->point, r);
    if (!st.code) st = score_lengths(c, x, &m, r);
    if (st.code && st.code != DA_INTERRUPTED) st = da_errorf("%s: %s", ctx.what, st.msg);
    da_model_free(&m);
    da_task_source_free(src);
    return st;
}

static da_status check_config(const da_task_compare_config *c) {
    if (c->shape.seeds < 1 || c->shape.seeds > TASK_MAX_SEEDS) return da_errorf("--seeds must be 1..%d", TASK_MAX_SEEDS);
    if (c->shape.steps < 1 || c->eval_every < 1 || c->shape.steps / c->eval_every + 2 > TASK_MAX_EVALS)
        return da_errorf("--steps %ld and --eval-every %d: need steps >= 1 and at most %d evaluations", c->shape.steps,
                         c->eval_every, TASK_MAX_EVALS - 2);
    if (c->eval_seqs < 1 || c->eval_seqs > 1 << 20) return da_errorf("--eval-seqs must be 1..%d", 1 << 20);
    const da_task_kind k = c->task.kind;
    if (k != DA_TASK_NOISY_RECALL && !da_task_is_ruler(k) && c->n_noises)
        return da_errorf("--noise applies to noisy-recall and RULER's tasks (niah*, vt, cwe) only");
    if (k != DA_TASK_MQAR && c->n_pairs)
        return da_errorf("--pairs applies to mqar only (noisy-recall's pairs fill the sequence)");
    if (c->n_train_seqs && (k == DA_TASK_ICL || k == DA_TASK_COUNTERFACTUAL))
        return da_errorf("--train-seq: a length curriculum applies to mqar and noisy-recall");
    if (c->n_train_seqs && c->shape.steps < c->n_train_seqs)
        return da_errorf("--train-seq: %d lengths need at least as many --steps (%ld)", c->n_train_seqs, c->shape.steps);
    if (k == DA_TASK_ICL && c->n_seqs)
        return da_errorf("--pairs, --noise and --seq do not apply to icl (its length is 2 demos + 2: set --demos)");
    if (k != DA_TASK_ICL && c->n_demos) return da_errorf("--demos applies to icl only");
    if (k == DA_TASK_ICL && (c->perms < 2 || c->perm_episodes < 1))
        return da_errorf("--perms %d and --perm-episodes %d: need at least 2 orders and 1 episode", c->perms,
                         c->perm_episodes);
    if (k == DA_TASK_COUNTERFACTUAL && c->cf_episodes < 1) return da_errorf("--cf-episodes must be positive");
    if (c->shape.n_archs < 1 || c->shape.n_archs > DA_COMPARE_MAX_ARCHS)
        return da_errorf("compare --task: %d architectures (1..%d; --archs)", c->shape.n_archs, DA_COMPARE_MAX_ARCHS);
    return da_ok();
}

/* The settings and cells of a study, checked: every cell's task, training
 * settings (as train checks them) and model. */
static da_status study_cells(const da_task_compare_config *c, task_cell **cells, int *n_cells, int *n_points) {
    da_status st = check_config(c);
    if (!st.code) st = task_cells(c, cells, n_cells, n_points);
    if (st.code) return st;
    for (int i = 0; i < *n_cells && !st.code; i++) {
        const task_cell *x = &(*cells)[i];
        da_train_config tc;
        train_config(c, x, 0, &tc);
        if (x->layers > TASK_MAX_LAYERS)
            st = da_errorf("--layers %d: at most %d for the task comparison", x->layers, TASK_MAX_LAYERS);
        else if ((st = da_task_validate(&x->task)).code)
            st = da_errorf("%s: %s", x->point_name, st.msg);
        else if ((st = da_train_config_validate(&tc)).code)
            st = da_errorf("%s: %s", x->name, st.msg);
        int lengths[16];
        const int n_ev = c->n_train_seqs ? task_eval_lengths(c, lengths) : 0;
        memcpy(lengths + n_ev, c->train_seqs, (size_t)c->n_train_seqs * sizeof(int));
        for (int i = 0; i < n_ev + c->n_train_seqs && !st.code; i++) { /* every length the task is drawn at */
            da_task_config t = x->task;
            t.seq = lengths[i];
            if ((st = da_task_validate(&t)).code) st = da_errorf("%s, length %d: %s", x->point_name, t.seq, st.msg);
        }
        for (int a = 0; a < c->shape.n_archs && !st.code; a++) {
            da_config mc;
            task_model_config(c, x, a, &mc);
            if ((st = da_config_validate(&mc)).code) st = da_errorf("%s: %s", x->name, st.msg);
        }
    }
    if (st.code) free(*cells), *cells = NULL;
    return st;
}

/* Run k's result file and the settings it must hold. */
static void result_of(const da_task_compare_config *c, const task_cell *cells, int k, char *path, size_t n, char *key) {
    const study_slot q = study_slot_of(k, c->shape.n_archs, c->shape.seeds);
    char dir[4200];
    run_dir(c, q, dir, sizeof dir);
    snprintf(path, n, "%s/result.bin", dir);
    run_key(c, &cells[q.cell], q.arch, q.seed, key, TASK_KEY_BYTES);
}

da_status da_task_compare_run(const da_task_compare_config *c, int k) {
    task_cell *cells;
    int n_cells, n_points;
    da_status st = study_cells(c, &cells, &n_cells, &n_points);
    if (st.code) return st;
    if (k < 0 || k >= n_cells * c->shape.n_archs * c->shape.seeds) {
        free(cells);
        return da_errorf("run %d: the study has %d runs", k, n_cells * c->shape.n_archs * c->shape.seeds);
    }
    task_run *r = calloc(1, sizeof *r); /* calloc: the padding bytes of the file are zero too */
    char key[TASK_KEY_BYTES], path[4300];
    if (!r) st = da_errorf("out of memory for a run's results");
    if (!st.code) st = run_train(c, cells, k, r);
    result_of(c, cells, k, path, sizeof path, key);
    if (!st.code) st = task_run_save(path, key, r);
    free(r), free(cells);
    return st;
}

/* ---------------------------------------------------------------- the study */

typedef struct {
    const da_task_compare_config *c;
    task_cell *cells;
    int n_cells;
} study_ctx;

static int study_done(void *ctx, int k) {
    const study_ctx *x = ctx;
    char key[TASK_KEY_BYTES], path[4300];
    result_of(x->c, x->cells, k, path, sizeof path, key);
    task_run *r = malloc(sizeof *r);
    const int done = r && !task_run_load(path, key, r, 1);
    free(r);
    return done;
}

static double study_cost(void *ctx, int k) {
    const study_ctx *x = ctx;
    const task_cell *cell = &x->cells[study_slot_of(k, x->c->shape.n_archs, x->c->shape.seeds).cell];
    return study_train_flops(x->c->shape.steps, cell->batch, cell->task.seq, cell->layers, cell->dim, cell->task.vocab);
}

static void study_name(void *ctx, int k, char *buf, size_t n) {
    const study_ctx *x = ctx;
    const study_slot q = study_slot_of(k, x->c->shape.n_archs, x->c->shape.seeds);
    snprintf(buf, n, "%s, %s, seed %d", x->cells[q.cell].name, da_study_column_label(&x->c->shape, q.arch), x->c->seed0 + q.seed);
}

static da_status run_one(void *ctx, int k) { return da_task_compare_run(((const study_ctx *)ctx)->c, k); }

/* The report from the result files, every one of which must be there. */
static da_status study_report(const da_task_compare_config *c, const study_ctx *x, int n_points, double wall_s) {
    task_study s = {c, x->n_cells, n_points, x->cells, NULL};
    const size_t n = (size_t)x->n_cells * c->shape.n_archs * c->shape.seeds;
    da_status st = da_ok();
    if (!(s.runs = calloc(n, sizeof *s.runs))) st = da_errorf("out of memory for %zu runs' results", n);
    for (size_t k = 0; k < n && !st.code; k++) {
        const study_slot q = study_slot_of((int)k, c->shape.n_archs, c->shape.seeds);
        char key[TASK_KEY_BYTES], path[4300];
        result_of(c, x->cells, (int)k, path, sizeof path, key);
        if (task_run_load(path, key, study_run(&s, q.cell, q.arch, q.seed), 0))
            st = da_errorf("%s: missing or made with other settings (run the study with --resume)", path);
    }
    if (!st.code) st = task_write_report(&s, wall_s);
    free(s.runs);
    return st;
}

da_status da_task_compare(const da_task_compare_config *c) {
    study_ctx x = {c, NULL, 0};
    int n_points;
    da_status st = study_cells(c, &x.cells, &x.n_cells, &n_points);
    if (st.code) return st;
    const da_study plan = {x.n_cells, c->shape.n_archs, c->shape.seeds, &x, study_done, study_cost, study_name, run_one, NULL};
    const double t0 = da_now_s();
    st = da_study_run(&plan, &c->shape.study);
    if (!st.code) st = study_report(c, &x, n_points, da_now_s() - t0);
    free(x.cells);
    return st;
}
