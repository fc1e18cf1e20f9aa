/* compare --task: the report of a study (report.md, report.json, figures)
 * from its runs' results (see task_study.h). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/arch_column.h"
#include "experiments/compare.h"
#include "study/grid.h"
#include "study/plot.h"
#include "study/report.h"
#include "study/stats.h"
#include "experiments/task_study.h"
#include "io/atomic_file.h"

int task_has_lambda(const da_task_compare_config *c, int a) { return da_arch_describe(c->shape.archs[a]).per_layer_lambda; }

int task_lambda_slot(const da_task_compare_config *c) {
    for (int i = 0; i < c->shape.n_archs; i++)
        if (task_has_lambda(c, i) && !c->shape.windows[i] && !c->shape.columns[i][0]) return i;
    return -1;
}

long da_steps_to_threshold(const long *steps, const double *acc, int n, double threshold) {
    for (int i = 0; i < n; i++)
        if (acc[i] >= threshold) return steps[i];
    return -1;
}

static const double THRESH[3] = {0.5, 0.9, 0.99};

/* One cell and architecture over its seeds: successes (reaching 90%), their
 * median steps, the final accuracies. */
typedef struct {
    int success[TASK_MAX_SEEDS];
    double acc[TASK_MAX_SEEDS], steps90[TASK_MAX_SEEDS];
    int k, n;
    double lo, hi;            /* Wilson 95% of k/n */
    double median90;          /* over the seeds that reached 90%; NAN when none did */
    double median50, median99;
    double acc_mean, acc_sd;
    size_t n_params;
} cell_stats;

static double median_steps(const task_study *S, int cell, int arch, double thr) {
    double v[TASK_MAX_SEEDS];
    int n = 0;
    for (int s = 0; s < S->c->shape.seeds; s++) {
        const task_run *r = study_run(S, cell, arch, s);
        const long k = da_steps_to_threshold(r->step, r->acc, r->n_evals, thr);
        if (k >= 0) v[n++] = (double)k;
    }
    return da_median(v, n);
}

static void stats_of(const task_study *S, int cell, int arch, cell_stats *cs) {
    memset(cs, 0, sizeof *cs);
    cs->n = S->c->shape.seeds;
    for (int s = 0; s < cs->n; s++) {
        const task_run *r = study_run(S, cell, arch, s);
        const long k = da_steps_to_threshold(r->step, r->acc, r->n_evals, TASK_SUCCESS);
        cs->success[s] = k >= 0, cs->k += k >= 0;
        cs->steps90[s] = (double)k, cs->acc[s] = r->final_acc;
        cs->n_params = r->n_params;
    }
    da_wilson_interval(cs->k, cs->n, 1.96, &cs->lo, &cs->hi);
    cs->median50 = median_steps(S, cell, arch, 0.5);
    cs->median90 = median_steps(S, cell, arch, TASK_SUCCESS);
    cs->median99 = median_steps(S, cell, arch, 0.99);
    da_mean_sd(cs->acc, cs->n, &cs->acc_mean, &cs->acc_sd);
}

static void print_steps(FILE *fp, double v) {
    if (isnan(v)) fprintf(fp, " – |");
    else fprintf(fp, " %.0f |", v);
}

static void write_md_head(FILE *fp, const task_study *S, double wall_s) {
    const da_task_compare_config *c = S->c;
    fprintf(fp, "# Retrieval: %s, each architecture against the softmax baseline\n\n", da_task_name(c->task.kind));
    fprintf(fp, "dim %d, %d layers, %d DIFF heads (at equal parameters:", c->shape.dim, c->shape.layers, c->shape.heads);
    for (int a = 0; a < c->shape.n_archs; a++)
        fprintf(fp, "%s %s %d", a ? "," : "", da_study_column_label(&c->shape, a), da_arch_heads(c->shape.archs[a], c->shape.heads));
    fprintf(fp, " heads per layer");
    for (int a = 0; a < c->shape.n_archs; a++)
        if (c->shape.windows[a]) fprintf(fp, "; SWA: softmax over the last %d keys", c->shape.windows[a]);
    fprintf(fp, "); batch %d, %ld steps, lr %g, %d seed(s) (%d..%d); held-out evaluation on %d "
                "sequences every %d steps.",
            c->shape.batch, c->shape.steps, (double)c->lr, c->shape.seeds, c->seed0, c->seed0 + c->shape.seeds - 1, c->eval_seqs, c->eval_every);
    grid_describe(fp, c->shape.grid, c->shape.n_grid);
    fprintf(fp, " %d cell(s), %d runs. Wall time %.0f s%s.\n\n", S->n_cells, S->n_cells * c->shape.n_archs * c->shape.seeds, wall_s,
            c->shape.study.resume ? " in this invocation (--resume: the runs saved before it are loaded, not timed)" : "");
}

/* The study table: per cell and architecture, success with its interval,
 * speed, final accuracy and the verdict against softmax. */
static void write_md_study(FILE *fp, const task_study *S) {
    const da_task_compare_config *c = S->c;
    const int base = da_study_baseline_slot(&c->shape);
    fprintf(fp, "## Success, speed and final accuracy\n\n| cell | arch | parameters | learned (≥ 90%%) | 95%% interval "
                "| median steps to 50%% | to 90%% | to 99%% | final accuracy | vs softmax: Fisher p | Δ final accuracy "
                "[95%% bootstrap] | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < S->n_cells; i++) {
        cell_stats b;
        if (base >= 0) stats_of(S, i, base, &b);
        for (int a = 0; a < c->shape.n_archs; a++) {
            cell_stats cs;
            stats_of(S, i, a, &cs);
            fprintf(fp, "| %s | %s | %zu | %d/%d | %.2f–%.2f |", S->cells[i].name, da_study_column_label(&c->shape, a),
                    cs.n_params, cs.k, cs.n, cs.lo, cs.hi);
            print_steps(fp, cs.median50), print_steps(fp, cs.median90), print_steps(fp, cs.median99);
            fprintf(fp, " %.3f ± %.3f |", cs.acc_mean, cs.acc_sd);
            if (base < 0 || a == base) {
                fprintf(fp, base < 0 ? " – | – | no softmax listed |\n" : " – | – | baseline |\n");
                continue;
            }
            da_verdict v;
            da_verdict_of(cs.success, cs.acc, cs.n, b.success, b.acc, b.n, &v);
            fprintf(fp, " %.3g | %+.3f [%+.3f, %+.3f] | %s |\n", v.p_fisher, cs.acc_mean - b.acc_mean, v.diff_lo,
                    v.diff_hi, v.verdict);
        }
    }
    fprintf(fp, "\nA seed has learned the task when its held-out answer accuracy reaches 90%% at an evaluation (every "
                "%d steps); \"learned\" counts those seeds, with the Wilson 95%% interval of the rate. Median steps "
                "are over the seeds that reached the threshold (– when none did). Final accuracy: mean ± sample sd "
                "over seeds. **Verdict** (against softmax in the same cell): Fisher's exact test on the learned counts "
                "(two-sided, p < 0.05) and the 95%% percentile bootstrap interval (10,000 resamples of each side's "
                "seeds) of the difference of mean final accuracies; \"better\" or \"worse\" when a test calls a "
                "difference and none calls the opposite, \"mixed\" when they disagree, else \"no difference "
                "shown\". With 5 seeds a side, Fisher's test needs at least 4 seeds apart (5/5 against 1/5: p = 0.048) "
                "to call a difference in success.\n\n",
            c->eval_every);
}

/* One paragraph of what a grid shows, in numbers only: each architecture's
 * learned runs over all cells, its verdicts against softmax counted by kind,
 * its best cell, and whether the verdict changes with the shape. */
static void write_md_summary(FILE *fp, const task_study *S) {
    const da_task_compare_config *c = S->c;
    const int base = da_study_baseline_slot(&c->shape);
    if (S->n_cells < 2) return;
    fprintf(fp, "## What the grid shows\n\nOver the %d cells, the seed runs that learned the task (≥ 90%%):", S->n_cells);
    for (int a = 0; a < c->shape.n_archs; a++) {
        int k = 0;
        for (int i = 0; i < S->n_cells; i++) {
            cell_stats cs;
            stats_of(S, i, a, &cs);
            k += cs.k;
        }
        fprintf(fp, "%s %s %d of %d", a ? (a + 1 < c->shape.n_archs ? "," : " and") : "", da_study_column_label(&c->shape, a), k,
                S->n_cells * c->shape.seeds);
    }
    fprintf(fp, ".");
    for (int a = 0; a < c->shape.n_archs; a++) {
        int best = 0, best_k = -1, better = 0, worse = 0, mixed = 0, none = 0;
        double best_acc = -1;
        for (int i = 0; i < S->n_cells; i++) {
            cell_stats cs;
            stats_of(S, i, a, &cs);
            if (cs.k > best_k || (cs.k == best_k && cs.acc_mean > best_acc)) best = i, best_k = cs.k, best_acc = cs.acc_mean;
            if (base < 0 || a == base) continue;
            cell_stats b;
            stats_of(S, i, base, &b);
            da_verdict v;
            da_verdict_of(cs.success, cs.acc, cs.n, b.success, b.acc, b.n, &v);
            if (!strcmp(v.verdict, "better")) better++;
            else if (!strcmp(v.verdict, "worse")) worse++;
            else if (!strcmp(v.verdict, "mixed")) mixed++;
            else none++;
        }
        const char *label = da_study_column_label(&c->shape, a);
        if (best_k > 0)
            fprintf(fp, " %s learns best at %s (%d/%d, final accuracy %.3f)", label, S->cells[best].name, best_k,
                    c->shape.seeds, best_acc);
        else
            fprintf(fp, " %s learns in no cell (its best final accuracy, %.3f, at %s)", label, best_acc,
                    S->cells[best].name);
        if (base < 0 || a == base) {
            fprintf(fp, ".");
            continue;
        }
        char tail[160];
        if (better && worse) snprintf(tail, sizeof tail, ": the verdict depends on the shape; no single verdict holds over the grid");
        else if (!better && !worse) snprintf(tail, sizeof tail, ": no cell separates it from softmax at %d seeds", c->shape.seeds);
        else snprintf(tail, sizeof tail, ": where a difference shows, it favours %s", better ? label : "softmax");
        fprintf(fp, "; against softmax it is better in %d cell(s), worse in %d, mixed in %d, with no difference shown in "
                    "%d%s.",
                better, worse, mixed, none, tail);
    }
    fprintf(fp, " (The verdict rule is stated under the table above; the heatmaps show the rate per cell.)\n\n");
}

/* Pooled over seeds: count and Wilson interval, as "0.91 [0.89, 0.93]". */
static void print_rate(FILE *fp, long k, long n) {
    double lo, hi;
    da_wilson_interval(k, n, 1.96, &lo, &hi);
    if (n) fprintf(fp, " %.3f [%.3f, %.3f] |", (double)k / n, lo, hi);
    else fprintf(fp, " – |");
}

static void write_md_counterfactual(FILE *fp, const task_study *S) {
    const da_task_compare_config *c = S->c;
    fprintf(fp, "## Counterfactual context: faithful, parametric leak, binding error\n\n| cell | arch | faithful | "
                "parametric leak | binding error | other | agreeing context: right | agreeing: binding error | entity "
                "absent: right (memory) | absent: binding error | lookback ratio (counterfactual / agreeing / absent) "
                "| faithful per seed, mean ± sd |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < S->n_cells; i++)
        for (int a = 0; a < c->shape.n_archs; a++) {
            da_cf_counts t;
            memset(&t, 0, sizeof t);
            double look[3] = {0}, fr[TASK_MAX_SEEDS], m, sd;
            for (int s = 0; s < c->shape.seeds; s++) {
                const da_cf_counts *x = &study_run(S, i, a, s)->cf;
                for (int k = 0; k < 3; k++)
                    t.n[k] += x->n[k], t.right[k] += x->right[k], t.binding[k] += x->binding[k],
                        look[k] += x->lookback[k] / c->shape.seeds;
                t.leak += x->leak;
                fr[s] = x->n[0] ? (double)x->right[0] / x->n[0] : 0;
            }
            da_mean_sd(fr, c->shape.seeds, &m, &sd);
            fprintf(fp, "| %s | %s |", S->cells[i].name, da_study_column_label(&c->shape, a));
            print_rate(fp, t.right[0], t.n[0]), print_rate(fp, t.leak, t.n[0]), print_rate(fp, t.binding[0], t.n[0]);
            print_rate(fp, t.n[0] - t.right[0] - t.leak - t.binding[0], t.n[0]);
            print_rate(fp, t.right[1], t.n[1]), print_rate(fp, t.binding[1], t.n[1]);
            print_rate(fp, t.right[2], t.n[2]), print_rate(fp, t.binding[2], t.n[2]);
            fprintf(fp, " %.3f / %.3f / %.3f | %.3f ± %.3f |\n", look[0], look[1], look[2], m, sd);
        }
    fprintf(fp, "\nHeld-out episodes (%d per run, docs/tasks.md), answers by argmax, exact match. Counterfactual: the "
                "context gives the queried entity an attribute other than its fact; faithful = the context's, "
                "parametric leak = the memorised fact, binding error = another context pair's attribute. Each rate "
                "pools the queries of every seed, with its Wilson 95%% interval (queries within a seed are not "
                "independent: the per-seed column shows the spread between seeds). Lookback ratio: at the answer "
                "position, attention on the context pairs over attention on the context and the query part, mean over "
                "layers, heads and answers of 16 held-out episodes (DIFF: the combined map over its absolute "
                "mass).\n\n",
            c->cf_episodes);
}

/* Heatmaps of the learned rate over the grid: columns are the values of the
 * first grid axis (the task points when there is no grid), rows the rest. */
static da_status heatmaps(const task_study *S) {
    const da_task_compare_config *c = S->c;
    if (S->n_cells < 2) return da_ok();
    const char *const *keys = DA_GRID_KEY_NAMES;
    const int n_cols = c->shape.n_grid ? c->shape.grid[0].n : S->n_cells, n_rows = S->n_cells / n_cols;
    char (*rl)[168] = calloc((size_t)n_rows, sizeof *rl), (*cl)[64] = calloc((size_t)n_cols, sizeof *cl);
    char (*notes)[48] = calloc((size_t)S->n_cells, sizeof *notes);
    const char **rows = calloc((size_t)n_rows, sizeof *rows), **cols = calloc((size_t)n_cols, sizeof *cols);
    const char **np = calloc((size_t)S->n_cells, sizeof *np);
    double *v = calloc((size_t)S->n_cells * 2, sizeof *v), *base_v = v + S->n_cells;
    da_status st = rl && cl && notes && rows && cols && np && v ? da_ok() : da_errorf("out of memory for the heatmaps");
    /* cell i sits at row i / n_cols, column i % n_cols: the first grid axis varies slowest... so map explicitly */
    int *at = calloc((size_t)S->n_cells, sizeof *at);
    if (!at) st = da_errorf("out of memory for the heatmaps");
    for (int i = 0; i < S->n_cells && !st.code; i++) {
        const task_cell *x = &S->cells[i];
        const int col = c->shape.n_grid ? x->grid_index[0] : i;
        int row = 0, len = 0;
        char *lab = rl[0];
        if (c->shape.n_grid) { /* row: the point, then the other axes, in mixed radix */
            row = x->point;
            for (int g = 1; g < c->shape.n_grid; g++) row = row * c->shape.grid[g].n + x->grid_index[g];
            lab = rl[row];
            if (S->n_points > 1) len = snprintf(lab, 168, "%s", x->point_name);
            for (int g = 1; g < c->shape.n_grid; g++)
                len += snprintf(lab + len, 168 - (size_t)len, "%s%s %g", len ? ", " : "", keys[c->shape.grid[g].key],
                                c->shape.grid[g].values[x->grid_index[g]]);
            if (!len) snprintf(lab, 168, "all");
            snprintf(cl[col], 64, "%s %g", keys[c->shape.grid[0].key], c->shape.grid[0].values[col]);
        } else {
            snprintf(rl[0], 168, "all");
            snprintf(cl[col], 64, "%s", x->point_name);
        }
        at[i] = row * n_cols + col;
    }
    for (int r = 0; r < n_rows; r++) rows[r] = rl[r];
    for (int j = 0; j < n_cols; j++) cols[j] = cl[j];
    const int base = da_study_baseline_slot(&c->shape);
    const char *xlabel = c->shape.n_grid ? keys[c->shape.grid[0].key] : "task point", *ylabel = n_rows > 1 ? "cell" : "";
    for (int pass = base >= 0 ? 0 : 1; pass < 2 && !st.code; pass++) /* pass 0: the baseline's rates first */
        for (int a = 0; a < c->shape.n_archs && !st.code; a++) {
            if (pass == 0 && a != base) continue;
            for (int i = 0; i < S->n_cells; i++) {
                cell_stats cs;
                stats_of(S, i, a, &cs);
                (pass ? v : base_v)[at[i]] = (double)cs.k / cs.n;
                snprintf(notes[at[i]], 48, "%d/%d, acc %.2f", cs.k, cs.n, cs.acc_mean);
                np[at[i]] = notes[at[i]];
            }
            if (pass == 0) continue;
            char path[4300], title[200];
            const char *label = da_study_column_label(&c->shape, a);
            snprintf(path, sizeof path, "%s/success_%s.png", c->shape.study.out_dir, da_study_column_name(&c->shape, a));
            snprintf(title, sizeof title, "%s: seeds reaching 90%% answer accuracy (rate; k/n, mean final accuracy)", label);
            st = da_plot_heatmap(path, title, xlabel, ylabel, rows, n_rows, cols, n_cols, v, np, 0, 1, 0);
            if (st.code || base < 0 || a == base) continue;
            for (int i = 0; i < S->n_cells; i++) {
                cell_stats cs, b;
                stats_of(S, i, a, &cs), stats_of(S, i, base, &b);
                da_verdict vd;
                da_verdict_of(cs.success, cs.acc, cs.n, b.success, b.acc, b.n, &vd);
                v[at[i]] -= base_v[at[i]];
                snprintf(notes[at[i]], 48, "%s (p %.2g)", vd.verdict, vd.p_fisher);
            }
            snprintf(path, sizeof path, "%s/success_%s_vs_softmax.png", c->shape.study.out_dir, da_study_column_name(&c->shape, a));
            snprintf(title, sizeof title, "%s minus softmax: learned rate (verdict, Fisher p)", label);
            st = da_plot_heatmap(path, title, xlabel, ylabel, rows, n_rows, cols, n_cols, v, np, -1, 1, 1);
        }
    free(rl), free(cl), free(notes), free(rows), free(cols), free(np), free(v), free(at);
    return st;
}

/* ---------------------------------------------------------------- through the one report writer (report.c) */

enum { ORDER_MEAN, ORDER_BEST, ORDER_WORST, ORDER_GROUPED, ORDER_ALTERNATING, ORDER_MARGIN, N_ORDER };

/* The report's metrics and what its parts need. */
typedef struct {
    const task_study *S;
    double wall_s;
    report_metric m[32];
    int order0; /* the icl order figures, ORDER_* after it */
} task_report;

#define AT(field) offsetof(task_run, field)

static void metrics_of(task_report *k, report *r) {
    const da_task_kind kind = k->S->c->task.kind;
    const int RJ = REPORT_ROW | REPORT_JSON;
    static const char *const ql[TASK_N_QBITS] = {"accuracy, 8-bit logits", "accuracy, 6-bit logits",
                                                 "accuracy, 4-bit logits"};
    static const char *const ol[N_ORDER] = {"mean over random orders", "best order", "worst order", "grouped by class",
                                            "alternating classes", "margin"};
    static const size_t oat[N_ORDER] = {AT(order.mean),    AT(order.best),        AT(order.worst),
                                        AT(order.grouped), AT(order.alternating), AT(order.margin)};
    int n = 0;
    k->m[n++] = (report_metric){"parameters", "n_params", "%.0f", NULL, AT(n_params), 1, REPORT_JSON, NULL};
    k->m[n++] = (report_metric){"training time (s)", "train_seconds", "%.1f", NULL, AT(train_s), 0, REPORT_JSON, NULL};
    k->m[n++] = (report_metric){"final accuracy", "final_accuracy", "%.4f", NULL, AT(final_acc), 0, REPORT_JSON, NULL};
    if (da_task_is_ruler(kind)) /* RULER's partial credit: the share of answer tokens right */
        k->m[n++] = (report_metric){"partial credit", "partial_accuracy", "%.3f", "%.4f", AT(partial_acc), 0, RJ, NULL};
    for (int i = 0; i < TASK_N_QBITS; i++)
        k->m[n++] = (report_metric){ql[i], NULL, "%.3f", NULL, AT(quant_acc) + i * sizeof(double), 0, REPORT_ROW, NULL};
    k->m[n++] = (report_metric){"attention on the answer pair", "attention_answer", "%.3f", "%.4f", AT(attn_answer), 0,
                                RJ, NULL};
    k->m[n++] = (report_metric){"attention elsewhere", "attention_elsewhere", "%.3f", "%.4f", AT(attn_noise), 0, RJ,
                                NULL};
    k->m[n++] = (report_metric){"attention on noise tokens", "attention_noise_tokens", "%.3f", "%.4f",
                                AT(attn_noise_tokens), 0, kind == DA_TASK_NOISY_RECALL ? RJ : REPORT_JSON, NULL};
    k->m[n++] = (report_metric){"top-1 \\|attn logit\\|", "attn_logit_top1", "%.2f", "%.4f", AT(out.logits.top[0]), 0,
                                RJ, NULL};
    k->m[n++] = (report_metric){"median \\|attn logit\\|", "attn_logit_median", "%.3f", "%.4f", AT(out.logits.median),
                                0, REPORT_JSON, NULL};
    k->m[n++] = (report_metric){"top-1 \\|hidden\\|", "hidden_top1", "%.2f", "%.4f", AT(out.hidden.top[0]), 0, RJ,
                                NULL};
    k->m[n++] = (report_metric){"median \\|hidden\\|", "hidden_median", "%.3f", "%.4f", AT(out.hidden.median), 0,
                                REPORT_JSON, NULL};
    k->order0 = n;
    for (int i = 0; i < N_ORDER; i++) k->m[n++] = (report_metric){ol[i], NULL, "%.3f", NULL, oat[i], 0, 0, NULL};
    r->metrics = k->m, r->n_metrics = n;
}

/* icl: the order-robustness table, mean ± sd over seeds of each episode-mean figure. */
static void write_md_orders(FILE *fp, const report *r) {
    const task_report *k = r->ctx;
    const task_study *S = k->S;
    const da_task_compare_config *c = S->c;
    const int base = r->base;
    fprintf(fp, "## Order robustness (in-context classification)\n\n| task | arch | accuracy, mean over %d random "
                "orders | best order | worst order | margin (best − worst) | grouped by class | alternating classes | "
                "verdict: margin | verdict: grouped |\n|---|---|---|---|---|---|---|---|---|---|\n",
            c->perms);
    static const int cols[6] = {ORDER_MEAN, ORDER_BEST, ORDER_WORST, ORDER_MARGIN, ORDER_GROUPED, ORDER_ALTERNATING};
    for (int p = 0; p < S->n_cells; p++) {
        double bm = 0, bsd = 0, bg = 0, bgsd = 0;
        if (base >= 0) {
            report_mean_sd(r, k->order0 + ORDER_MARGIN, p, base, &bm, &bsd);
            report_mean_sd(r, k->order0 + ORDER_GROUPED, p, base, &bg, &bgsd);
        }
        for (int a = 0; a < c->shape.n_archs; a++) {
            double m[6], sd[6];
            fprintf(fp, "| %s | %s |", S->cells[p].name, da_study_column_label(&c->shape, a));
            for (int i = 0; i < 6; i++) {
                report_mean_sd(r, k->order0 + cols[i], p, a, &m[i], &sd[i]);
                fprintf(fp, " %.3f ± %.3f |", m[i], sd[i]);
            }
            if (a == base) fprintf(fp, " baseline | baseline |\n");
            else if (base < 0) fprintf(fp, " no softmax baseline listed | – |\n");
            else {
                char v1[64], v2[64];
                da_verdict_spread(v1, sizeof v1, da_study_column_label(&c->shape, a), c->shape.seeds, m[3], sd[3], bm, bsd, 0.0005);
                da_verdict_spread(v2, sizeof v2, da_study_column_label(&c->shape, a), c->shape.seeds, m[4], sd[4], bg, bgsd, 0.0005);
                fprintf(fp, " %s | %s |\n", v1, v2);
            }
        }
    }
    fprintf(fp, "\nEach of %d held-out episodes (a rule and its demonstrations) is scored on every distinct symbol of "
                "its demos, with the same demos in %d random orders, grouped by class, and with the classes taking "
                "turns. Best, worst and margin are per episode (the best and worst of its random orders), then "
                "averaged over the episodes; the paper's margin is that of one fixed set of demonstrations. A smaller "
                "margin is better.\n\n",
            c->perm_episodes, c->perms);
    for (int p = 0; p < S->n_cells; p++) {
        char path[4300], name[128];
        report_figure(r, "permutation_margin", p, path, sizeof path, name, sizeof name);
        fprintf(fp, "![order robustness, %s](%s)\n\n", S->cells[p].name, name);
    }
}

static void write_md(FILE *fp, const report *r) {
    const task_report *k = r->ctx;
    const task_study *S = k->S;
    const da_task_compare_config *c = S->c;
    char path[4300], name[128];
    write_md_head(fp, S, k->wall_s);
    write_md_summary(fp, S);
    write_md_study(fp, S);
    task_columns_md(fp, S);
    task_lengths_md(fp, S);
    if (c->task.kind == DA_TASK_COUNTERFACTUAL) write_md_counterfactual(fp, S);
    fprintf(fp, "## The trained models\n\n");
    for (int p = 0; p < S->n_cells; p++) {
        if (S->n_cells > 1) fprintf(fp, "### %s\n\n", S->cells[p].name);
        report_table(fp, r, p);
        int n = 0;
        for (int a = 0; a < c->shape.n_archs; a++) {
            if (!task_has_lambda(c, a)) continue;
            const task_run *r0 = study_run(S, p, a, 0);
            fprintf(fp, "%s %s", n++ ? ";" : "\nλ per layer at the end of training (first seed):", da_study_column_label(&c->shape, a));
            for (int l = 0; l < S->cells[p].layers && l < TASK_MAX_LAYERS; l++)
                fprintf(fp, "%s%.3f", l ? ", " : " ", r0->lambda[r0->n_evals - 1][l]);
        }
        fprintf(fp, n ? ".\n\n" : "\n");
    }
    fprintf(fp, "Accuracies with quantized logits run the inference engine with the attention logits of each query "
                "row fake-quantized (dynamic absmax, symmetric) before the softmax, on the same held-out sequences (n/a: the "
                "engine has no quantized attention logits for the architecture). Attention shares are taken at "
                "every answer position of 16 held-out sequences, per layer and head; DIFF's map is A1 - λA2 over "
                "its absolute mass (as in `eval attention`). \"Answer pair\": the retrieved key and its value; "
                "\"elsewhere\": every other earlier position. Values are mean ± sample sd over seeds; the verdict "
                "columns apply the spread rule (\"within noise\" when the means differ by less than the sum of their "
                "sds). Every number, and every curve, is in report.json.\n\n");
    if (c->task.kind == DA_TASK_ICL) write_md_orders(fp, r);
    for (int p = 0; p < S->n_cells; p++) {
        report_figure(r, "accuracy", p, path, sizeof path, name, sizeof name);
        fprintf(fp, "![accuracy, %s](%s)\n\n", S->cells[p].name, name);
    }
    fprintf(fp, "![steps to 90%%](steps_to_90.png)\n");
    if (task_lambda_slot(c) >= 0) fprintf(fp, "\n![lambda](lambda.png)\n");
}

static void json_head(FILE *fp, const report *r) {
    const task_report *k = r->ctx;
    const da_task_compare_config *c = k->S->c;
    fprintf(fp, "\"task\":\"%s\",\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,\"batch\":%d,\"steps\":%ld,\"lr\":%g,"
                "\"seeds\":%d,\"eval_seqs\":%d,\"eval_every\":%d,\"wall_seconds\":%.1f,",
            da_task_name(c->task.kind), c->shape.dim, c->shape.layers, c->shape.heads, c->shape.batch, c->shape.steps, (double)c->lr, c->shape.seeds,
            c->eval_seqs, c->eval_every, k->wall_s);
}

static void json_cell(FILE *fp, const report *r, int p) {
    const task_study *S = ((const task_report *)r->ctx)->S;
    const da_task_compare_config *c = S->c;
    const task_cell *x = &S->cells[p];
    const da_task_config *t = &x->task;
    fprintf(fp, "\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,\"batch\":%d,\"lr\":%g,\"seq\":%d,\"vocab\":%d,"
                "\"pairs\":%d,\"alpha\":%g,\"noise\":%g,\"noise_vocab\":%d,",
            x->dim, x->layers, x->heads, x->batch, (double)x->lr, t->seq, t->vocab, t->pairs, t->alpha, t->noise,
            t->noise_vocab);
    if (t->kind == DA_TASK_COUNTERFACTUAL)
        fprintf(fp, "\"entities\":%d,\"attributes\":%d,\"context_pairs\":%d,\"memory_share\":%g,\"cf_episodes\":%d,",
                t->entities, t->attributes, t->context_pairs, t->memory_share, c->cf_episodes);
    fprintf(fp, "\"learned\":{");
    for (int a = 0; a < c->shape.n_archs; a++) {
        cell_stats cs;
        stats_of(S, p, a, &cs);
        fprintf(fp, "%s\"%s\":{\"seeds\":%d,\"reached_90\":%d,\"wilson_95\":[%.4f,%.4f],\"median_steps_to_90\":",
                a ? "," : "", da_study_column_name(&c->shape, a), cs.n, cs.k, cs.lo, cs.hi);
        da_json_number(fp, "%.0f", cs.median90);
        fprintf(fp, ",\"final_accuracy_mean\":%.4f,\"final_accuracy_sd\":%.4f}", cs.acc_mean, cs.acc_sd);
    }
    fprintf(fp, "},");
    if (t->kind == DA_TASK_ICL)
        fprintf(fp, "\"demos\":%d,\"classes\":%d,\"symbols\":%d,\"perms\":%d,\"perm_episodes\":%d,", t->demos,
                t->classes, t->symbols, c->perms, c->perm_episodes);
}

static void json_run(FILE *fp, const report *rep, int p, int a, int s) {
    const task_study *S = ((const task_report *)rep->ctx)->S;
    const da_task_compare_config *c = S->c;
    const task_run *r = study_run(S, p, a, s);
    static const int bits[TASK_N_QBITS] = TASK_QBITS;
    for (int k = 0; k < 3; k++)
        fprintf(fp, ",\"steps_to_%d\":%ld", (int)(THRESH[k] * 100 + 0.5),
                da_steps_to_threshold(r->step, r->acc, r->n_evals, THRESH[k]));
    fprintf(fp, ",\"quant_accuracy\":{");
    for (int k = 0; k < TASK_N_QBITS; k++) { /* null where the engine has no quantized logits for the arch */
        fprintf(fp, "%s\"%d\":", k ? "," : "", bits[k]);
        da_json_number(fp, "%.4f", r->quant_acc[k]);
    }
    fprintf(fp, "}");
    if (c->task.kind == DA_TASK_ICL) {
        const da_icl_order_result *o = &r->order;
        fprintf(fp, ",\"order\":{\"mean\":%.4f,\"best\":%.4f,\"worst\":%.4f,\"margin\":%.4f,\"grouped\":%.4f,"
                    "\"alternating\":%.4f}",
                o->mean, o->best, o->worst, o->margin, o->grouped, o->alternating);
    }
    if (c->task.kind == DA_TASK_COUNTERFACTUAL) {
        const da_cf_counts *x = &r->cf;
        fprintf(fp, ",\"counterfactual\":{\"queries\":[%ld,%ld,%ld],\"right\":[%ld,%ld,%ld],\"leak\":%ld,"
                    "\"binding\":[%ld,%ld,%ld],\"lookback\":[%.4f,%.4f,%.4f]}",
                x->n[0], x->n[1], x->n[2], x->right[0], x->right[1], x->right[2], x->leak, x->binding[0], x->binding[1],
                x->binding[2], x->lookback[0], x->lookback[1], x->lookback[2]);
    }
    fprintf(fp, ",\"curve\":[");
    for (int i = 0; i < r->n_evals; i++) {
        fprintf(fp, "%s{\"step\":%ld,\"accuracy\":%.4f", i ? "," : "", r->step[i], r->acc[i]);
        if (task_has_lambda(c, a)) {
            fprintf(fp, ",\"lambda\":[");
            for (int l = 0; l < S->cells[p].layers && l < TASK_MAX_LAYERS; l++)
                fprintf(fp, "%s%.4f", l ? "," : "", r->lambda[i][l]);
            fprintf(fp, "]");
        }
        fprintf(fp, "}");
    }
    fprintf(fp, "]");
}

/* report.json's columns (parameters, FLOPs) and accuracy per evaluation length. */
static void json_tail(FILE *fp, const report *rep) {
    const task_study *S = ((const task_report *)rep->ctx)->S;
    task_columns_json(fp, S);
    task_lengths_json(fp, S);
}

static da_status figures(const report *rep) {
    const task_report *k = rep->ctx;
    const task_study *S = k->S;
    const da_task_compare_config *c = S->c;
    const task_cell *pts = S->cells;
    const int n_pts = S->n_cells;
    char path[4200], title[320];
    da_status st = da_ok();
    /* accuracy against steps: per architecture the seed mean and the band of mean ± sd */
    for (int p = 0; p < n_pts && !st.code; p++) {
        double x[TASK_MAX_EVALS], y[DA_COMPARE_MAX_ARCHS][3][TASK_MAX_EVALS];
        const int n = (*study_run(S, p, 0, 0)).n_evals;
        da_series s[DA_COMPARE_MAX_ARCHS];
        for (int a = 0; a < c->shape.n_archs; a++) {
            for (int i = 0; i < n; i++) {
                double v[TASK_MAX_SEEDS], m, sd;
                for (int k = 0; k < c->shape.seeds; k++) v[k] = (*study_run(S, p, a, k)).acc[i];
                da_mean_sd(v, c->shape.seeds, &m, &sd);
                x[i] = (double)(*study_run(S, p, 0, 0)).step[i];
                y[a][0][i] = m, y[a][1][i] = fmax(m - sd, 0), y[a][2][i] = fmin(m + sd, 1); /* accuracies */
            }
        }
        const double *lo[DA_COMPARE_MAX_ARCHS], *hi[DA_COMPARE_MAX_ARCHS];
        for (int a = 0; a < c->shape.n_archs; a++) {
            s[a] = (da_series){da_study_column_label(&c->shape, a), x, y[a][0], n};
            lo[a] = c->shape.seeds > 1 ? y[a][1] : NULL, hi[a] = c->shape.seeds > 1 ? y[a][2] : NULL;
        }
        report_figure(rep, "accuracy", p, path, sizeof path, NULL, 0);
        snprintf(title, sizeof title, "%s (%s): held-out answer accuracy%s", da_task_name(c->task.kind), pts[p].name,
                 c->shape.seeds > 1 ? ", mean ± sd over seeds" : "");
        st = da_plot_lines_band(path, title, "step", "answer accuracy", s, lo, hi, c->shape.n_archs);
    }
    if (st.code) return st;
    /* steps to 90% against difficulty (the sweep point's index); NAN where a seed did not reach it */
    double px[TASK_MAX_CELLS], py[DA_COMPARE_MAX_ARCHS][TASK_MAX_CELLS];
    da_series s90[DA_COMPARE_MAX_ARCHS];
    for (int a = 0; a < c->shape.n_archs; a++) {
        for (int p = 0; p < n_pts; p++) { /* the mean when every seed reached 90% */
            cell_stats cs;
            double sd;
            stats_of(S, p, a, &cs);
            da_mean_sd(cs.steps90, cs.n, &py[a][p], &sd);
            px[p] = p, py[a][p] = cs.k == cs.n ? py[a][p] : NAN;
        }
        s90[a] = (da_series){da_study_column_label(&c->shape, a), px, py[a], n_pts};
    }
    snprintf(path, sizeof path, "%s/steps_to_90.png", c->shape.study.out_dir);
    if ((st = da_plot_lines(path, "Steps to 90% answer accuracy by sweep point (report.md lists them)",
                            "sweep point", "steps", s90, c->shape.n_archs)).code)
        return st;
    static const int orders[5] = {ORDER_MEAN, ORDER_BEST, ORDER_WORST, ORDER_GROUPED, ORDER_ALTERNATING};
    int om[5];
    for (int i = 0; i < 5; i++) om[i] = k->order0 + orders[i];
    for (int p = 0; p < n_pts && c->task.kind == DA_TASK_ICL && !st.code; p++) { /* the seed means of the order figures */
        snprintf(title, sizeof title, "Accuracy by demo order, %s (mean over episodes%s)", pts[p].name,
                 c->shape.seeds > 1 ? " and seeds" : "");
        st = report_bars(rep, p, "permutation_margin", title, "accuracy", NULL, om, 5);
    }
    if (st.code || (st = heatmaps(S)).code || (st = task_lengths_heatmaps(S)).code) return st;
    /* lambda per layer during training: DIFF, first point and seed */
    const int diff = task_lambda_slot(c);
    if (diff < 0) return st;
    const task_run *r = &(*study_run(S, 0, diff, 0));
    double lx[TASK_MAX_EVALS], ly[TASK_MAX_LAYERS][TASK_MAX_EVALS];
    char lnames[TASK_MAX_LAYERS][32];
    da_series ls[TASK_MAX_LAYERS];
    const int L = pts[0].layers < TASK_MAX_LAYERS ? pts[0].layers : TASK_MAX_LAYERS;
    for (int l = 0; l < L; l++) {
        for (int i = 0; i < r->n_evals; i++) lx[i] = (double)r->step[i], ly[l][i] = r->lambda[i][l];
        snprintf(lnames[l], sizeof lnames[l], "layer %d", l);
        ls[l] = (da_series){lnames[l], lx, ly[l], r->n_evals};
    }
    snprintf(path, sizeof path, "%s/lambda.png", c->shape.study.out_dir);
    snprintf(title, sizeof title, "DIFF lambda per layer during training (%s, first seed)", pts[0].name);
    return da_plot_lines(path, title, "step", "lambda", ls, L);
}

static const report_parts parts = {
    .json_head = json_head,
    .json_cell = json_cell,
    .json_run = json_run,
    .json_tail = json_tail,
    .figures = figures,
    .markdown = write_md,
};

da_status task_write_report(const task_study *S, double wall_s) {
    const da_task_compare_config *c = S->c;
    task_report *k = calloc(1, sizeof *k);
    const char **cell_names = calloc((size_t)S->n_cells, sizeof *cell_names);
    if (!k || !cell_names) {
        free(k), free(cell_names);
        return da_errorf("out of memory for the report");
    }
    for (int i = 0; i < S->n_cells; i++) cell_names[i] = S->cells[i].name;
    report r = {.out_dir = c->shape.study.out_dir, .n_cells = S->n_cells, .n_archs = c->shape.n_archs, .seeds = c->shape.seeds,
                .seed0 = c->seed0, .cell_names = cell_names, .base = da_study_baseline_slot(&c->shape), .runs = S->runs,
                .run_size = sizeof *S->runs, .ctx = k};
    for (int a = 0; a < c->shape.n_archs; a++) r.names[a] = da_study_column_name(&c->shape, a), r.labels[a] = da_study_column_label(&c->shape, a);
    k->S = S, k->wall_s = wall_s;
    metrics_of(k, &r);
    da_status st = report_write(&r, &parts);
    free(k), free(cell_names);
    return st;
}
