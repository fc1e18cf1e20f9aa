/* Synthetic retrieval tasks: the API is in diffattn/experiments.h
 * (definitions in docs/tasks.md). */
#ifndef DA_TASKS_H
#define DA_TASKS_H

#include "diffattn/experiments.h"

/* The counterfactual task's training sequence (a memory sequence with
 * probability memory_share, else an episode) and its checks; da_task_sample
 * and da_task_validate dispatch here. */
int da_cf_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);
da_status da_cf_validate(const da_task_config *c);

/* RULER's tasks (tasks_ruler.c): da_task_sample and da_task_validate dispatch
 * here; name: the task's, for the errors. */
int da_ruler_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);
da_status da_ruler_validate(const da_task_config *c, const char *name);

#endif
