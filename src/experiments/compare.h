/* `diffattn compare`: DIFF and the softmax baseline trained at equal
 * parameters, tokens, data and seed, then the same evaluations on both, with
 * a side-by-side report (report.md, report.json). */
#ifndef DA_COMPARE_H
#define DA_COMPARE_H

#include "diffattn/train.h"
#include "diffattn/generate.h"

typedef struct {
    const char *out_dir;
    const char *data;  /* NULL: the built-in needle mix */
    long steps;
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides steps) */
    int dim, layers, heads, seq, batch;
    int seeds;
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int quiet;
    /* Continue an interrupted job in out_dir: finished runs are kept, an
     * interrupted one continues from its last checkpoint, and the steps are
     * those the first run was started with. */
    int resume;
    volatile int *stop; /* when it becomes non-zero: checkpoint the run in training and return DA_INTERRUPTED */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
/* Writes the built-in training mix (filler text with needle sentences, each
 * document ending in a question and its answer) of about `bytes` bytes. */
da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed);
da_status da_compare(const da_compare_config *c);

#endif
