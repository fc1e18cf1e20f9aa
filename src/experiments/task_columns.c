/* compare --task's table of the columns' sizes: per cell, each column's
 * parameters, FFN width and training FLOPs per token, as its first seed's run
 * recorded them (task_study.h). */
#include <stdio.h>

#include "experiments/task_study.h"

static size_t largest(const task_study *s, int cell) {
    size_t most = 0;
    for (int a = 0; a < s->c->shape.n_archs; a++)
        if (study_run(s, cell, a, 0)->n_params > most) most = study_run(s, cell, a, 0)->n_params;
    return most;
}

void task_columns_md(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    fprintf(fp, "## Columns: parameters and FLOPs\n\n%s| cell | arch | parameters | vs the largest | FFN width | "
                "training FLOPs per token |\n|---|---|---|---|---|---|\n",
            c->shape.match_params ? "With --match-params: each column's FFN widened to the cell's largest parameter "
                              "count.\n\n"
                            : "");
    for (int i = 0; i < s->n_cells; i++) {
        const size_t most = largest(s, i);
        for (int a = 0; a < c->shape.n_archs; a++) {
            const task_run *r = study_run(s, i, a, 0);
            fprintf(fp, "| %s | %s | %zu | %+.2f%% | %d | %.4g |\n", s->cells[i].name, da_study_column_label(&c->shape, a),
                    r->n_params, 100.0 * ((double)r->n_params / (double)most - 1.0), r->ffn_hidden, r->flops_per_token);
        }
    }
    fprintf(fp, "\nTraining FLOPs per token: forward and backward (3x the forward's matmuls) plus the attention at "
                "the cell's training length (`bench train`'s count).\n\n");
}

void task_columns_json(FILE *fp, const task_study *s) {
    const da_task_compare_config *c = s->c;
    fprintf(fp, ",\"match_params\":%s,\"columns\":[", c->shape.match_params ? "true" : "false");
    for (int i = 0; i < s->n_cells; i++)
        for (int a = 0; a < c->shape.n_archs; a++) {
            const task_run *r = study_run(s, i, a, 0);
            fprintf(fp, "%s{\"cell\":%d,\"arch\":\"%s\",\"n_params\":%zu,\"ffn_hidden\":%d,\"train_flops_per_token\":%.6g}",
                    i || a ? "," : "", i, da_study_column_name(&c->shape, a), r->n_params, r->ffn_hidden, r->flops_per_token);
        }
    fprintf(fp, "]");
}
