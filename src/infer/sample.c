/* Greedy, temperature and nucleus (top-p) sampling over one logits vector. */
#include <math.h>
#include <stdlib.h>

#include "diffattn/generate.h"

/* The first index of the largest value (x holds no NaN: the callers check). Two vectorised passes, the
 * maximum and then its first occurrence, instead of one compare-and-branch per element: a server's greedy
 * slots take one of these over the whole vocabulary per token, serially. */
static int argmax(const float *x, int n) {
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        int hit = 0;
#pragma omp simd reduction(| : hit)
        for (int k = 0; k < 64; k++) hit |= x[i + k] == mx;
        if (hit) break;
    }
    for (; i < n; i++)
        if (x[i] == mx) return i;
    return 0;
}

/* Descending order. */
static int cmp_desc(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

int da_sample_token(const float *logits, int V, float temperature, float top_p, da_rng *rng, float *scratch) {
    if (V <= 0) return -1;
    /* A temperature so small that 1/temperature overflows is greedy: inf * 0 at the maximum would make every
     * probability NaN. */
    const float inv_t = 1.0f / temperature;
    if (!(temperature > 0.0f) || !isfinite(inv_t)) return argmax(logits, V);

    /* probs: (V) = softmax(logits / temperature) */
    float *probs = scratch, *sorted = scratch + V;
    float mx = logits[0];
    for (int i = 1; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        probs[i] = expf((logits[i] - mx) * inv_t);
        sum += probs[i];
    }
    for (int i = 0; i < V; i++) probs[i] = (float)(probs[i] / sum);

    /* The nucleus: the k most likely tokens, k the smallest count whose mass
     * reaches top_p. It is every token above the k-th largest probability
     * `cut`, plus the first `ties` tokens (by index) equal to it. */
    float cut = 0.0f;
    int ties = V; /* top_p >= 1: everything (cut 0 admits every token) */
    if (top_p < 1.0f) {
        for (int i = 0; i < V; i++) sorted[i] = probs[i];
        qsort(sorted, (size_t)V, sizeof(float), cmp_desc);
        double mass = 0.0, target = top_p > 0.0f ? (double)top_p : 0.0;
        int k = 0;
        do mass += sorted[k++];
        while (k < V && mass < target);
        cut = sorted[k - 1];
        int above = 0;
        while (above < k && sorted[above] > cut) above++;
        ties = k - above;
    }

    /* Draw u in [0, nucleus mass) and walk the nucleus in index order. */
    double mass = 0.0;
    int taken = 0, last = -1;
    for (int i = 0; i < V; i++) {
        int in = probs[i] > cut || (probs[i] == cut && taken < ties);
        if (probs[i] == cut && in) taken++;
        sorted[i] = in ? probs[i] : -1.0f; /* marks membership; sorted is free again */
        if (in) {
            mass += probs[i];
            last = i;
        }
    }
    double u = (double)da_rng_uniform(rng) * mass, acc = 0.0;
    for (int i = 0; i < V; i++) {
        if (sorted[i] < 0.0f) continue;
        acc += sorted[i];
        if (u < acc) return i;
    }
    /* u landed on the rounding edge of the last member; no member at all (logits that are not finite) is
     * greedy, never an id outside the vocabulary */
    return last >= 0 ? last : argmax(logits, V);
}
