/* The one report writer of every study (plain compare and compare --task):
 * from the runs' results, read from their result files, it writes
 * report.json, the figures and report.md, each atomically. A study names
 * its numbers as metrics (a row of the per-cell table, a field of a run in
 * report.json, a category or point of a figure). A kind of study writes its
 * report through report_write, which calls its parts (report_parts) in
 * this order:
 *
 *   report.json   "{", the kind's head fields, "cells": [{"name": ..., <cell fields>, "archs":
 *                   {"<arch>": [{"seed": S, <metrics>, <run fields>}, ...]}}, ...], its tail fields, "}";
 *                   saved atomically, without bare NaN or inf
 *   the kind's figures
 *   report.md     written whole by the kind, saved atomically */
#ifndef DA_REPORT_H
#define DA_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "study/study.h"

enum { REPORT_ROW = 1, REPORT_JSON = 2 }; /* where a metric shows; 0: in figures only */

typedef struct {
    const char *label; /* the table's row */
    const char *key;   /* the run's field in report.json */
    const char *fmt;   /* one value in the table, "%.4f": its decimals are the verdict's resolution */
    const char *jfmt;  /* one value in report.json */
    size_t offset;     /* of the value in a run's result: a double, or a size_t when is_count */
    int is_count;
    int show;         /* REPORT_ROW | REPORT_JSON */
    const char *note; /* the table's last column (the paper's number), or NULL */
} report_metric;

typedef struct report report;
struct report {
    const char *out_dir;
    int n_cells, n_archs, seeds, seed0;
    const char *const *cell_names; /* (n_cells) */
    const char *names[DA_COMPARE_MAX_ARCHS];  /* in files and report.json */
    const char *labels[DA_COMPARE_MAX_ARCHS]; /* in report.md and figures */
    int base; /* the baseline's slot, which verdicts are against; -1: none listed */
    const report_metric *metrics;
    int n_metrics;
    const void *runs; /* (n_cells, n_archs, seeds) results of run_size bytes each */
    size_t run_size;
    const char *note_header; /* the table's last column, or NULL for none */
    const void *ctx;         /* the study's own, for its parts of the report */
};

const void *report_run(const report *r, int cell, int arch, int seed);
/* Metric m of one run, and its mean and sample sd over seeds. */
double report_value(const report *r, int m, int cell, int arch, int seed);
void report_mean_sd(const report *r, int m, int cell, int arch, double *mean, double *sd);
/* The index of the metric with this key, or -1. */
int report_metric_of(const report *r, const char *key);

/* Cell c's table: a row per REPORT_ROW metric, a column per architecture
 * (mean ± sample sd over seeds, n/a where NaN), a spread verdict of each
 * against the baseline (da_verdict_spread) and the note column. */
void report_table(FILE *fp, const report *r, int cell);

/* out_dir/stem.png, or out_dir/stem_<cell>.png in a study of several cells;
 * name: the same without out_dir/. */
void report_figure(const report *r, const char *stem, int cell, char *path, size_t n, char *name, size_t name_n);
/* Cell c's bars: per architecture the seed means of the metrics (categories
 * cats, or the metrics' labels when NULL). */
da_status report_bars(const report *r, int cell, const char *stem, const char *title, const char *ylabel,
                      const char *const *cats, const int *metrics, int n);
/* Cell c's lines: per architecture the seed means of the metrics at x; an
 * architecture whose first value is NaN (not measurable) has no line. */
da_status report_lines(const report *r, int cell, const char *stem, const char *title, const char *xlabel,
                       const char *ylabel, const double *x, const int *metrics, int n);

/* A kind of study's parts of its report. Head fields are each followed by a
 * comma, cell fields too; run and tail fields are each preceded by one. Any
 * part but markdown may be NULL: none. */
typedef struct {
    void (*json_head)(FILE *fp, const report *r);
    void (*json_cell)(FILE *fp, const report *r, int cell);
    void (*json_run)(FILE *fp, const report *r, int cell, int arch, int seed);
    void (*json_tail)(FILE *fp, const report *r);
    da_status (*figures)(const report *r);
    void (*markdown)(FILE *fp, const report *r);
} report_parts;

/* out_dir/report.json, the figures and out_dir/report.md, in that order. */
da_status report_write(const report *r, const report_parts *parts);

#endif
