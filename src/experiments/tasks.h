/* Synthetic retrieval tasks: the API is in diffattn/experiments.h
 * (definitions in docs/tasks.md). */
#ifndef DA_TASKS_H
#define DA_TASKS_H

#include "diffattn/experiments.h"

#endif
