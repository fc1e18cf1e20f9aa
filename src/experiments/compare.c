/* `diffattn compare`: DIFF and the softmax baseline trained at equal
 * parameters, tokens, data and seed, then the same evaluations on both, a
 * study over the cells of a grid with a side-by-side report (see
 * compare.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"
#include "study/arch_column.h"
#include "experiments/compare.h"
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
#include "diffattn/formats.h"

void da_compare_config_default(da_compare_config *c) {
    *c = (da_compare_config){.shape = {.study = {.out_dir = "runs/compare", .jobs = 1}, .steps = 300, .dim = 256,
                                       .layers = 4, .heads = 4, .batch = 8, .seeds = 1},
                             .seq = 512, .needles = 3, .queries = 1};
    c->shape.n_archs = da_arch_compare_defaults(c->shape.archs);
}
_Static_assert(DA_ARCH_N <= DA_COMPARE_MAX_ARCHS, "da_arch_compare_defaults may fill every architecture");

da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed) {
    if (context < 256) return da_errorf("the needle mix needs a context of at least 256 bytes, got %d", context);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.queries = 1, nc.n_contexts = 1, nc.n_depths = 11;
    for (int i = 0; i <= 10; i++) nc.depths[i] = 10 * i;
    nc.seed = seed ^ 0x6d6978ULL; /* other prompts than the evaluation's */
    da_rng r;
    da_rng_seed(&r, nc.seed);
    long written = 0;
    for (int s = 0; written < bytes && !st.code; s++) {
        /* Documents of 1..4 needles, from barely more than the needles up to
         * the whole context, every needle asked for once, in a random order:
         * short documents and many questions give a small model enough
         * retrieval examples to learn the format within a few hundred steps.
         * n needles take about 50n bytes of the context and 46n after it. */
        const int most = (context - 32) / 96 < 4 ? (context - 32) / 96 : 4; /* 2 at 256 bytes */
        nc.needles = 1 + (int)(da_rng_next(&r) % (uint64_t)most);
        const int lo = 50 * nc.needles + 32, hi = context - 46 * nc.needles;
        const double u = da_rng_uniform(&r);
        nc.contexts[0] = lo + (int)(u * u * (hi - lo)); /* mostly short: more questions per token */
        uint8_t *text;
        size_t n;
        char keys[16][16], values[16][16];
        st = da_needle_prompt(&nc, 0, s % 11, s, &text, &n, keys, values);
        if (st.code) break;
        fwrite(text, 1, n, af.fp);
        written += (long)n;
        int order[16];
        for (int i = 0; i < nc.needles; i++) order[i] = i;
        for (int i = nc.needles - 1; i > 0; i--) {
            int j = (int)(da_rng_next(&r) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int i = 0; i < nc.needles; i++)
            written += fprintf(af.fp, "\nThe special magic %s number is: %s.", keys[order[i]], values[order[i]]);
        written += fprintf(af.fp, "\n\n");
        free(text);
    }
    if (st.code) {
        da_atomic_abort(&af);
        return st;
    }
    return da_atomic_commit(&af);
}

/* One run's results: what its result file holds. */
typedef struct {
    double eval_loss, needle;
    double needle_acc[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS];
    double needle_ctx[DA_NEEDLE_MAX_CONTEXTS];  /* mean over depths */
    double needle_depth[DA_NEEDLE_MAX_DEPTHS]; /* mean over contexts */
    double attn_answer, attn_noise, digits;     /* digits: teacher-forced answer digit accuracy */
    da_outliers_result out;
    double quant[4], quant_needle[4]; /* loss increase and needle accuracy at 16, 8, 6, 4 bits */
    double train_s, eval_s;
    double loss_flash_s, loss_ref_s, fixed_s, per_prompt_s; /* evaluate()'s parts, for the budget */
    size_t n_params;
    double flops_per_token; /* training FLOPs per token at seq (da_train_flops_per_token) */
    da_needle_attention_map map; /* first seed only: one prompt's attention, for the figure */
} arch_result;

static const int QBITS[4] = {16, 8, 6, 4};

/* A cell of the grid: the model and training shape its runs share. */
typedef struct {
    grid_shape sh;
    int index[DA_GRID_N_KEYS];
    char name[96];
} cmp_cell;

enum { MAX_CELLS = 256 };

/* The study: the settings every run shares, steps resolved, and its cells. */
typedef struct {
    da_compare_config c;
    da_needle_config nc;
    char data[4200];
    int n_cells;
    cmp_cell cells[MAX_CELLS];
} cmp_study;

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

/* A run's metrics.jsonl: the train loss per logged step and the val loss at
 * evaluation steps (NAN elsewhere), cap lines at most; returns how many.
 * *elapsed gets the training time: elapsed_s restarts with each resumed
 * session, so the sessions' last values are summed. */
static int read_metrics(const char *dir, double *step, double *train, double *val, int cap, double *elapsed) {
    char p[4400], line[512];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    FILE *fp = da_fopen_regular(p, NULL);
    int n = 0;
    double done = 0, last = 0;
    long st;
    while (fp && fgets(line, sizeof line, fp)) {
        const char *e = strstr(line, "\"elapsed_s\":"), *t = strstr(line, "\"train_loss\":"), *v = strstr(line, "\"val_loss\":");
        if (e && atof(e + 12) < last) done += last; /* a new session began */
        if (e) last = atof(e + 12);
        if (n >= cap || sscanf(line, "{\"step\":%ld", &st) != 1) continue;
        step[n] = (double)st, train[n] = t ? atof(t + 13) : NAN, val[n] = v ? atof(v + 11) : NAN;
        n++;
    }
    if (fp) fclose(fp);
    *elapsed = done + last;
    return n;
}

/* Run k's folder: an ordinary training run folder, in cells of its own with a grid. */
static void run_dir(const cmp_study *x, int k, char *buf, size_t n) {
    const study_slot q = study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds);
    study_run_dir(buf, n, x->c.shape.study.out_dir, x->c.shape.n_grid ? q.cell : -1, da_study_column_name(&x->c.shape, q.arch), 1337 + q.seed);
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
    run_dir(x, k, dir, sizeof dir);
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
    read_metrics(dir, NULL, NULL, NULL, 0, &r->train_s);
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

/* The settings run k was made with: a result file made with others is not reused. */
static void run_key(const cmp_study *x, int k, char *buf, size_t n) {
    const da_compare_config *c = &x->c;
    const study_slot q = study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds);
    const int ci = q.cell, a = q.arch, s = q.seed;
    const grid_shape *sh = &x->cells[ci].sh;
    size_t len = (size_t)snprintf(buf, n, "compare %s seed %d data %s steps %ld dim %d layers %d heads %d seq %d "
                                          "batch %d lr %g window %d needles %d queries %d samples %d contexts",
                                  da_study_column_name(&c->shape, a), 1337 + s, x->data, c->shape.steps, sh->dim, sh->layers, sh->heads, c->seq,
                                  sh->batch, (double)sh->lr, c->shape.windows[a], x->nc.needles, x->nc.queries,
                                  x->nc.samples);
    for (int i = 0; i < x->nc.n_contexts && len < n; i++) len += (size_t)snprintf(buf + len, n - len, " %d", x->nc.contexts[i]);
}

static int rate(double x) { return x >= 0 && x <= 1 + 1e-6; } /* false for NaN */

/* NULL when every count is in range and every value finite, else what is not. */
static const char *result_invalid(const arch_result *r, uint32_t map_n) {
    if (!(isfinite(r->eval_loss) && r->eval_loss >= 0) || !rate(r->needle) || !rate(r->digits)) return "losses or accuracies";
    for (int i = 0; i < DA_NEEDLE_MAX_CONTEXTS; i++)
        for (int j = 0; j < DA_NEEDLE_MAX_DEPTHS; j++)
            if (!rate(r->needle_acc[i][j]) || !rate(r->needle_ctx[i]) || !rate(r->needle_depth[j])) return "needle accuracies";
    if (!isfinite(r->attn_answer) || !isfinite(r->attn_noise)) return "attention shares";
    for (int i = 0; i < 5; i++)
        if (!(isfinite(r->out.logits.top[i]) && isfinite(r->out.hidden.top[i]))) return "outliers";
    for (int i = 0; i < 4; i++)
        if (isinf(r->quant[i]) || !(isnan(r->quant_needle[i]) || rate(r->quant_needle[i]))) return "quantized logits";
    if (!r->n_params || !(r->train_s >= 0 && isfinite(r->train_s))) return "n_params or train_s";
    if (map_n != (uint32_t)(r->map.rows * r->map.cols) || r->map.rows < 0 || r->map.cols < 0) return "attention map";
    return NULL;
}

/* Run k's result file: its arch_result (the map pointer zeroed) and the map. */
static void result_path(const cmp_study *x, int k, char *buf, size_t n) {
    char dir[4300];
    run_dir(x, k, dir, sizeof dir);
    snprintf(buf, n, "%s/result.bin", dir);
}

static da_status result_save(const cmp_study *x, int k, const arch_result *r) {
    char key[STUDY_KEY_BYTES], path[4400];
    run_key(x, k, key, sizeof key);
    result_path(x, k, path, sizeof path);
    arch_result body = *r;
    body.map.map = NULL;
    const uint32_t map_n = r->map.map ? (uint32_t)(r->map.rows * r->map.cols) : 0;
    return study_result_save(path, "DACMPRN2", key, &body, sizeof body, r->map.map, map_n);
}

/* 0 when run k's result file is valid for these settings (r->map then malloc'd), else -1. */
static int result_load(const cmp_study *x, int k, arch_result *r, int say) {
    char key[STUDY_KEY_BYTES], path[4400];
    run_key(x, k, key, sizeof key);
    result_path(x, k, path, sizeof path);
    float *map;
    uint32_t map_n;
    if (study_result_load(path, "DACMPRN2", key, r, sizeof *r, &map, &map_n, 1u << 26)) {
        r->map.map = NULL;
        return -1;
    }
    r->map.map = map;
    const char *bad = result_invalid(r, map_n);
    if (bad && say) fprintf(stderr, "compare: %s: its %s out of range or not finite; the run is evaluated again\n", path, bad);
    if (bad) free(r->map.map), r->map.map = NULL;
    return bad ? -1 : 0;
}

static int cmp_done(void *ctx, int k) {
    arch_result r;
    const int done = !result_load(ctx, k, &r, !((const cmp_study *)ctx)->c.shape.study.quiet);
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
    if (!st.code) st = result_save(x, k, &r);
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
    run_dir(x, 0, first, sizeof first);
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

/* ---------------------------------------------------------------- the report, through experiments/report.c */

enum { NA = DA_COMPARE_MAX_ARCHS, MAX_METRICS = 32 + DA_NEEDLE_MAX_CONTEXTS + DA_NEEDLE_MAX_DEPTHS };

/* The report's metrics, with where the figures find theirs. */
typedef struct {
    report r;
    const cmp_study *x;
    report_metric m[MAX_METRICS];
    char labels[DA_NEEDLE_MAX_CONTEXTS + DA_NEEDLE_MAX_DEPTHS][64];
    int depth0, ctx0, quant0, qneedle0, outliers[4];
} cmp_report;

#define AT(field) offsetof(arch_result, field)

/* Adds a metric; returns its index. */
static int metric(cmp_report *k, const char *label, const char *key, const char *fmt, const char *jfmt, size_t at,
                  int show, const char *note) {
    k->m[k->r.n_metrics] = (report_metric){label, key, fmt, jfmt, at, 0, show, note};
    return k->r.n_metrics++;
}

/* The rows of the table in order; the paper's numbers (DIFF / Transformer) in the last column. */
static void metrics_of(cmp_report *k) {
    const da_needle_config *nc = &k->x->nc;
    const int RJ = REPORT_ROW | REPORT_JSON;
    k->r.metrics = k->m;
    k->m[metric(k, "parameters", "n_params", "%.0f", NULL, AT(n_params), RJ, NULL)].is_count = 1;
    metric(k, "validation loss (nats/token)", "val_loss", "%.4f", "%.6f", AT(eval_loss), RJ, NULL);
    metric(k, "needle retrieval accuracy", "needle", "%.3f", "%.4f", AT(needle), RJ, "0.85 / 0.55 (4K, N=6, R=2)");
    for (int i = 0; i < nc->n_contexts; i++) {
        snprintf(k->labels[i], 64, "needle accuracy, %d-byte prompts", nc->contexts[i]);
        const int m = metric(k, k->labels[i], NULL, "%.3f", NULL, AT(needle_ctx) + i * sizeof(double), REPORT_ROW, NULL);
        if (!i) k->ctx0 = m;
    }
    for (int j = 0; j < nc->n_depths; j++) {
        char *l = k->labels[DA_NEEDLE_MAX_CONTEXTS + j];
        snprintf(l, 64, "%d%%", nc->depths[j]);
        const int m = metric(k, l, NULL, "%.3f", NULL, AT(needle_depth) + j * sizeof(double), 0, NULL);
        if (!j) k->depth0 = m;
    }
    metric(k, "answer digits right, teacher-forced (chance 0.1)", "answer_digit_accuracy", "%.3f", "%.4f", AT(digits),
           RJ, NULL);
    metric(k, "attention on the answer span", "attention_answer", "%.4f", NULL, AT(attn_answer), RJ,
           "0.27-0.40 / 0.03-0.09");
    metric(k, "attention noise (irrelevant context)", "attention_noise", "%.4f", NULL, AT(attn_noise), RJ,
           "0.01-0.02 / 0.49-0.54");
    k->outliers[0] = metric(k, "top-1 \\|attention logit\\|", "attn_logit_top1", "%.2f", "%.4f", AT(out.logits.top[0]),
                            RJ, "38.8 / 318.0");
    k->outliers[1] = metric(k, "top-10", "attn_logit_top10", "%.2f", "%.4f", AT(out.logits.top[3]), REPORT_JSON, NULL);
    metric(k, "median \\|attention logit\\|", "attn_logit_median", "%.3f", "%.4f", AT(out.logits.median), RJ, NULL);
    k->outliers[2] = metric(k, "top-1 \\|hidden state\\|", "hidden_top1", "%.2f", "%.4f", AT(out.hidden.top[0]), RJ,
                            "1688 / 3609");
    k->outliers[3] = metric(k, "top-10", "hidden_top10", "%.2f", "%.4f", AT(out.hidden.top[3]), REPORT_JSON, NULL);
    metric(k, "median \\|hidden state\\|", "hidden_median", "%.3f", "%.4f", AT(out.hidden.median), RJ, NULL);
    static const char *const dl[4] = {"Δ loss, 16-bit logits", "Δ loss, 8-bit logits", "Δ loss, 6-bit logits",
                                      "Δ loss, 4-bit logits"};
    static const char *const nl[4] = {"needle accuracy, 16-bit logits", "needle accuracy, 8-bit logits",
                                      "needle accuracy, 6-bit logits", "needle accuracy, 4-bit logits"};
    for (int i = 0; i < 4; i++) /* 16 bits: the figures' first point only */
        k->quant0 = metric(k, dl[i], NULL, "%.4f", NULL, AT(quant) + i * sizeof(double), i ? REPORT_ROW : 0, NULL) - i;
    for (int i = 0; i < 4; i++)
        k->qneedle0 = metric(k, nl[i], i == 3 ? "quant_needle_4" : NULL, "%.3f", NULL, AT(quant_needle) + i * sizeof(double),
                             i ? REPORT_ROW : 0, i == 3 ? "about the 6-bit Transformer's" : NULL) - i;
    metric(k, "training time (s)", "train_seconds", "%.0f", "%.1f", AT(train_s), RJ, NULL);
    metric(k, "evaluation time (s)", "eval_seconds", "%.0f", "%.1f", AT(eval_s), REPORT_JSON, NULL);
}

static void json_head(FILE *fp, const report *r) {
    const cmp_study *x = ((const cmp_report *)r->ctx)->x;
    const da_compare_config *c = &x->c;
    const da_needle_config *nc = &x->nc;
    fprintf(fp, "\"data\":\"%s\",\"steps\":%ld,\"budget_minutes\":%g,\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,"
                "\"seq\":%d,\"batch\":%d,\"seeds\":%d,\"needle\":{\"needles\":%d,\"queries\":%d,\"samples\":%d,"
                "\"contexts\":[",
            x->data, c->shape.steps, c->budget_minutes, c->shape.dim, c->shape.layers, c->shape.heads, c->seq, c->shape.batch, c->shape.seeds, nc->needles,
            nc->queries, nc->samples);
    for (int i = 0; i < nc->n_contexts; i++) fprintf(fp, "%s%d", i ? "," : "", nc->contexts[i]);
    fprintf(fp, "],\"depths\":[");
    for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%d", j ? "," : "", nc->depths[j]);
    fprintf(fp, "]},");
}

static void json_cell(FILE *fp, const report *r, int cell) {
    const grid_shape *sh = &((const cmp_report *)r->ctx)->x->cells[cell].sh;
    fprintf(fp, "\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,\"batch\":%d,\"lr\":%g,", sh->dim, sh->layers, sh->heads,
            sh->batch, (double)sh->lr);
}

/* "key":{"16":v0,"8":v1,"6":v2,"4":v3}, null where the arch has no quantized logits (NaN) */
static void json_bits(FILE *fp, const char *key, const char *fmt, const double v[4]) {
    fprintf(fp, ",\"%s\":{", key);
    for (int i = 0; i < 4; i++) {
        fprintf(fp, "%s\"%d\":", i ? "," : "", QBITS[i]);
        da_json_number(fp, fmt, v[i]);
    }
    fprintf(fp, "}");
}

static void json_run(FILE *fp, const report *r, int cell, int arch, int seed) {
    const da_needle_config *nc = &((const cmp_report *)r->ctx)->x->nc;
    const arch_result *x = report_run(r, cell, arch, seed);
    fprintf(fp, ",\"needle_by_context_depth\":[");
    for (int i = 0; i < nc->n_contexts; i++) {
        fprintf(fp, "%s[", i ? "," : "");
        for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%.4f", j ? "," : "", x->needle_acc[i][j]);
        fprintf(fp, "]");
    }
    fprintf(fp, "]");
    json_bits(fp, "quant_delta_loss", "%.6f", x->quant);
    json_bits(fp, "quant_needle", "%.4f", x->quant_needle);
}

static void json_tail(FILE *fp, const report *r) {
    fprintf(fp, ",\"paper\":{");
    for (int m = 0, n = 0; m < r->n_metrics; m++)
        if (r->metrics[m].note) fprintf(fp, "%s\"%s\":\"%s\"", n++ ? "," : "", r->metrics[m].key, r->metrics[m].note);
    fprintf(fp, "}");
}

/* Training and validation loss of every arch's first seed in the cell, from its run's log. */
static da_status loss_figure(const report *r, const cmp_study *x, int cell) {
    const int na = r->n_archs;
    enum { CAP = 8192 };
    static double step[NA][CAP], tr[NA][CAP], va[NA][CAP];
    char names[2 * NA][64], p[4300];
    da_series ls[2 * NA];
    for (int a = 0; a < na; a++) {
        char dir[4300];
        run_dir(x, cell * x->c.shape.seeds * na + a, dir, sizeof dir);
        double elapsed;
        const int n = read_metrics(dir, step[a], tr[a], va[a], CAP, &elapsed);
        snprintf(names[a], sizeof names[a], "%s train", r->labels[a]);
        snprintf(names[na + a], sizeof names[na + a], "%s validation", r->labels[a]);
        ls[a] = (da_series){names[a], step[a], tr[a], n};
        ls[na + a] = (da_series){names[na + a], step[a], va[a], n};
    }
    report_figure(r, "loss_curves", cell, p, sizeof p, NULL, 0);
    return da_plot_lines(p, "Loss (first seed)", "step", "loss (nats/token)", ls, 2 * na);
}

/* One prompt's attention, first seed, every model on one scale. */
static da_status attention_figure(const report *r, const cmp_study *x, int cell) {
    da_attention_band bands[NA];
    for (int a = 0; a < r->n_archs; a++) {
        const da_needle_attention_map *mp = &((const arch_result *)report_run(r, cell, a, 0))->map;
        bands[a] = (da_attention_band){da_arch_describe(x->c.shape.archs[a]).map_note, mp->map, mp->rows, mp->cols,
                                       mp->span_begin, mp->span_end, mp->needle_begin, mp->needle_end};
    }
    char p[4300];
    report_figure(r, "attention_heatmap", cell, p, sizeof p, NULL, 0);
    return da_plot_attention_bands(p, "Attention of the answer positions (mean over layers and heads)", bands,
                                   r->n_archs);
}

static const char *const FIGURES[][2] = {
    {"loss_curves", "loss curves"},
    {"needle_by_depth", "needle retrieval by depth"},
    {"needle_by_context", "needle retrieval by context"},
    {"attention_heatmap", "attention of the answer positions"},
    {"outliers", "outliers"},
    {"quant_logits", "quantized logits: loss"},
    {"quant_needle", "quantized logits: retrieval"},
};

static da_status figures(const report *r) {
    const cmp_report *k = r->ctx;
    const cmp_study *x = k->x;
    const da_needle_config *nc = &x->nc;
    static const double bits_x[4] = {16, 8, 6, 4};
    static const char *const ocats[4] = {"top-1 |logit|", "top-10 |logit|", "top-1 |hidden|", "top-10 |hidden|"};
    char clabels[DA_NEEDLE_MAX_CONTEXTS][32];
    const char *ccats[DA_NEEDLE_MAX_CONTEXTS];
    int depth[DA_NEEDLE_MAX_DEPTHS], ctx[DA_NEEDLE_MAX_CONTEXTS], quant[4], qneedle[4];
    for (int j = 0; j < nc->n_depths; j++) depth[j] = k->depth0 + j;
    for (int i = 0; i < nc->n_contexts; i++) {
        snprintf(clabels[i], sizeof clabels[i], "%d bytes", nc->contexts[i]);
        ccats[i] = clabels[i], ctx[i] = k->ctx0 + i;
    }
    for (int i = 0; i < 4; i++) quant[i] = k->quant0 + i, qneedle[i] = k->qneedle0 + i;
    da_status st = da_ok();
    for (int i = 0; i < r->n_cells && !st.code; i++) {
        if ((st = loss_figure(r, x, i)).code ||
            (st = report_bars(r, i, "needle_by_depth", "Needle retrieval accuracy by depth of the asked needle",
                              "accuracy", NULL, depth, nc->n_depths)).code ||
            (st = report_bars(r, i, "needle_by_context", "Needle retrieval accuracy by context length", "accuracy",
                              ccats, ctx, nc->n_contexts)).code ||
            (st = attention_figure(r, x, i)).code ||
            (st = report_bars(r, i, "outliers", "Largest attention logits and hidden states", "|value|", ocats,
                              k->outliers, 4)).code ||
            (st = report_lines(r, i, "quant_logits", "Validation loss increase with quantized attention logits",
                               "bits", "loss increase (nats)", bits_x, quant, 4)).code)
            break;
        st = report_lines(r, i, "quant_needle", "Needle retrieval accuracy with quantized attention logits", "bits",
                          "accuracy", bits_x, qneedle, 4);
    }
    return st;
}

static void write_md(FILE *fp, const report *r) {
    const cmp_study *x = ((const cmp_report *)r->ctx)->x;
    const da_compare_config *c = &x->c;
    const da_needle_config *nc = &x->nc;
    const int na = c->shape.n_archs;
    fprintf(fp, "# ");
    for (int a = 0; a < na; a++) fprintf(fp, "%s%s", a ? (a + 1 < na ? ", " : " and ") : "", r->labels[a]);
    fprintf(fp, " side by side\n\nEqual tokens, data and seed: dim %d, %d layers, %d DIFF heads (the others have "
                "their own heads at that size: %d for the baseline, of half the size), %ld steps of %d x %d tokens, "
                "%d seed(s). Data: %s. DIFF and the baseline have equal parameters; ",
            c->shape.dim, c->shape.layers, c->shape.heads, da_arch_heads(da_arch_baseline(), c->shape.heads), c->shape.steps, c->shape.batch, c->seq,
            c->shape.seeds, x->data);
    for (int a = 0; a < na; a++) {
        const da_arch_info in = da_arch_describe(c->shape.archs[a]);
        if (in.extra_params_note[0] && !c->shape.windows[a]) fprintf(fp, "%s adds %s; ", in.label, in.extra_params_note);
        if (c->shape.windows[a]) fprintf(fp, "SWA is the baseline attending to its last %d keys only; ", c->shape.windows[a]);
    }
    fprintf(fp, "see the parameters row.");
    grid_describe(fp, c->shape.grid, c->shape.n_grid);
    if (c->shape.n_grid) fprintf(fp, " %d cells.", r->n_cells);
    fprintf(fp, "\n\n");
    for (int i = 0; i < r->n_cells; i++) {
        if (r->n_cells > 1) fprintf(fp, "## %s\n\n", x->cells[i].name);
        report_table(fp, r, i);
        fprintf(fp, "\n");
        for (size_t f = 0; f < sizeof FIGURES / sizeof FIGURES[0]; f++) {
            char path[4300], name[128];
            report_figure(r, FIGURES[f][0], i, path, sizeof path, name, sizeof name);
            fprintf(fp, "![%s](%s)\n\n", FIGURES[f][1], name);
        }
    }
    fprintf(fp, "Values are mean ± sample standard deviation over seeds (± 0 with one seed: no spread measured). "
                "\"within noise\" means the two means differ by less than the sum of their spreads; with one seed "
                "no difference can be called. The paper's numbers come from 3B-parameter models at 4K context and "
                "are there for orientation, not as a target at this scale.\n\n");
    fprintf(fp, "Needle prompts: %d needles, %d asked, %d samples per (context, depth) at depths ", nc->needles,
            nc->queries, nc->samples);
    for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%d%%", j ? ", " : "", nc->depths[j]);
    fprintf(fp, "; contexts of ");
    for (int i = 0; i < nc->n_contexts; i++) fprintf(fp, "%s%d", i ? " and " : "", nc->contexts[i]);
    fprintf(fp, " bytes. Attention shares: from the positions that generate the answer (teacher-forced), mean over "
                "layers, heads and prompts; each architecture's combined map (");
    for (int a = 0; a < na; a++) fprintf(fp, "%s%s", a ? "; " : "", da_arch_describe(c->shape.archs[a]).map_note);
    fprintf(fp, ") divided by its absolute mass, so negative weights subtract (`diffattn eval attention --help`). "
                "Quantized logits: dynamic absmax per query row, symmetric. Every number is in report.json.\n");
}

/* report.json, the figures and report.md from the runs' result files. */
static da_status compare_report(const cmp_study *x) {
    const da_compare_config *c = &x->c;
    cmp_report *k = calloc(1, sizeof *k);
    const int n_runs = x->n_cells * c->shape.n_archs * c->shape.seeds;
    arch_result *res = calloc((size_t)n_runs, sizeof *res);
    const char *cell_names[MAX_CELLS];
    da_status st = k && res ? da_ok() : da_errorf("out of memory for the results");
    for (int k_run = 0; k_run < n_runs && !st.code; k_run++) {
        const study_slot q = study_slot_of(k_run, c->shape.n_archs, c->shape.seeds);
        char path[4400];
        result_path(x, k_run, path, sizeof path);
        if (result_load(x, k_run, &res[((size_t)q.cell * c->shape.n_archs + q.arch) * c->shape.seeds + q.seed], 1))
            st = da_errorf("%s: missing or made with other settings (run the compare with --resume)", path);
    }
    if (!st.code) {
        report *r = &k->r;
        k->x = x;
        for (int i = 0; i < x->n_cells; i++) cell_names[i] = x->cells[i].name;
        *r = (report){.out_dir = c->shape.study.out_dir, .n_cells = x->n_cells, .n_archs = c->shape.n_archs, .seeds = c->shape.seeds, .seed0 = 1337,
                      .cell_names = cell_names};
        for (int a = 0; a < c->shape.n_archs; a++) r->names[a] = da_study_column_name(&c->shape, a), r->labels[a] = da_study_column_label(&c->shape, a);
        r->base = da_study_baseline_slot(&c->shape);
        r->runs = res, r->run_size = sizeof *res, r->ctx = k;
        r->note_header = "paper (DIFF / Transformer)";
        r->json_head = json_head, r->json_cell = json_cell, r->json_run = json_run, r->json_tail = json_tail;
        r->markdown = write_md, r->figures = figures;
        metrics_of(k);
        st = report_write(r);
    }
    for (int i = 0; res && i < n_runs; i++) free(res[i].map.map);
    free(res), free(k);
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
    if (!st.code) st = compare_report(x);
    free(x);
    return st;
}
