/* The SwiGLU gate silu(h1) * h3, between w1/w3 and w2. */
#include <math.h>

#include "ops/ops.h"

void swiglu_forward(float *gate, const float *h1, const float *h3, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float sig = 1.0f / (1.0f + expf(-h1[i]));
        gate[i] = h1[i] * sig * h3[i];
    }
}

void swiglu_backward(float *dh1, float *dh3, const float *dgate, const float *h1, const float *h3, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float sig = 1.0f / (1.0f + expf(-h1[i]));
        float silu = h1[i] * sig;
        dh3[i] = dgate[i] * silu;
        dh1[i] = dgate[i] * h3[i] * sig * (1.0f + h1[i] * (1.0f - sig));
    }
}
