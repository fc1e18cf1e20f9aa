/* Token embedding lookup and its scatter-add backward. */
#include <string.h>

#include "ops/ops.h"

static void embedding_forward(float *out, const int *tokens, const float *emb, int N, int C) {
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, emb + (size_t)tokens[n] * C, (size_t)C * sizeof(float));
}

static void embedding_backward(float *demb, const float *dout, const int *tokens, int N, int C) {
    for (int n = 0; n < N; n++) {
        float *dst = demb + (size_t)tokens[n] * C;
        const float *src = dout + (size_t)n * C;
        for (int i = 0; i < C; i++) dst[i] += src[i];
    }
}
