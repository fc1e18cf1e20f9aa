/* compare --task ... --dump-episodes FILE: the held-out episodes the runs
 * score, as JSON lines another program (an external model, a tokenizer-free
 * evaluator) can read (see compare.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "experiments/task_study.h"
#include "io/atomic_file.h"
#include "io/json_out.h"

static cJSON *int_array(const int *v, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
    return a;
}

/* One held-out sequence as a JSON line; NULL when out of memory. */
static char *episode_line(const da_task_config *t, const int *tok, const int *tgt, int T, int *scratch) {
    int *ans = scratch, *pos = scratch + T, n = 0;
    for (int p = 0; p < T; p++)
        if (tgt[p] >= 0) ans[n] = tgt[p], pos[n++] = p;
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    da_json_str(o, "task", da_task_name(t->kind));
    cJSON_AddItemToObject(o, "input", int_array(tok, T));
    cJSON_AddItemToObject(o, "answer", int_array(ans, n));
    cJSON_AddItemToObject(o, "answer_positions", int_array(pos, n));
    return da_json_finish(o);
}

/* The held-out sequences of s, one line each, to fp. */
static da_status dump_source(const da_task_source *s, FILE *fp) {
    int *scratch = malloc(2 * (size_t)s->T * sizeof(int));
    if (!scratch) return da_errorf("out of memory for an episode of %d tokens", s->T);
    da_status st = da_ok();
    for (int i = 0; i < s->n && !st.code; i++) {
        char *line = episode_line(&s->task, s->tokens + (size_t)i * s->T, s->targets + (size_t)i * s->T, s->T, scratch);
        if (!line) st = da_errorf("out of memory for an episode's JSON");
        else fprintf(fp, "%s\n", line);
        free(line);
    }
    free(scratch);
    return st;
}

da_status da_task_dump_episodes(const da_task_compare_config *c, const char *path) {
    task_cell *cells = NULL;
    int n_cells, n_points;
    da_status st = task_cells(c, &cells, &n_cells, &n_points);
    if (st.code) return st;
    da_atomic_file af;
    if ((st = da_atomic_open(&af, path)).code) {
        free(cells);
        return st;
    }
    for (int i = 0, last = -1; i < n_cells && !st.code; i++) { /* the cells of a point follow one another */
        if (cells[i].point == last) continue;
        last = cells[i].point;
        da_task_source *s = NULL;
        if ((st = da_task_source_create(&s, &cells[i].task, cells[i].point, c->eval_seqs)).code)
            st = da_errorf("%s: %s", cells[i].point_name, st.msg);
        else st = dump_source(s, af.fp);
        da_task_source_free(s);
    }
    free(cells);
    if (st.code) {
        da_atomic_abort(&af);
        return st;
    }
    if (ferror(af.fp)) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}
