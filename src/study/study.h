/* A study: a list of independent runs, each an ordinary training run folder
 * with a result file, run in this process one after another or in
 * single-thread processes N at a time, resumable (study.c). The caller
 * describes its runs; the report is the caller's, from the result files. */
#ifndef DA_STUDY_H
#define DA_STUDY_H

#include <stdint.h>

#include "diffattn/train.h" /* DA_INTERRUPTED, da_refuse_existing */

/* The most columns (architectures, with options) a study trains side by side. */
#define DA_COMPARE_MAX_ARCHS 8

typedef struct {
    const char *out_dir;
    int jobs;    /* 1: the runs one after another in this process; N: N single-thread processes at a time */
    int argc;    /* jobs > 1: the command line (without the program) that names this study; each process */
    char **argv; /* runs it with --run-index K --quiet --threads 1 and dies with the study */
    int quiet;
    int force;  /* replace a study already in out_dir (its runs/ is removed) */
    int resume; /* continue the study in out_dir: runs with a valid result file are kept */
    volatile int *stop; /* non-zero: return DA_INTERRUPTED (the run in training is lost; finished ones are kept) */
} da_study_opts;

/* Run k of a study of n_cells x n_archs x seeds: its cell, architecture
 * and seed (the architecture varies fastest, then the seed). */
typedef struct {
    int cell, arch, seed;
} study_slot;
static inline study_slot study_slot_of(int k, int n_archs, int seeds) {
    return (study_slot){k / n_archs / seeds, k % n_archs, (k / n_archs) % seeds};
}
/* A run's folder, out_dir/runs/cell<i>_NAME_seed<S>; without cells (cell < 0) runs/NAME_seed<S>. */
void study_run_dir(char *buf, size_t n, const char *out_dir, int cell, const char *name, int seed);

/* Training FLOPs of a run, for the ETA: per token and layer the matmuls
 * (about 12 d^2 with the FFN) and the attention maps, and the output head (2 V d). */
static inline double study_train_flops(long steps, int batch, int T, int layers, int dim, int vocab) {
    const double d = dim;
    return (double)steps * batch * T * (layers * (12 * d * d + 2.0 * T * d) + 2.0 * vocab * d);
}

typedef struct {
    int n_cells, n_archs, seeds;
    void *ctx;
    int (*done)(void *ctx, int k);    /* run k has a valid result file made with these settings */
    double (*cost)(void *ctx, int k); /* run k's relative cost (its training FLOPs), for the ETA */
    void (*name)(void *ctx, int k, char *buf, size_t n);
    da_status (*run)(void *ctx, int k); /* trains and scores run k, writes its result file */
    /* NULL, or what the study needs before its runs are counted (data, the steps of a resumed study), done
     * under the lock once out_dir is known to be this study's */
    da_status (*prepare)(void *ctx);
} da_study;

/* A run's result file, run folder/result.bin: an 8-byte magic, the size of
 * the body, the count of floats after it, the settings the run was made
 * with (a key of STUDY_KEY_BYTES at most), the body, the floats. A file that
 * is not a run's own output for these settings counts as missing, and the
 * run is done again. Saved atomically. */
#define STUDY_KEY_BYTES 1024
da_status study_result_save(const char *path, const char *magic, const char *key, const void *body, size_t size,
                            const float *floats, uint32_t n_floats);
/* 0 when path holds magic, key, a body of size bytes (into body) and at
 * most max_floats floats (*floats malloc'd, NULL when none), else -1. */
int study_result_load(const char *path, const char *magic, const char *key, void *body, size_t size, float **floats,
                      uint32_t *n_floats, uint32_t max_floats);

/* Takes o->out_dir's lock, refuses a study already there unless resumed or
 * forced (forced: its runs/ is removed), then runs every run that is not
 * done, seed by seed: every cell and architecture of a seed before the next
 * seed, so a study stopped early covers the whole grid with fewer seeds. */
da_status da_study_run(const da_study *s, const da_study_opts *o);

#endif
