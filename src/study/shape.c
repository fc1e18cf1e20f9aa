/* The columns of a study's shape (shape.h), through the --archs parser of
 * arch_column.c. */
#include "study/shape.h"

da_status da_study_parse_archs(da_study_shape *s, const char *list) {
    return da_arch_columns_parse(list, s->swa_window, s->archs, s->windows, s->columns, &s->n_archs);
}

const char *da_study_column_name(const da_study_shape *s, int a) {
    return da_arch_column_name(s->archs[a], s->windows[a], s->columns[a]);
}

const char *da_study_column_label(const da_study_shape *s, int a) {
    return da_arch_column_label(s->archs[a], s->windows[a], s->columns[a]);
}

int da_study_baseline_slot(const da_study_shape *s) {
    return da_arch_baseline_slot(s->archs, s->windows, s->columns, s->n_archs);
}
