/* Text and token shards as a data source, and the one-token answer score (see diffattn/data.h). */
#include "data/text_data.h"

static void text_next(void *self, da_rng *rng, int B, int phase, int stride, int T, int *tokens, int *targets) {
    da_text_data_sample_strided(self, rng, B, phase, stride, T, tokens, targets);
}

static void text_held_out(void *self, long i, long n, int T, int *tokens, int *targets) {
    da_text_data_val_window(self, i, n, T, tokens, targets);
}

da_data_source da_text_source(const da_text_data *d) {
    return (da_data_source){(void *)d, d->vocab_size, 0, 0, NULL, text_next, text_held_out, NULL};
}

void da_score_argmax(void *self, const int *targets, const float *logits, int b, int T, int V, long *right,
                     long *total) {
    (void)self;
    for (long p = 0; p < (long)b * T; p++) {
        if (targets[p] < 0) continue;
        const float *z = logits + p * V;
        int best = 0;
        for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
        *right += best == targets[p], ++*total;
    }
}
