/* A task run's result file, run folder/result.bin: "DASTUDY2", the size of
 * task_run, the settings the run was made with, then the task_run itself.
 * Its body is checked before use: a file that is not a run's own output
 * counts as missing, and the run is done again. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "experiments/task_study.h"
#include "study/study.h"

da_status task_run_save(const char *path, const char *key, const task_run *r) {
    return study_result_save(path, "DASTUDY2", key, r, sizeof *r, NULL, 0);
}

static int rate(double x) { return x >= 0 && x <= 1 + 1e-6; } /* false for NaN */
static int rate_or_nan(double x) { return x != x || rate(x); }
/* An attention share: a DIFF row's negative weights count negatively
 * (da_attn_maps_row), so a share lies in [-1, 1], not [0, 1]. */
static int share(double x) { return x >= -1 - 1e-6 && x <= 1 + 1e-6; }
static int stats_ok(const da_outlier_stats *s) {
    for (int i = 0; i < 5; i++)
        if (!(s->top[i] >= 0 && isfinite(s->top[i]))) return 0;
    return s->median >= 0 && isfinite(s->median);
}

/* NULL when every count is in range and every value finite (rates in [0, 1]),
 * else what is not. */
static const char *run_invalid(const task_run *r) {
    if (r->n_evals < 1 || r->n_evals > TASK_MAX_EVALS) return "n_evals";
    for (int i = 0; i < r->n_evals; i++) {
        if (r->step[i] < 0 || (i && r->step[i] <= r->step[i - 1])) return "step";
        if (!rate(r->acc[i])) return "acc";
        for (int l = 0; l < TASK_MAX_LAYERS; l++)
            if (isinf(r->lambda[i][l])) return "lambda";
    }
    if (!rate(r->final_acc) || !rate(r->partial_acc)) return "final_acc or partial_acc";
    for (int i = 0; i < TASK_N_QBITS; i++)
        if (!rate_or_nan(r->quant_acc[i])) return "quant_acc";
    if (!share(r->attn_answer) || !share(r->attn_noise) || !share(r->attn_noise_tokens)) return "attention shares";
    if (!stats_ok(&r->out.logits) || !stats_ok(&r->out.hidden) || r->out.tokens < 0) return "outliers";
    const da_icl_order_result *o = &r->order;
    if (o->episodes < 0 || o->perms < 0 || !rate(o->mean) || !rate(o->best) || !rate(o->worst) || !rate(o->margin) ||
        !rate(o->grouped) || !rate(o->alternating))
        return "icl orders";
    for (int k = 0; k < 3; k++)
        if (r->cf.n[k] < 0 || r->cf.right[k] < 0 || r->cf.right[k] > r->cf.n[k] || r->cf.binding[k] < 0 ||
            r->cf.binding[k] > r->cf.n[k] || !rate(r->cf.lookback[k]))
            return "counterfactual counts";
    if (r->cf.leak < 0 || r->cf.leak > r->cf.n[DA_CF_COUNTER]) return "counterfactual leaks";
    if (!r->n_params || !(r->train_s >= 0 && isfinite(r->train_s))) return "n_params or train_s";
    if (r->ffn_hidden < 1 || !(r->flops_per_token > 0 && isfinite(r->flops_per_token))) return "ffn or flops";
    if (r->n_lengths < 0 || r->n_lengths > 8) return "n_lengths";
    for (int i = 0; i < r->n_lengths; i++)
        if (r->length[i] < 1 || !rate(r->length_acc[i])) return "length accuracy";
    return NULL;
}

int task_run_load(const char *path, const char *key, task_run *r, int say) {
    if (study_result_load(path, "DASTUDY2", key, r, sizeof *r, NULL, NULL, 0)) return -1;
    const char *bad = run_invalid(r);
    if (bad && say) fprintf(stderr, "compare: %s: its %s out of range or not finite; the run is done again\n", path, bad);
    return bad ? -1 : 0;
}
