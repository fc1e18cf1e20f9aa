/* Plain compare's files of a run (text_study.h): its folder, its
 * metrics.jsonl, and its result file (study/study.c's format), valid only
 * for the settings it was made with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/formats.h"
#include "experiments/text_study.h"

/* A run's metrics.jsonl: the train loss per logged step and the val loss at
 * evaluation steps (NAN elsewhere), cap lines at most; returns how many.
 * *elapsed gets the training time: elapsed_s restarts with each resumed
 * session, so the sessions' last values are summed. */
int cmp_read_metrics(const char *dir, double *step, double *train, double *val, int cap, double *elapsed) {
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
void cmp_run_dir(const cmp_study *x, int k, char *buf, size_t n) {
    const study_slot q = study_slot_of(k, x->c.shape.n_archs, x->c.shape.seeds);
    study_run_dir(buf, n, x->c.shape.study.out_dir, x->c.shape.n_grid ? q.cell : -1, da_study_column_name(&x->c.shape, q.arch), 1337 + q.seed);
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
void cmp_result_path(const cmp_study *x, int k, char *buf, size_t n) {
    char dir[4300];
    cmp_run_dir(x, k, dir, sizeof dir);
    snprintf(buf, n, "%s/result.bin", dir);
}

da_status cmp_result_save(const cmp_study *x, int k, const arch_result *r) {
    char key[STUDY_KEY_BYTES], path[4400];
    run_key(x, k, key, sizeof key);
    cmp_result_path(x, k, path, sizeof path);
    arch_result body = *r;
    body.map.map = NULL;
    const uint32_t map_n = r->map.map ? (uint32_t)(r->map.rows * r->map.cols) : 0;
    return study_result_save(path, "DACMPRN2", key, &body, sizeof body, r->map.map, map_n);
}

/* 0 when run k's result file is valid for these settings (r->map then malloc'd), else -1. */
int cmp_result_load(const cmp_study *x, int k, arch_result *r, int say) {
    char key[STUDY_KEY_BYTES], path[4400];
    run_key(x, k, key, sizeof key);
    cmp_result_path(x, k, path, sizeof path);
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
