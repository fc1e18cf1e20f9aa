/* compare --task's names of its columns, in files and in reports (task_study.h). */
#include "experiments/compare.h"
#include "experiments/task_study.h"

const char *task_arch_name(const da_task_compare_config *c, int a) {
    return c->windows[a] ? "swa" : c->columns[a][0] ? c->columns[a] : da_arch_name(c->archs[a]);
}

const char *task_arch_label(const da_task_compare_config *c, int a) {
    return c->windows[a] ? "SWA" : c->columns[a][0] ? c->columns[a] : da_compare_arch_label(c->archs[a]);
}
