/* MoBA's kernels (moba.h): the block scores, and the attention over the
 * chosen keys, flash (probabilities recomputed from the log-sum-exp) and
 * reference (dense maps kept). Compiled once per instruction-set level
 * through moba_variant.c, so everything here is static. Parallel over
 * (sequence, KV group) in the backward, so that the group's dk, dv rows have
 * one writer. */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn/moba.h"

static float moba_dot(const float *a, const float *b, int d) {
    float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
    for (int e = 0; e < d; e++) acc += a[e] * b[e];
    return acc;
}

static void moba_select(int *sel, float *km, const float *q, const float *k, const moba_shape *s, float *scratch) {
    const int T = s->T, H = s->H, G = s->G, d = s->d, Bk = s->block, K = s->topk, nb = T / Bk, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    for (int b = 0; b < s->B; b++)
        for (int j = 0; j < nb; j++)
            for (int g = 0; g < G; g++)
                moba_block_mean(km + ((size_t)b * nb + j) * Gd + (size_t)g * d,
                                k + ((size_t)b * T + (size_t)j * Bk) * Gd + (size_t)g * d, Gd, Bk, d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long r = 0; r < (long)s->B * T; r++) {
        const int b = (int)(r / T), t = (int)(r % T), c = t / Bk;
        float *score = scratch + (size_t)omp_get_thread_num() * (size_t)(nb + 1);
        for (int h = 0; h < H; h++) {
            const float *qh = q + (size_t)r * Hd + (size_t)h * d;
            for (int j = 0; j < c; j++) score[j] = moba_dot(qh, km + ((size_t)b * nb + j) * Gd + (size_t)(h / rep) * d, d);
            moba_choose(sel + ((size_t)r * H + h) * K, score, c, K);
        }
    }
}

/* The row's chosen keys: their scaled logits to p (in run order), returned count. */
static int row_logits(float *p, const float *qh, const float *k, size_t Gd, int g, int d, const int *sel, int t,
                      const moba_shape *s, float scale) {
    int n = 0;
    for (int r = 0; r < s->topk && sel[r] >= 0; r++) {
        const int lo = sel[r] * s->block, hi = lo + s->block - 1 < t ? lo + s->block - 1 : t;
        for (int j = lo; j <= hi; j++) p[n++] = scale * moba_dot(qh, k + (size_t)j * Gd + (size_t)g * d, d);
    }
    return n;
}

static void moba_flash_forward(float *out, float *lse, const float *q, const float *k, const float *v, const int *sel,
                        const moba_shape *s, float *scratch) {
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long r = 0; r < (long)s->B * T; r++) {
        const int b = (int)(r / T), t = (int)(r % T);
        float *p = scratch + (size_t)omp_get_thread_num() * T;
        const float *kb = k + (size_t)b * T * Gd, *vb = v + (size_t)b * T * Gd;
        for (int h = 0; h < H; h++) {
            const int g = h / rep, *sl = sel + ((size_t)r * H + h) * s->topk;
            const int n = row_logits(p, q + (size_t)r * Hd + (size_t)h * d, kb, Gd, g, d, sl, t, s, scale);
            float mx = -INFINITY;
            for (int i = 0; i < n; i++) mx = p[i] > mx ? p[i] : mx;
            float sum = 0.0f;
            for (int i = 0; i < n; i++) sum += p[i] = expf(p[i] - mx);
            float *o = out + (size_t)r * Hd + (size_t)h * d;
            memset(o, 0, (size_t)d * sizeof(float));
            int i = 0;
            for (int a = 0; a < s->topk && sl[a] >= 0; a++) {
                const int lo = sl[a] * s->block, hi = lo + s->block - 1 < t ? lo + s->block - 1 : t;
                for (int j = lo; j <= hi; j++, i++) {
                    const float w = p[i] / sum, *vj = vb + (size_t)j * Gd + (size_t)g * d;
                    for (int e = 0; e < d; e++) o[e] += w * vj[e];
                }
            }
            lse[(size_t)r * H + h] = mx + logf(sum);
        }
    }
}

static void moba_flash_backward(float *dq, float *dk, float *dv, const float *dout, const float *out, const float *lse,
                         const float *q, const float *k, const float *v, const int *sel, const moba_shape *s,
                         float *scratch) {
    (void)scratch;
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long bg = 0; bg < (long)s->B * G; bg++) {
        const int b = (int)(bg / G), g = (int)(bg % G);
        const size_t base = (size_t)b * T;
        for (int t = 0; t < T; t++) {
            memset(dk + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
            memset(dv + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
        }
        for (int h = g * rep; h < (g + 1) * rep; h++)
            for (int t = 0; t < T; t++) {
                const size_t r = base + t, qo = r * Hd + (size_t)h * d;
                const int *sl = sel + (r * H + h) * s->topk;
                const float *qh = q + qo, *doh = dout + qo, L = lse[r * H + h];
                float *dqh = dq + qo;
                memset(dqh, 0, (size_t)d * sizeof(float));
                const float D = moba_dot(doh, out + qo, d);
                for (int a = 0; a < s->topk && sl[a] >= 0; a++) {
                    const int lo = sl[a] * s->block, hi = lo + s->block - 1 < t ? lo + s->block - 1 : t;
                    for (int j = lo; j <= hi; j++) {
                        const size_t ko = (base + j) * Gd + (size_t)g * d;
                        const float p = expf(scale * moba_dot(qh, k + ko, d) - L);
                        const float ds = p * (moba_dot(doh, v + ko, d) - D) * scale;
                        for (int e = 0; e < d; e++) {
                            dqh[e] += ds * k[ko + e];
                            dk[ko + e] += ds * qh[e];
                            dv[ko + e] += p * doh[e];
                        }
                    }
                }
            }
    }
}

static void moba_reference_forward(float *out, float *att, const float *q, const float *k, const float *v, const int *sel,
                            const moba_shape *s, float *scratch) {
    (void)scratch;
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long bh = 0; bh < (long)s->B * H; bh++) {
        const int b = (int)(bh / H), h = (int)(bh % H), g = h / rep;
        for (int t = 0; t < T; t++) {
            const size_t r = (size_t)b * T + t;
            float *a = att + ((size_t)bh * T + t) * T;
            const int *sl = sel + (r * H + h) * s->topk;
            /* every causal key's logit, then the mask of the chosen ones */
            memset(a, 0, (size_t)T * sizeof(float));
            float mx = -INFINITY;
            for (int x = 0; x < s->topk && sl[x] >= 0; x++)
                for (int j = sl[x] * s->block; j < (sl[x] + 1) * s->block && j <= t; j++) {
                    a[j] = scale * moba_dot(q + r * Hd + (size_t)h * d, k + ((size_t)b * T + j) * Gd + (size_t)g * d, d);
                    mx = a[j] > mx ? a[j] : mx;
                }
            double sum = 0.0;
            for (int x = 0; x < s->topk && sl[x] >= 0; x++)
                for (int j = sl[x] * s->block; j < (sl[x] + 1) * s->block && j <= t; j++) sum += a[j] = expf(a[j] - mx);
            float *o = out + r * Hd + (size_t)h * d;
            memset(o, 0, (size_t)d * sizeof(float));
            for (int j = 0; j <= t; j++) {
                if (a[j] == 0.0f) continue;
                a[j] = (float)(a[j] / sum);
                const float *vj = v + ((size_t)b * T + j) * Gd + (size_t)g * d;
                for (int e = 0; e < d; e++) o[e] += a[j] * vj[e];
            }
        }
    }
}

static void moba_reference_backward(float *dq, float *dk, float *dv, const float *dout, const float *att, const float *q,
                             const float *k, const float *v, const moba_shape *s, float *scratch) {
    const int T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G;
    const size_t Gd = (size_t)G * d, Hd = (size_t)H * d;
    const float scale = 1.0f / sqrtf((float)d);
#pragma omp parallel for schedule(static) num_threads(s->n_threads)
    for (long bg = 0; bg < (long)s->B * G; bg++) {
        const int b = (int)(bg / G), g = (int)(bg % G);
        const size_t base = (size_t)b * T;
        float *dp = scratch + (size_t)omp_get_thread_num() * T;
        for (int t = 0; t < T; t++) {
            memset(dk + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
            memset(dv + (base + t) * Gd + (size_t)g * d, 0, (size_t)d * sizeof(float));
        }
        for (int h = g * rep; h < (g + 1) * rep; h++)
            for (int t = 0; t < T; t++) {
                const size_t r = base + t, qo = r * Hd + (size_t)h * d;
                const float *a = att + (((size_t)b * H + h) * T + t) * T, *doh = dout + qo, *qh = q + qo;
                float *dqh = dq + qo;
                /* D from the map itself (the flash kernel takes dout . out): two routes to one value */
                double D = 0.0;
                for (int j = 0; j <= t; j++) {
                    dp[j] = a[j] != 0.0f ? moba_dot(doh, v + (base + j) * Gd + (size_t)g * d, d) : 0.0f;
                    D += (double)a[j] * dp[j];
                }
                memset(dqh, 0, (size_t)d * sizeof(float));
                for (int j = 0; j <= t; j++) {
                    if (a[j] == 0.0f) continue;
                    const size_t ko = (base + j) * Gd + (size_t)g * d;
                    const float ds = a[j] * (dp[j] - (float)D) * scale;
                    for (int e = 0; e < d; e++) {
                        dqh[e] += ds * k[ko + e];
                        dk[ko + e] += ds * qh[e];
                        dv[ko + e] += a[j] * doh[e];
                    }
                }
            }
    }
}
