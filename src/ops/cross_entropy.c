/* Softmax cross-entropy over the vocabulary, with a loss mask: a target of
 * -1 marks a position that does not count (retrieval tasks score only their
 * answer positions), so the mean is over the counted positions. */
#include <math.h>

#include "ops/ops.h"

static float cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        if (targets[n] < 0) {
            losses[n] = 0.0f;
            continue;
        }
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        double s = 0.0;
        for (int i = 0; i < V; i++) s += exp((double)(z[i] - mx));
        losses[n] = (float)(log(s) + mx - z[targets[n]]);
    }
    double total = 0.0; /* serial: a fixed summation order */
    int counted = 0;
    for (int n = 0; n < N; n++) total += losses[n], counted += targets[n] >= 0;
    return counted ? (float)(total / counted) : 0.0f;
}

static void cross_entropy_backward(float *logits, const int *targets, int N, int V) {
    int counted = 0;
    for (int n = 0; n < N; n++) counted += targets[n] >= 0;
    const float inv_n = counted ? 1.0f / (float)counted : 0.0f;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
        if (targets[n] < 0) { /* masked: no gradient flows back from here */
            for (int i = 0; i < V; i++) z[i] = 0.0f;
            continue;
        }
        float mx = z[0];
        for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        float s = 0.0f;
        for (int i = 0; i < V; i++) {
            z[i] = expf(z[i] - mx);
            s += z[i];
        }
        float inv = inv_n / s;
        for (int i = 0; i < V; i++) z[i] *= inv;
        z[targets[n]] -= inv_n;
    }
}
