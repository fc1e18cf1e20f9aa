/* Softmax cross-entropy over the vocabulary. */
#include <math.h>

#include "ops/ops.h"

static float cross_entropy_forward(float *losses, const float *logits, const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const float *z = logits + (size_t)n * V;
        float mx = z[0];
        for (int i = 1; i < V; i++) mx = z[i] > mx ? z[i] : mx;
        double s = 0.0;
        for (int i = 0; i < V; i++) s += exp((double)(z[i] - mx));
        losses[n] = (float)(log(s) + mx - z[targets[n]]);
    }
    double total = 0.0; /* serial: a fixed summation order */
    for (int n = 0; n < N; n++) total += losses[n];
    return (float)(total / N);
}

static void cross_entropy_backward(float *logits, const int *targets, int N, int V) {
    const float inv_n = 1.0f / (float)N;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        float *z = logits + (size_t)n * V;
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
