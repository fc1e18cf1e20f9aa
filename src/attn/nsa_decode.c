/* NSA decoding, one token at a time (nsa.h, nsa_cache). The cache keeps
 * every token's selection keys and values (any block may be chosen), the
 * window's as a ring of w rows, the last l tokens' raw compression keys and
 * values as a ring, and the compressed blocks, one appended when a token
 * completes a block. A step costs ~ (t/s + n*l' + w) keys per head, and the
 * group's heads read each key once. */
#include <math.h>
#include <string.h>

#include "attn/nsa.h"
#include "attn/nsa_rows.h"

size_t nsa_cache_floats(const nsa_shape *s, int max_T) {
    const size_t Gd = (size_t)s->G * s->d;
    return Gd * (2 * (size_t)max_T + 2 * (size_t)s->window + 2 * (size_t)s->block +
                 2 * ((size_t)max_T / s->stride + 1));
}

void nsa_cache_init(nsa_cache *c, float *mem, const nsa_shape *s, int max_T) {
    const size_t Gd = (size_t)s->G * s->d;
    c->k_slc = mem;
    c->v_slc = c->k_slc + Gd * max_T;
    c->k_win = c->v_slc + Gd * max_T;
    c->v_win = c->k_win + Gd * s->window;
    c->k_raw = c->v_win + Gd * s->window;
    c->v_raw = c->k_raw + Gd * s->block;
    c->kc = c->v_raw + Gd * s->block;
    c->vc = c->kc + Gd * (max_T / s->stride + 1);
    c->max_T = max_T;
    c->n_tokens = 0;
    c->n_blocks = 0;
}

/* Keys one branch of a step may read: the compressed blocks, the chosen blocks' tokens, the window. */
static int decode_cols(const nsa_shape *s, int max_T) {
    const int nc = max_T / s->stride + 1, ns = s->topn * s->select;
    const int cols = nc > ns ? nc : ns;
    return cols > s->window ? cols : s->window;
}

size_t nsa_decode_scratch_floats(const nsa_shape *s, int max_T) {
    const int rep = s->H / s->G, cols = decode_cols(s, max_T);
    return (size_t)rep * cols + (size_t)max_T / s->select + 1 + (size_t)s->topn + (size_t)s->block * s->d +
           (size_t)rep * (s->d + 1);
}

/* Block i from the raw rings: dst (G*d) = Wc . flatten(raw[i*s .. i*s+l-1] + pe) per group. */
static void compress_block(float *dst, const float *raw, const float *wc, const float *pe, int i, const nsa_shape *s,
                           float *x) {
    const int G = s->G, d = s->d, l = s->block, ld = l * d;
    for (int g = 0; g < G; g++) {
        for (int p = 0; p < l; p++) {
            const float *row = raw + (size_t)((i * s->stride + p) % l) * G * d + (size_t)g * d;
            for (int c = 0; c < d; c++) x[p * d + c] = row[c] + pe[p * d + c];
        }
        for (int c = 0; c < d; c++) {
            const float *wr = wc + (size_t)c * ld;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int k = 0; k < ld; k++) acc += wr[k] * x[k];
            dst[(size_t)g * d + c] = acc;
        }
    }
}

/* o (rep rows of d) = softmax(q K^T / sqrt(d)) V over n keys at rows key(j) of
 * K, V (stride ld), for the rep query rows q; p: scratch rep * n. With no key, 0. */
static void attend_rows(float *o, float *p, const float *q, const float *K, const float *V, int ld, int n, int first,
                        int ring, int rep, int d) {
    const float scale = 1.0f / sqrtf((float)d);
    memset(o, 0, (size_t)rep * d * sizeof(float));
    if (n == 0) return;
    for (int j = 0; j < n; j++) {
        const float *kr = K + (size_t)(ring ? (first + j) % ring : first + j) * ld;
        for (int hh = 0; hh < rep; hh++) {
            const float *qh = q + (size_t)hh * d;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int c = 0; c < d; c++) acc += qh[c] * kr[c];
            p[(size_t)hh * n + j] = acc * scale;
        }
    }
    for (int hh = 0; hh < rep; hh++) {
        float *ph = p + (size_t)hh * n, mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) mx = ph[j] > mx ? ph[j] : mx;
        for (int j = 0; j < n; j++) {
            ph[j] = expf(ph[j] - mx);
            sum += ph[j];
        }
        for (int j = 0; j < n; j++) ph[j] /= sum;
    }
    for (int j = 0; j < n; j++) {
        const float *vr = V + (size_t)(ring ? (first + j) % ring : first + j) * ld;
        for (int hh = 0; hh < rep; hh++) {
            const float pj = p[(size_t)hh * n + j];
            float *oh = o + (size_t)hh * d;
#pragma omp simd
            for (int c = 0; c < d; c++) oh[c] += pj * vr[c];
        }
    }
}

void nsa_decode_step(float *out, nsa_cache *c, const nsa_inputs *in, const nsa_shape *s, float *scratch) {
    const int t = c->n_tokens, G = s->G, d = s->d, Gd = G * d, rep = s->H / G, w = s->window, l = s->block;
    const size_t row = (size_t)Gd * sizeof(float);
    memcpy(c->k_slc + (size_t)t * Gd, in->k_slc, row);
    memcpy(c->v_slc + (size_t)t * Gd, in->v_slc, row);
    memcpy(c->k_win + (size_t)(t % w) * Gd, in->k_win, row);
    memcpy(c->v_win + (size_t)(t % w) * Gd, in->v_win, row);
    memcpy(c->k_raw + (size_t)(t % l) * Gd, in->k_cmp, row);
    memcpy(c->v_raw + (size_t)(t % l) * Gd, in->v_cmp, row);
    c->n_tokens = t + 1;
    const int nc = decode_cols(s, c->max_T);
    float *p = scratch, *imp = p + (size_t)rep * nc, *x = imp + c->max_T / s->select + 1 + s->topn;
    int *sel = (int *)(imp + c->max_T / s->select + 1);
    float *o = x + (size_t)l * d, *lse = o + (size_t)rep * d; /* o: rep rows; lse: rep (unused here) */
    if (nsa_n_visible(s, t) > c->n_blocks) { /* token t completes block n_blocks */
        compress_block(c->kc + (size_t)c->n_blocks * Gd, c->k_raw, in->wck, in->pe_k, c->n_blocks, s, x);
        compress_block(c->vc + (size_t)c->n_blocks * Gd, c->v_raw, in->wcv, in->pe_v, c->n_blocks, s, x);
        c->n_blocks++;
    }
    const int nw = t + 1 < w ? t + 1 : w;
    for (int g = 0; g < G; g++) {
        const float *q = in->q + (size_t)g * rep * d;
        float *og = out + (size_t)g * rep * d;
        attend_rows(o, p, q, c->kc + g * d, c->vc + g * d, Gd, c->n_blocks, 0, 0, rep, d);
        nsa_importance(imp, p, c->n_blocks, rep, t, s);
        nsa_choose_blocks(sel, imp, t, s);
        for (int hh = 0; hh < rep; hh++)
            for (int k = 0; k < d; k++) og[hh * d + k] = in->gate[(g * rep + hh) * 3] * o[hh * d + k];
        nsa_slc_row_forward(o, lse, 1, q, c->k_slc + g * d, c->v_slc + g * d, Gd, sel, t, rep, s, p);
        for (int hh = 0; hh < rep; hh++)
            for (int k = 0; k < d; k++) og[hh * d + k] += in->gate[(g * rep + hh) * 3 + 1] * o[hh * d + k];
        attend_rows(o, p, q, c->k_win + g * d, c->v_win + g * d, Gd, nw, t - nw + 1, w, rep, d);
        for (int hh = 0; hh < rep; hh++)
            for (int k = 0; k < d; k++) og[hh * d + k] += in->gate[(g * rep + hh) * 3 + 2] * o[hh * d + k];
    }
}
