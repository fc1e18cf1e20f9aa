/* Plain compare's report through the study room's writer (study/report.c):
 * its metrics, its own parts of report.json, its figures and report.md. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiments/text_study.h"
#include "study/plot.h"
#include "study/report.h"
#include "study/stats.h"

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
        cmp_run_dir(x, cell * x->c.shape.seeds * na + a, dir, sizeof dir);
        double elapsed;
        const int n = cmp_read_metrics(dir, step[a], tr[a], va[a], CAP, &elapsed);
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

static const report_parts parts = {
    .json_head = json_head,
    .json_cell = json_cell,
    .json_run = json_run,
    .json_tail = json_tail,
    .figures = figures,
    .markdown = write_md,
};

/* report.json, the figures and report.md from the runs' result files. */
da_status cmp_report_write(const cmp_study *x) {
    const da_compare_config *c = &x->c;
    cmp_report *k = calloc(1, sizeof *k);
    const int n_runs = x->n_cells * c->shape.n_archs * c->shape.seeds;
    arch_result *res = calloc((size_t)n_runs, sizeof *res);
    const char *cell_names[MAX_CELLS];
    da_status st = k && res ? da_ok() : da_errorf("out of memory for the results");
    for (int k_run = 0; k_run < n_runs && !st.code; k_run++) {
        const study_slot q = study_slot_of(k_run, c->shape.n_archs, c->shape.seeds);
        char path[4400];
        cmp_result_path(x, k_run, path, sizeof path);
        if (cmp_result_load(x, k_run, &res[((size_t)q.cell * c->shape.n_archs + q.arch) * c->shape.seeds + q.seed], 1))
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
        metrics_of(k);
        st = report_write(r, &parts);
    }
    for (int i = 0; res && i < n_runs; i++) free(res[i].map.map);
    free(res), free(k);
    return st;
}
