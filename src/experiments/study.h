/* A study: a list of independent runs, each an ordinary training run folder
 * with a result file, run in this process one after another or in
 * single-thread processes N at a time, resumable (study.c). The caller
 * describes its runs; the report is the caller's, from the result files. */
#ifndef DA_STUDY_H
#define DA_STUDY_H

#include "diffattn/experiments.h"

typedef struct {
    int n_runs;
    void *ctx;
    int (*done)(void *ctx, int k);    /* run k has a valid result file made with these settings */
    double (*cost)(void *ctx, int k); /* run k's relative cost (its training FLOPs), for the ETA */
    int (*order)(void *ctx, int i);   /* the run to start i-th */
    void (*name)(void *ctx, int k, char *buf, size_t n);
    da_status (*run)(void *ctx, int k); /* trains and scores run k, writes its result file */
    /* NULL, or what the study needs before its runs are counted (data, the steps of a resumed study), done
     * under the lock once out_dir is known to be this study's */
    da_status (*prepare)(void *ctx);
} da_study;

/* Takes o->out_dir's lock, refuses a study already there unless resumed or
 * forced (forced: its runs/ is removed), then runs every run that is not
 * done. */
da_status da_study_run(const da_study *s, const da_study_opts *o);

#endif
