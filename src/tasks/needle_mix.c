/* The built-in training mix of plain compare: filler text with needle
 * sentences, each document ending in a question and its answer (tasks.h). */
#include <stdio.h>
#include <stdlib.h>

#include "eval/eval.h"
#include "eval/needle.h"
#include "io/atomic_file.h"
#include "tasks/tasks.h"

da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed) {
    if (context < 256) return da_errorf("the needle mix needs a context of at least 256 bytes, got %d", context);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.queries = 1, nc.n_contexts = 1, nc.n_depths = 11;
    for (int i = 0; i <= 10; i++) nc.depths[i] = 10 * i;
    nc.seed = seed ^ 0x6d6978ULL; /* other prompts than the evaluation's */
    da_rng r;
    da_rng_seed(&r, nc.seed);
    long written = 0;
    for (int s = 0; written < bytes && !st.code; s++) {
        /* Documents of 1..4 needles, from barely more than the needles up to
         * the whole context, every needle asked for once, in a random order:
         * short documents and many questions give a small model enough
         * retrieval examples to learn the format within a few hundred steps.
         * n needles take about 50n bytes of the context and 46n after it. */
        const int most = (context - 32) / 96 < 4 ? (context - 32) / 96 : 4; /* 2 at 256 bytes */
        nc.needles = 1 + (int)(da_rng_next(&r) % (uint64_t)most);
        const int lo = 50 * nc.needles + 32, hi = context - 46 * nc.needles;
        const double u = da_rng_uniform(&r);
        nc.contexts[0] = lo + (int)(u * u * (hi - lo)); /* mostly short: more questions per token */
        uint8_t *text;
        size_t n;
        char keys[16][16], values[16][16];
        st = da_needle_document(&nc, 0, s % 11, s, &text, &n, keys, values);
        if (st.code) break;
        fwrite(text, 1, n, af.fp);
        written += (long)n;
        int order[16];
        for (int i = 0; i < nc.needles; i++) order[i] = i;
        for (int i = nc.needles - 1; i > 0; i--) {
            int j = (int)(da_rng_next(&r) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int i = 0; i < nc.needles; i++)
            written += fprintf(af.fp, "\nThe special magic %s number is: %s.", keys[order[i]], values[order[i]]);
        written += fprintf(af.fp, "\n\n");
        free(text);
    }
    if (st.code) {
        da_atomic_abort(&af);
        return st;
    }
    return da_atomic_commit(&af);
}
