/* compare --task with a length curriculum (--train-seq): the answer accuracy
 * of every column at every evaluation length (--seq), mean over seeds, and
 * the effective lengths, RULER's figure (task_study.h, docs/tasks.md). */
#include <stdio.h>
#include <stdlib.h>

#include "experiments/compare.h"
#include "study/stats.h"
#include "study/plot.h"
#include "experiments/task_study.h"

static const double LEVELS[2] = {0.9, 0.5};

/* acc, sd (n): the seeds' mean accuracy of column a of cell i at each evaluation length, and its sample sd. */
static int mean_by_length(const task_study *s, int i, int a, double *acc, double *sd) {
    const task_run *r0 = study_run(s, i, a, 0);
    for (int k = 0; k < r0->n_lengths; k++) {
        double v[TASK_MAX_SEEDS];
        for (int sd_i = 0; sd_i < s->c->shape.seeds; sd_i++) v[sd_i] = study_run(s, i, a, sd_i)->length_acc[k];
        da_mean_sd(v, s->c->shape.seeds, &acc[k], &sd[k]);
    }
    return r0->n_lengths;
}

/* The longest evaluated length whose mean accuracy is at least level; 0 when none is. */
static int effective_length(const int *length, const double *acc, int n, double level) {
    int best = 0;
    for (int k = 0; k < n; k++)
        if (acc[k] >= level && length[k] > best) best = length[k];
    return best;
}

void task_lengths_md(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    if (!c->n_train_seqs) return;
    const task_run *r0 = study_run(s, 0, 0, 0);
    fprintf(fp, "## Accuracy per length\n\nTrained on the curriculum");
    for (int i = 0; i < c->n_train_seqs; i++) fprintf(fp, "%s%d", i ? ", " : " ", c->train_seqs[i]);
    fprintf(fp, " (equal step shares, in order); answer accuracy at each evaluation length, mean over %d seed(s). "
                "Effective length: the longest evaluated length with accuracy ≥ 0.9 (≥ 0.5); – when none.\n\n| cell "
                "| arch |", c->shape.seeds);
    for (int k = 0; k < r0->n_lengths; k++) fprintf(fp, " %d |", r0->length[k]);
    fprintf(fp, " effective length (≥ 0.9) | (≥ 0.5) |\n|---|---|");
    for (int k = 0; k < r0->n_lengths + 2; k++) fprintf(fp, "---|");
    fprintf(fp, "\n");
    for (int i = 0; i < s->n_cells; i++)
        for (int a = 0; a < c->shape.n_archs; a++) {
            double acc[8], sd[8];
            const int n = mean_by_length(s, i, a, acc, sd);
            fprintf(fp, "| %s | %s |", s->cells[i].point_name, da_study_column_label(&c->shape, a));
            for (int k = 0; k < n; k++) fprintf(fp, " %.3f |", acc[k]);
            for (int e = 0; e < 2; e++) {
                const int L = effective_length(r0->length, acc, n, LEVELS[e]);
                if (L) fprintf(fp, " %d |", L);
                else fprintf(fp, " – |");
            }
            fprintf(fp, "\n");
        }
    fprintf(fp, "\n");
    for (int a = 0; a < c->shape.n_archs; a++)
        fprintf(fp, "![accuracy by length and cell, %s](length_%s.png)\n\n", da_study_column_label(&c->shape, a),
                da_study_column_name(&c->shape, a));
}

/* length_<arch>.png: one heatmap per column, the cells (task points: noise,
 * needles...) down and the evaluation lengths across, each square the seeds'
 * mean accuracy with its sd, so a column's fall-off with length and noise
 * reads at a glance and columns compare on one colour scale. */
da_status task_lengths_heatmaps(const task_study *s) {
    const da_task_compare_config *c = s->c;
    if (!c->n_train_seqs) return da_ok();
    const task_run *r0 = study_run(s, 0, 0, 0);
    const int n_rows = s->n_cells, n_cols = r0->n_lengths;
    const size_t n = (size_t)n_rows * n_cols;
    char(*col_label)[16] = calloc((size_t)n_cols, sizeof *col_label), (*note)[32] = calloc(n, sizeof *note);
    const char **rows = calloc((size_t)n_rows, sizeof *rows), **cols = calloc((size_t)n_cols, sizeof *cols);
    const char **notes = calloc(n, sizeof *notes);
    double *v = calloc(n, sizeof *v);
    da_status st = col_label && note && rows && cols && notes && v ? da_ok()
                                                                   : da_errorf("out of memory for the length heatmaps");
    for (int k = 0; k < n_cols && !st.code; k++)
        snprintf(col_label[k], 16, "%d", r0->length[k]), cols[k] = col_label[k];
    for (int i = 0; i < n_rows && !st.code; i++) rows[i] = s->cells[i].point_name;
    for (int a = 0; a < c->shape.n_archs && !st.code; a++) {
        for (int i = 0; i < n_rows; i++) {
            double sd[8];
            mean_by_length(s, i, a, v + (size_t)i * n_cols, sd);
            for (int k = 0; k < n_cols; k++) {
                const size_t at = (size_t)i * n_cols + k;
                snprintf(note[at], 32, c->shape.seeds > 1 ? "± %.2f" : "one seed", sd[k]);
                notes[at] = note[at];
            }
        }
        char path[4300], title[200];
        snprintf(path, sizeof path, "%s/length_%s.png", c->shape.study.out_dir, da_study_column_name(&c->shape, a));
        snprintf(title, sizeof title, "%s: answer accuracy by evaluation length (mean ± sd over %d seed%s)",
                 da_study_column_label(&c->shape, a), c->shape.seeds, c->shape.seeds > 1 ? "s" : "");
        st = da_plot_heatmap(path, title, "evaluation length (tokens)", "cell", rows, n_rows, cols, n_cols, v, notes, 0,
                             1, 0);
    }
    free(col_label), free(note), free(rows), free(cols), free(notes), free(v);
    return st;
}

void task_lengths_json(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    if (!c->n_train_seqs) return;
    const task_run *r0 = study_run(s, 0, 0, 0);
    fprintf(fp, ",\"lengths\":{\"train_seq\":[");
    for (int i = 0; i < c->n_train_seqs; i++) fprintf(fp, "%s%d", i ? "," : "", c->train_seqs[i]);
    fprintf(fp, "],\"eval_seq\":[");
    for (int k = 0; k < r0->n_lengths; k++) fprintf(fp, "%s%d", k ? "," : "", r0->length[k]);
    fprintf(fp, "],\"columns\":[");
    for (int i = 0; i < s->n_cells; i++)
        for (int a = 0; a < c->shape.n_archs; a++) {
            double acc[8], sd[8];
            const int n = mean_by_length(s, i, a, acc, sd);
            fprintf(fp, "%s{\"cell\":%d,\"arch\":\"%s\",\"accuracy\":[", i || a ? "," : "", i, da_study_column_name(&c->shape, a));
            for (int k = 0; k < n; k++) fprintf(fp, "%s%.4f", k ? "," : "", acc[k]);
            fprintf(fp, "],\"seeds\":[");
            for (int sd = 0; sd < c->shape.seeds; sd++) {
                const task_run *r = study_run(s, i, a, sd);
                fprintf(fp, "%s[", sd ? "," : "");
                for (int k = 0; k < n; k++) fprintf(fp, "%s%.4f", k ? "," : "", r->length_acc[k]);
                fprintf(fp, "]");
            }
            fprintf(fp, "],\"effective_length_90\":%d,\"effective_length_50\":%d}",
                    effective_length(r0->length, acc, n, LEVELS[0]), effective_length(r0->length, acc, n, LEVELS[1]));
        }
    fprintf(fp, "]}");
}
