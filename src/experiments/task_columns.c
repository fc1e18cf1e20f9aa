/* compare --task's table of the columns' sizes: per cell, each column's
 * parameters, FFN width and training FLOPs per token (task_study.h). */
#include <stdio.h>

#include "experiments/bench.h"
#include "experiments/task_study.h"

void task_columns_md(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    fprintf(fp, "## Columns: parameters and FLOPs\n\n%s| cell | arch | parameters | vs the largest | FFN width | "
                "training FLOPs per token |\n|---|---|---|---|---|---|\n",
            c->match_params ? "With --match-params: each column's FFN widened to the cell's largest parameter "
                              "count.\n\n"
                            : "");
    for (int i = 0; i < s->n_cells; i++) {
        da_config cfg[DA_COMPARE_MAX_ARCHS];
        size_t most = 0;
        for (int a = 0; a < c->n_archs; a++) {
            task_model_config(c, &s->cells[i], a, &cfg[a]);
            const size_t p = da_config_param_count(&cfg[a]);
            if (p > most) most = p;
        }
        for (int a = 0; a < c->n_archs; a++) {
            const size_t p = da_config_param_count(&cfg[a]);
            fprintf(fp, "| %s | %s | %zu | %+.2f%% | %d | %.4g |\n", s->cells[i].name, task_arch_label(c, a), p,
                    100.0 * ((double)p / (double)most - 1.0), cfg[a].ffn_hidden,
                    da_train_flops_per_token(&cfg[a], s->cells[i].task.seq));
        }
    }
    fprintf(fp, "\nTraining FLOPs per token: forward and backward (3x the forward's matmuls) plus the attention at "
                "the cell's training length.\n\n");
}

void task_columns_json(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    fprintf(fp, ",\"match_params\":%s,\"columns\":[", c->match_params ? "true" : "false");
    for (int i = 0; i < s->n_cells; i++)
        for (int a = 0; a < c->n_archs; a++) {
            da_config cfg;
            task_model_config(c, &s->cells[i], a, &cfg);
            fprintf(fp, "%s{\"cell\":%d,\"arch\":\"%s\",\"n_params\":%zu,\"ffn_hidden\":%d,\"train_flops_per_token\":%.6g}",
                    i || a ? "," : "", i, task_arch_name(c, a), da_config_param_count(&cfg), cfg.ffn_hidden,
                    da_train_flops_per_token(&cfg, s->cells[i].task.seq));
        }
    fprintf(fp, "]");
}
