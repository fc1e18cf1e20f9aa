/* Plain `diffattn compare` (the needle mix or --data text): the columns
 * trained at equal parameters, tokens, data and seed, then the same
 * evaluations on each, a study over the cells of a grid (see compare.h); the
 * report is text_report.c's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"
#include "study/arch_column.h"
#include "experiments/text_study.h"
#include "train/eval_loss.h"
#include "eval/needle.h"
#include "eval/needle_attention.h"
#include "eval/outliers.h"
#include "eval/quant_logits.h"
#include "study/grid.h"
#include "study/plot.h"
#include "study/report.h"
#include "study/study.h"
#include "study/stats.h"
#include "attn/attention.h"
#include "io/atomic_file.h"
#include "bench/bench.h"
#include "core/clock.h"

void da_compare_config_default(da_compare_config *c) {
    *c = (da_compare_config){.shape = {.study = {.out_dir = "runs/compare", .jobs = 1}, .steps = 300, .dim = 256,
                                       .layers = 4, .heads = 4, .batch = 8, .seeds = 1},
                             .seq = 512, .needles = 3, .queries = 1};
    c->shape.n_archs = da_arch_compare_defaults(c->shape.archs);
}
_Static_assert(DA_ARCH_N <= DA_COMPARE_MAX_ARCHS, "da_arch_compare_defaults may fill every architecture");

static void on_log(void *ctx, const da_train_log *g) {
    (void)ctx;
    fprintf(stderr, "\r  step %ld/%ld", g->step, g->steps);
    if (g->train_loss == g->train_loss) fprintf(stderr, "  loss %.4f", (double)g->train_loss);
    if (g->val_loss == g->val_loss) fprintf(stderr, "  val %.4f", (double)g->val_loss);
    if (g->step > 0) fprintf(stderr, "  %.0f tok/s  ETA %.0fs   ", (double)g->tok_per_s, g->eta_s);
    if (g->step == g->steps) fprintf(stderr, "\n");
    fflush(stderr);
}

/* Equal parameters: sh->heads counts DIFF heads. */
static da_status heads_config(const da_compare_config *c, const grid_shape *sh, int a, da_config *cfg) {
    da_config_default(cfg);
    cfg->arch = c->shape.archs[a];
    cfg->window = c->shape.windows[a];
    cfg->dim = sh->dim;
    cfg->n_layers = sh->layers;
    cfg->n_heads = sh->heads;
    cfg->n_kv_heads = 0;
    cfg->ffn_hidden = 0;
    cfg->max_seq_len = c->seq;
    da_status st = c->shape.columns[a][0] ? da_arch_column_apply(c->shape.columns[a], cfg) : da_ok();
    return st.code ? st : da_config_from_diff_heads(cfg);
}

/* The shape of the flags, before any grid axis. */
static grid_shape base_shape(const da_compare_config *c) {
    da_train_config tc;
    da_train_config_default(&tc);
    return (grid_shape){c->shape.dim, c->shape.layers, c->shape.heads, c->shape.batch, tc.lr};
}

/* ... and with --match-params each FFN widened to the largest architecture's parameters. */
static da_status arch_config(const da_compare_config *c, const grid_shape *sh, int a, da_config *cfg) {
    da_status st = heads_config(c, sh, a, cfg);
    if (st.code || !c->shape.match_params) return st;
    da_config all[DA_COMPARE_MAX_ARCHS];
    for (int i = 0; i < c->shape.n_archs && !st.code; i++) st = heads_config(c, sh, i, &all[i]);
    if (st.code) return st;
    da_match_params(all, c->shape.n_archs);
    *cfg = all[a];
    return st;
}

/* Validation windows of the evaluation: flash-kernel loss, and each of the
 * exact and quantized reference-kernel losses. */
enum { FLASH_WINDOWS = 64, REF_WINDOWS = 32 };

/* Every evaluation of one trained model. With `windows_flash`/`windows_ref`
 * and `nc` scaled down, the same code times a probe for the budget: r gets the
 * time of each part. */
static da_status evaluate_windows(const da_compare_config *c, da_model *m, const char *data, float val_fraction,
                                  const da_needle_config *nc, int first_seed, int windows_flash, int windows_ref,
                                  arch_result *r) {
    const char *name = da_arch_name(m->cfg.arch);
    da_text_data d;
    da_status st = da_text_data_load(&d, data, val_fraction, c->seq);
    if (st.code) return st;
    if (!c->shape.study.quiet) fprintf(stderr, "compare: evaluating %s: loss", name);
    da_eval_loss_result el, exact, q;
    double t0 = da_now_s();
    st = da_eval_loss(m, &d, c->seq, windows_flash, 4, DA_ATTN_FLASH, &el);
    r->eval_loss = el.loss;
    r->loss_flash_s = da_now_s() - t0;
    t0 = da_now_s();
    da_engine *e = NULL;
    if (!st.code) st = da_engine_from_model(&e, m);
    if (!st.code) st = da_eval_loss_logit_bits(e, &d, c->seq, windows_ref, 0, &exact);
    const int exact_only = da_arch_describe(m->cfg.arch).exact_logits_only; /* quantized logits: NaN */
    for (int i = 0; i < 4 && !st.code; i++) {
        if (!exact_only) st = da_eval_loss_logit_bits(e, &d, c->seq, windows_ref, QBITS[i], &q);
        r->quant[i] = exact_only ? NAN : q.loss - exact.loss;
    }
    da_engine_free(e);
    r->loss_ref_s = da_now_s() - t0;
    if (!c->shape.study.quiet) fprintf(stderr, ", outliers");
    t0 = da_now_s();
    if (!st.code) st = da_eval_outliers(m, &d, c->seq, 4, &r->out);
    r->fixed_s = da_now_s() - t0;
    da_text_data_free(&d);
    if (!c->shape.study.quiet) fprintf(stderr, ", needle retrieval");
    t0 = da_now_s();
    da_needle_result nr = {0};
    if (!st.code) st = da_needle_eval_model(m, nc, 0, &nr);
    r->needle = nr.overall;
    for (int i = 0; i < nc->n_contexts && !st.code; i++)
        for (int j = 0; j < nc->n_depths; j++) {
            r->needle_acc[i][j] = nr.acc[i][j];
            r->needle_ctx[i] += nr.acc[i][j] / nc->n_depths, r->needle_depth[j] += nr.acc[i][j] / nc->n_contexts;
        }
    if (!c->shape.study.quiet) fprintf(stderr, ", with quantized logits");
    for (int i = 0; i < 4 && !st.code; i++) {
        if (!exact_only) st = da_needle_eval_model(m, nc, QBITS[i], &nr);
        r->quant_needle[i] = exact_only ? NAN : nr.overall;
    }
    if (!c->shape.study.quiet) fprintf(stderr, ", attention\n");
    da_needle_attention_result ar = {0};
    if (!st.code) st = da_eval_needle_attention(m, nc, &ar);
    r->attn_answer = ar.answer_all, r->attn_noise = ar.noise_all, r->digits = ar.digits_all;
    r->per_prompt_s = (da_now_s() - t0) / ((double)nc->n_contexts * nc->n_depths * nc->samples);
    t0 = da_now_s();
    if (!st.code && first_seed)
        st = da_needle_attention_map_of(m, nc, nc->n_contexts - 1, nc->n_depths / 2, 0, &r->map);
    r->fixed_s += da_now_s() - t0;
    return st;
}

static da_status evaluate(const da_compare_config *c, da_model *m, const char *data, float val_fraction,
                          const da_needle_config *nc, int first_seed, arch_result *r) {
    return evaluate_windows(c, m, data, val_fraction, nc, first_seed, FLASH_WINDOWS, REF_WINDOWS, r);
}

/* Steps that make the whole job fit budget_minutes. Three timed training
 * steps per architecture (after a warm-up one) give the training rate; a probe
 * evaluation of each freshly initialised model, with 4 windows per loss and
 * one prompt per needle context, is scaled up to the real one. Evaluations
 * cost more than training at long contexts (the reference kernel's T x T maps,
 * a prefill per needle question), so a fixed share of the budget for them
 * overran it by a third at 2,176 bytes. */
static da_status steps_for_budget(const da_compare_config *c, const char *data, float val_fraction,
                                  const da_needle_config *nc, long *steps) {
    const double t_start = da_now_s();
    double step_s = 0, eval_s = 0;
    da_compare_config quiet = *c;
    quiet.shape.study.quiet = 1;
    da_needle_config probe_nc = *nc;
    probe_nc.samples = 1;
    probe_nc.n_depths = 1;
    probe_nc.depths[0] = 50;
    const double prompts = (double)nc->n_contexts * nc->n_depths * nc->samples;
    if (!c->shape.study.quiet) fprintf(stderr, "compare: timing a training step and a probe evaluation per architecture\n");
    for (int a = 0; a < c->shape.n_archs; a++) {
        da_config cfg;
        const grid_shape sh = base_shape(c);
        da_status st = arch_config(c, &sh, a, &cfg);
        if (st.code) return st;
        da_bench_result b;
        const da_exec x = da_exec_default();
        if ((st = da_bench_train(&cfg, c->shape.batch, c->seq, 1, 3, DA_ATTN_FLASH, &x, &b)).code) return st;
        step_s += b.ms_mean / 1000.0;
        da_model m;
        if ((st = da_model_create(&m, &cfg)).code) return st;
        da_model_init(&m, 1);
        arch_result r = {0};
        st = evaluate_windows(&quiet, &m, data, val_fraction, &probe_nc, 1, 4, 4, &r);
        da_model_free(&m);
        free(r.map.map);
        if (st.code) return st;
        const double per_seed = r.loss_flash_s * FLASH_WINDOWS / 4 + r.loss_ref_s * REF_WINDOWS / 4 +
                                r.per_prompt_s * prompts + r.fixed_s;
        eval_s += per_seed * c->shape.seeds;
    }
    const double left = c->budget_minutes * 60.0 - (da_now_s() - t_start) - eval_s;
    /* 10% on top of the timed steps: the validation passes and checkpoints
     * of training, and a shared machine's slower spells (a 6-minute budget
     * ran 13% over without it) */
    *steps = left > 0 ? (long)(left / (1.1 * step_s * c->shape.seeds)) : 0;
    if (*steps < 20)
        return da_errorf("--budget-minutes %g leaves %ld training steps per model: the evaluations take about %.0f s "
                         "and a step of every architecture %.2f s (%d seed(s)); raise the budget or lower --seq, "
                         "--needles, --dim or --seeds",
                         c->budget_minutes, *steps, eval_s, step_s, c->shape.seeds);
    if (!c->shape.study.quiet)
        fprintf(stderr,
                "compare: %.2f s per step of every architecture, about %.0f s of evaluations: %ld steps per model "
                "fit %g minutes\n",
                step_s, eval_s, *steps, c->budget_minutes);
    return da_ok();
}

static void cmp_name(void *ctx, int k, char *buf, size_t n) {
    const cmp_study *x = ctx;
    const study_slot q = study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds);
    const int ci = q.cell, a = q.arch, s = q.seed;
    snprintf(buf, n, "%s%s%s seed %d", x->c.shape.n_grid ? x->cells[ci].name : "", x->c.shape.n_grid ? ", " : "",
             da_study_column_name(&x->c.shape, a), 1337 + s);
}

/* Run k's training settings: the cell's batch and lr (min_lr scaled with it). */
static void train_config(const cmp_study *x, const grid_shape *sh, uint64_t seed, da_train_config *tc) {
    const da_compare_config *c = &x->c;
    da_train_config_default(tc);
    if (sh->lr != tc->lr) tc->min_lr = tc->min_lr / tc->lr * sh->lr, tc->lr = sh->lr;
    tc->steps = c->shape.steps;
    tc->warmup = c->shape.steps / 10;
    tc->batch = sh->batch;
    tc->seq = c->seq;
    tc->seed = seed;
    tc->eval_every = c->shape.steps / 5 > 0 ? c->shape.steps / 5 : 0;
    tc->save_every = c->shape.steps / 10 > 0 ? c->shape.steps / 10 : 1; /* what --resume can continue from */
}

/* Trains run k (or continues it, --resume), then evaluates the model its folder holds. */
static da_status run_arch(const cmp_study *x, int k, arch_result *r) {
    const da_compare_config *c = &x->c;
    const study_slot q = study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds);
    const int ci = q.cell, a = q.arch, s = q.seed;
    char dir[4300], model_path[4400], what[256];
    cmp_run_dir(x, k, dir, sizeof dir);
    cmp_name((void *)x, k, what, sizeof what);
    da_config cfg;
    da_train_config tc;
    da_status st = arch_config(c, &x->cells[ci].sh, a, &cfg);
    if (st.code) return st;
    train_config(x, &x->cells[ci].sh, 1337 + (uint64_t)s, &tc);
    /* --resume: a finished run is kept, an interrupted one continues */
    da_config saved_cfg;
    da_train_config saved_tc;
    long done = -1;
    if (c->shape.study.resume && !da_train_state_peek(dir, &saved_cfg, &saved_tc, &done).code) {
        if (saved_cfg.dim != cfg.dim || saved_cfg.n_layers != cfg.n_layers || saved_cfg.n_heads != cfg.n_heads ||
            saved_cfg.max_seq_len != cfg.max_seq_len || saved_tc.batch != tc.batch)
            return da_errorf("%s was trained with dim %d, %d layers, %d heads, seq %d, batch %d, %ld steps; "
                             "--resume needs the flags of the first run",
                             dir, saved_cfg.dim, saved_cfg.n_layers, saved_cfg.n_heads, saved_cfg.max_seq_len,
                             saved_tc.batch, saved_tc.steps);
    } else {
        done = -1;
    }
    if (done >= c->shape.steps) {
        if (!c->shape.study.quiet) fprintf(stderr, "compare: %s already trained for %ld steps: kept\n", what, c->shape.steps);
    } else {
        if (!c->shape.study.quiet)
            fprintf(stderr, "compare: training %s for %ld steps%s\n", what, c->shape.steps,
                    done >= 0 ? ", resumed from its checkpoint" : "");
        da_train_hooks hooks = {.on_log = c->shape.study.quiet ? NULL : on_log, .stop = c->shape.study.stop};
        st = da_train(&cfg, &tc, x->data, dir, done >= 0 ? DA_RUN_RESUME : c->shape.study.force ? DA_RUN_OVERWRITE : DA_RUN_NEW,
                      &hooks);
        if (st.code == DA_INTERRUPTED) {
            /* da_train's message names its own --resume; this job continues with compare's */
            da_status e = da_errorf("interrupted while training %s; the checkpoint is saved: run the same compare "
                                    "command with --resume to continue", what);
            e.code = DA_INTERRUPTED;
            return e;
        }
        if (st.code) return st;
    }
    cmp_read_metrics(dir, NULL, NULL, NULL, 0, &r->train_s);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    da_model m;
    if ((st = da_model_load(&m, model_path)).code) return st;
    r->n_params = m.n_params;
    double t0 = da_now_s();
    st = evaluate(c, &m, x->data, tc.val_fraction, &x->nc, s == 0, r);
    r->eval_s = da_now_s() - t0;
    da_model_free(&m);
    return st;
}

static int cmp_done(void *ctx, int k) {
    arch_result r;
    const int done = !cmp_result_load(ctx, k, &r, !((const cmp_study *)ctx)->c.shape.study.quiet);
    if (done) free(r.map.map);
    return done;
}

static double cmp_cost(void *ctx, int k) {
    const cmp_study *x = ctx;
    const grid_shape *sh = &x->cells[study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds).cell].sh;
    return study_train_flops(x->c.shape.steps, sh->batch, x->c.seq, sh->layers, sh->dim, 256);
}

static da_status cmp_run(void *ctx, int k) {
    const cmp_study *x = ctx;
    arch_result r = {0};
    da_status st = run_arch(x, k, &r);
    if (!st.code) st = cmp_result_save(x, k, &r);
    free(r.map.map);
    if (!st.code && x->c.shape.study.stop && *x->c.shape.study.stop) {
        char what[256];
        cmp_name(ctx, k, what, sizeof what);
        st = da_errorf("interrupted after evaluating %s: run the same compare command with --resume to continue "
                       "(finished runs are kept)", what);
        st.code = DA_INTERRUPTED;
    }
    return st;
}

/* The cells of c's grid, each model of each checked. */
static da_status study_cells(cmp_study *x) {
    const da_compare_config *c = &x->c;
    const int n = grid_cells(c->shape.grid, c->shape.n_grid);
    if (n > MAX_CELLS) return da_errorf("--grid: %d cells; at most %d", n, MAX_CELLS);
    x->n_cells = n;
    da_status st = da_ok();
    for (int i = 0; i < n && !st.code; i++) {
        cmp_cell *cell = &x->cells[i];
        cell->sh = base_shape(c);
        grid_cell(c->shape.grid, c->shape.n_grid, i, cell->index, &cell->sh, cell->name, sizeof cell->name);
        if (!c->shape.n_grid) snprintf(cell->name, sizeof cell->name, "all");
        for (int a = 0; a < c->shape.n_archs && !st.code; a++) {
            da_config cfg;
            if ((st = arch_config(c, &cell->sh, a, &cfg)).code || (st = da_config_validate(&cfg)).code)
                st = da_errorf("%s%s%s: %s", c->shape.n_grid ? cell->name : "", c->shape.n_grid ? ", " : "", da_study_column_name(&c->shape, a),
                               st.msg);
        }
    }
    return st;
}

/* The checks of c, and x: its cells, needle prompts and data. */
static da_status compare_setup(const da_compare_config *c, cmp_study *x) {
    x->c = *c;
    if (c->shape.seeds < 1 || c->shape.seeds > 16) return da_errorf("--seeds must be 1..16");
    if (c->shape.n_archs < 1 || c->shape.n_archs > DA_COMPARE_MAX_ARCHS)
        return da_errorf("compare: %d architectures (1..%d)", c->shape.n_archs, DA_COMPARE_MAX_ARCHS);
    if (c->seq < 256) return da_errorf("--seq %d: needle prompts need at least 256", c->seq);
    if (c->needles < 1 || c->needles > 16 || c->queries < 1 || c->queries > c->needles)
        return da_errorf("--needles must be 1..16 and --queries 1..--needles");
    if (!(c->budget_minutes >= 0)) return da_errorf("--budget-minutes must be positive");
    if (c->budget_minutes > 0 && (c->shape.study.jobs > 1 || c->shape.n_grid))
        return da_errorf("--budget-minutes times the steps of one shape in this process: with --jobs or --grid, "
                         "give --steps");
    da_needle_config *nc = &x->nc;
    da_needle_config_default(nc);
    nc->needles = c->needles, nc->queries = c->queries, nc->samples = 8;
    if (c->n_contexts > 0) {
        nc->n_contexts = c->n_contexts;
        for (int i = 0; i < c->n_contexts; i++) {
            nc->contexts[i] = c->contexts[i];
            if (c->contexts[i] < 128 || c->contexts[i] > c->seq - 64)
                return da_errorf("--needle-context %d: must lie in 128..seq - 64 = %d (room for the question and "
                                 "the answer)", c->contexts[i], c->seq - 64);
        }
    } else {
        nc->n_contexts = 0;
        if (c->seq / 2 - 64 >= 128) nc->contexts[nc->n_contexts++] = c->seq / 2 - 64;
        nc->contexts[nc->n_contexts++] = c->seq - 64;
    }
    if (c->data) snprintf(x->data, sizeof x->data, "%s", c->data);
    else snprintf(x->data, sizeof x->data, "%s/needle_mix.txt", c->shape.study.out_dir);
    return study_cells(x);
}

/* --resume: the steps are the first run's unless given now (a budget is not timed again). */
static da_status resolve_steps(cmp_study *x, int may_time) {
    da_compare_config *c = &x->c;
    char first[4400];
    cmp_run_dir(x, 0, first, sizeof first);
    da_config first_cfg;
    da_train_config first_tc;
    long first_done;
    const int have_first = c->shape.study.resume && !da_train_state_peek(first, &first_cfg, &first_tc, &first_done).code;
    if (have_first && c->steps_given && c->shape.steps != first_tc.steps) {
        if (!c->shape.study.quiet && may_time)
            fprintf(stderr, "compare: resuming %s with steps %ld (the first run had %ld): every run continues to %ld\n",
                    c->shape.study.out_dir, c->shape.steps, first_tc.steps, c->shape.steps);
    } else if (have_first) {
        c->shape.steps = first_tc.steps;
        if (!c->shape.study.quiet && may_time) fprintf(stderr, "compare: resuming %s: %ld steps per model\n", c->shape.study.out_dir, c->shape.steps);
    } else if (c->budget_minutes > 0 && may_time) {
        da_train_config tc_default; /* run_arch trains with its val_fraction */
        da_train_config_default(&tc_default);
        return steps_for_budget(c, x->data, tc_default.val_fraction, &x->nc, &c->shape.steps);
    }
    return da_ok();
}

static da_status cmp_prepare(void *ctx) {
    cmp_study *x = ctx;
    da_status st = da_ok();
    if (!x->c.data) st = da_needle_mix_write(x->data, 4L << 20, x->c.seq, 1);
    return st.code ? st : resolve_steps(x, 1);
}

da_status da_compare_run(const da_compare_config *c, int k) {
    cmp_study *x = malloc(sizeof *x);
    if (!x) return da_errorf("out of memory");
    da_status st = compare_setup(c, x);
    const int n = x->n_cells * c->shape.n_archs * c->shape.seeds;
    if (!st.code && (k < 0 || k >= n)) st = da_errorf("--run-index %d: the compare has %d runs (0..%d)", k, n, n - 1);
    if (!st.code) st = resolve_steps(x, 0);
    if (!st.code) st = cmp_run(x, k);
    free(x);
    return st;
}

/* The runs through the study scheduler (experiments/study.c), which holds
 * out_dir's lock, then the report. */
da_status da_compare(const da_compare_config *cfg) {
    cmp_study *x = malloc(sizeof *x);
    if (!x) return da_errorf("out of memory");
    da_status st = compare_setup(cfg, x);
    /* in this process a stop is the run's own: it checkpoints the run in training, which --resume continues */
    da_study_opts o = cfg->shape.study;
    if (o.jobs <= 1) o.stop = NULL;
    const da_study plan = {x->n_cells, cfg->shape.n_archs, cfg->shape.seeds, x, cmp_done, cmp_cost, cmp_name, cmp_run, cmp_prepare};
    if (!st.code) st = da_study_run(&plan, &o);
    if (!st.code) st = cmp_report_write(x);
    free(x);
    return st;
}
