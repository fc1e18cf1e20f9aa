/* compare --task's names of its columns, in files and in reports (task_study.h). */
#include "study/arch_column.h"
#include "experiments/task_study.h"

const char *task_arch_name(const da_task_compare_config *c, int a) {
    return da_arch_column_name(c->archs[a], c->windows[a], c->columns[a]);
}

const char *task_arch_label(const da_task_compare_config *c, int a) {
    return da_arch_column_label(c->archs[a], c->windows[a], c->columns[a]);
}
