/* The one report writer of every study (see report.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study/plot.h"
#include "study/report.h"
#include "study/stats.h"
#include "io/atomic_file.h"

enum { NA = DA_COMPARE_MAX_ARCHS, MAX_SERIES_POINTS = 64 };

const void *report_run(const report *r, int cell, int arch, int seed) {
    return (const char *)r->runs + (((size_t)cell * r->n_archs + arch) * r->seeds + seed) * r->run_size;
}

double report_value(const report *r, int m, int cell, int arch, int seed) {
    const char *p = (const char *)report_run(r, cell, arch, seed) + r->metrics[m].offset;
    if (r->metrics[m].is_count) {
        size_t v;
        memcpy(&v, p, sizeof v);
        return (double)v;
    }
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

void report_mean_sd(const report *r, int m, int cell, int arch, double *mean, double *sd) {
    double v[256];
    const int n = r->seeds < 256 ? r->seeds : 256;
    for (int s = 0; s < n; s++) v[s] = report_value(r, m, cell, arch, s);
    da_mean_sd(v, n, mean, sd);
}

int report_metric_of(const report *r, const char *key) {
    for (int m = 0; m < r->n_metrics; m++)
        if (r->metrics[m].key && !strcmp(r->metrics[m].key, key)) return m;
    return -1;
}

void report_table(FILE *fp, const report *r, int cell) {
    const int na = r->n_archs, base = r->base;
    fprintf(fp, "| metric |");
    for (int a = 0; a < na; a++) fprintf(fp, " %s |", r->labels[a]);
    for (int a = 0; a < na && base >= 0; a++)
        if (a != base) fprintf(fp, " %s vs %s |", r->labels[a], r->labels[base]);
    if (r->note_header) fprintf(fp, " %s |", r->note_header);
    fprintf(fp, "\n|---|");
    for (int a = 0; a < na + (base >= 0 ? na - 1 : 0) + (r->note_header != NULL); a++) fprintf(fp, "---|");
    fprintf(fp, "\n");
    for (int m = 0; m < r->n_metrics; m++) {
        const report_metric *x = &r->metrics[m];
        if (!(x->show & REPORT_ROW)) continue;
        double mean[NA], sd[NA];
        fprintf(fp, "| %s |", x->label);
        for (int a = 0; a < na; a++) {
            report_mean_sd(r, m, cell, a, &mean[a], &sd[a]);
            if (isnan(mean[a])) fprintf(fp, " n/a |"); /* not measurable for the architecture */
            else {
                fprintf(fp, " "), fprintf(fp, x->fmt, mean[a]), fprintf(fp, " ± "), fprintf(fp, x->fmt, sd[a]);
                fprintf(fp, " |");
            }
        }
        for (int a = 0; a < na && base >= 0; a++) {
            if (a == base) continue;
            char vd[96] = "–";
            const char *dot = strchr(x->fmt, '.');
            if (!isnan(mean[a]) && !isnan(mean[base]))
                da_verdict_spread(vd, sizeof vd, r->labels[a], r->seeds, mean[a], sd[a], mean[base], sd[base],
                                  0.5 * pow(10, -(dot ? atoi(dot + 1) : 0)));
            fprintf(fp, " %s |", vd);
        }
        if (r->note_header) fprintf(fp, " %s |", x->note ? x->note : "");
        fprintf(fp, "\n");
    }
}

void report_figure(const report *r, const char *stem, int cell, char *path, size_t n, char *name, size_t name_n) {
    char own[128];
    if (!name) name = own, name_n = sizeof own;
    if (r->n_cells > 1) snprintf(name, name_n, "%s_%d.png", stem, cell);
    else snprintf(name, name_n, "%s.png", stem);
    snprintf(path, n, "%s/%s", r->out_dir, name);
}

/* Per architecture the seed means of the metrics, into v[a][i]. */
static void seed_means(const report *r, int cell, const int *metrics, int n, double (*v)[MAX_SERIES_POINTS]) {
    for (int a = 0; a < r->n_archs; a++)
        for (int i = 0; i < n; i++) {
            double sd;
            report_mean_sd(r, metrics[i], cell, a, &v[a][i], &sd);
        }
}

da_status report_bars(const report *r, int cell, const char *stem, const char *title, const char *ylabel,
                      const char *const *cats, const int *metrics, int n) {
    if (n > MAX_SERIES_POINTS) return da_errorf("%s: %d categories, at most %d", stem, n, MAX_SERIES_POINTS);
    double v[NA][MAX_SERIES_POINTS];
    const double *vp[NA];
    const char *own[MAX_SERIES_POINTS];
    for (int i = 0; i < n; i++) own[i] = r->metrics[metrics[i]].label;
    seed_means(r, cell, metrics, n, v);
    for (int a = 0; a < r->n_archs; a++) vp[a] = v[a];
    char path[4300];
    report_figure(r, stem, cell, path, sizeof path, NULL, 0);
    return da_plot_bars(path, title, ylabel, cats ? cats : own, n, r->labels, vp, r->n_archs);
}

da_status report_lines(const report *r, int cell, const char *stem, const char *title, const char *xlabel,
                       const char *ylabel, const double *x, const int *metrics, int n) {
    if (n > MAX_SERIES_POINTS) return da_errorf("%s: %d points, at most %d", stem, n, MAX_SERIES_POINTS);
    double v[NA][MAX_SERIES_POINTS];
    da_series s[NA];
    int ns = 0;
    seed_means(r, cell, metrics, n, v);
    for (int a = 0; a < r->n_archs; a++)
        if (!isnan(v[a][0])) s[ns++] = (da_series){r->labels[a], x, v[a], n};
    char path[4300];
    report_figure(r, stem, cell, path, sizeof path, NULL, 0);
    return da_plot_lines(path, title, xlabel, ylabel, s, ns);
}

/* report.json, written in memory (fp) and saved without bare NaN or inf. */
typedef struct {
    FILE *fp;
    char *text;
    size_t n;
} report_json;

static da_status report_json_open(report_json *j, const report *r) {
    *j = (report_json){0};
    j->fp = open_memstream(&j->text, &j->n);
    if (!j->fp) return da_errorf("%s/report.json: out of memory", r->out_dir);
    fprintf(j->fp, "{");
    return da_ok();
}

static void report_json_cells(const report_json *j, const report *r, const report_parts *parts) {
    FILE *fp = j->fp;
    fprintf(fp, "\"cells\":[");
    for (int i = 0; i < r->n_cells; i++) {
        fprintf(fp, "%s{\"name\":\"%s\",", i ? "," : "", r->cell_names[i]);
        if (parts->json_cell) parts->json_cell(fp, r, i);
        fprintf(fp, "\"archs\":{");
        for (int a = 0; a < r->n_archs; a++) {
            fprintf(fp, "%s\"%s\":[", a ? "," : "", r->names[a]);
            for (int s = 0; s < r->seeds; s++) {
                fprintf(fp, "%s{\"seed\":%d", s ? "," : "", r->seed0 + s);
                for (int m = 0; m < r->n_metrics; m++) {
                    const report_metric *x = &r->metrics[m];
                    if (!(x->show & REPORT_JSON)) continue;
                    fprintf(fp, ",\"%s\":", x->key);
                    da_json_number(fp, x->jfmt ? x->jfmt : x->fmt, report_value(r, m, i, a, s));
                }
                if (parts->json_run) parts->json_run(fp, r, i, a, s);
                fprintf(fp, "}");
            }
            fprintf(fp, "]");
        }
        fprintf(fp, "}}");
    }
    fprintf(fp, "]");
}

static da_status report_json_save(report_json *j, const report *r) {
    char path[4300];
    snprintf(path, sizeof path, "%s/report.json", r->out_dir);
    fprintf(j->fp, "}\n");
    da_status st = fclose(j->fp) ? da_errorf("%s: out of memory", path) : da_ok();
    j->fp = NULL;
    da_atomic_file af;
    if (!st.code) st = da_atomic_open(&af, path);
    if (!st.code) st = da_json_write_finite(af.fp, j->text) ? da_atomic_fail(&af, errno ? errno : EIO) : da_atomic_commit(&af);
    free(j->text);
    j->text = NULL;
    return st;
}

da_status report_write(const report *r, const report_parts *parts) {
    report_json j;
    da_status st = report_json_open(&j, r);
    if (st.code) return st;
    if (parts->json_head) parts->json_head(j.fp, r);
    report_json_cells(&j, r, parts);
    if (parts->json_tail) parts->json_tail(j.fp, r);
    if ((st = report_json_save(&j, r)).code) return st;
    if (parts->figures && (st = parts->figures(r)).code) return st;
    char path[4300];
    snprintf(path, sizeof path, "%s/report.md", r->out_dir);
    da_atomic_file md;
    if ((st = da_atomic_open(&md, path)).code) return st;
    parts->markdown(md.fp, r);
    return da_atomic_commit(&md);
}
