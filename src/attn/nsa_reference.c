/* NSA reference kernels (nsa.h): every map stored, loops as the definition
 * reads. O(T^2) memory; the evaluations that inspect maps, and the tests that
 * check the efficient kernels, use them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/nsa.h"

/* p[0 .. n) = softmax(x) over the entries with mask[j]; others 0; all 0 when none. */
static void masked_softmax(float *p, const float *x, const unsigned char *mask, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++)
        if (mask[j] && x[j] > mx) mx = x[j];
    double sum = 0;
    for (int j = 0; j < n; j++) {
        p[j] = mask[j] ? expf(x[j] - mx) : 0.0f;
        sum += p[j];
    }
    for (int j = 0; j < n; j++) p[j] = sum > 0 ? (float)(p[j] / sum) : 0.0f;
}

static float dot(const float *a, const float *b, int n) {
    float acc = 0;
    for (int c = 0; c < n; c++) acc += a[c] * b[c];
    return acc;
}

/* o (d) = sum_j p[j] v_j over n keys, rows of v every ld floats. */
static void mix(float *o, const float *p, const float *v, int n, int ld, int d) {
    memset(o, 0, (size_t)d * sizeof(float));
    for (int j = 0; j < n; j++)
        if (p[j] != 0.0f)
            for (int c = 0; c < d; c++) o[c] += p[j] * v[(size_t)j * ld + c];
}

/* One sequence's selection: the group's importance from att_cmp, then the choice. */
static void select_blocks(int *sel, const float *att_cmp, int b, const nsa_shape *s) {
    const int T = s->T, H = s->H, G = s->G, rep = H / G, Nc = nsa_n_compressed(s, T);
    float *imp = calloc((size_t)T / s->select + 1, sizeof(float));
    for (int t = 0; t < T; t++)
        for (int g = 0; g < G; g++) {
            memset(imp, 0, ((size_t)t / s->select + 1) * sizeof(float));
            for (int h = g * rep; h < (g + 1) * rep; h++) {
                const float *p = att_cmp + (((size_t)b * H + h) * T + t) * Nc;
                for (int i = 0; i < nsa_n_visible(s, t); i++) {
                    int j = nsa_owner_block(s, i);
                    if (j >= 0) imp[j] += p[i];
                }
            }
            nsa_choose_blocks(sel + (((size_t)b * T + t) * G + g) * s->topn, imp, t, s);
        }
    free(imp);
}

void nsa_reference_forward(float *out, const nsa_inputs *in, nsa_saved *sv, const nsa_shape *s) {
    const int B = s->B, T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G, Nc = nsa_n_compressed(s, T);
    const int Hd = H * d, Gd = G * d, lp = s->select;
    const float scale = 1.0f / sqrtf((float)d);
    nsa_compress_forward(sv->kc, in->k_cmp, in->wck, in->pe_k, s);
    nsa_compress_forward(sv->vc, in->v_cmp, in->wcv, in->pe_v, s);
    float *x = malloc((size_t)(T > Nc ? T : Nc) * sizeof(float));
    unsigned char *mask = malloc((size_t)(T > Nc ? T : Nc) + 1);
    float *att_slc = sv->att_slc, *att_win = sv->att_win;
    for (int b = 0; b < B; b++) {
        /* compression */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *qt = in->q + ((size_t)b * T + t) * Hd + (size_t)h * d;
                const float *kc = sv->kc + (size_t)b * Nc * Gd + (size_t)(h / rep) * d;
                float *p = sv->att_cmp + (((size_t)b * H + h) * T + t) * Nc;
                for (int i = 0; i < Nc; i++) {
                    x[i] = dot(qt, kc + (size_t)i * Gd, d) * scale;
                    mask[i] = i < nsa_n_visible(s, t);
                }
                masked_softmax(p, x, mask, Nc);
                mix(sv->o_cmp + ((size_t)b * T + t) * Hd + (size_t)h * d, p, sv->vc + (size_t)b * Nc * Gd +
                    (size_t)(h / rep) * d, Nc, Gd, d);
            }
        select_blocks(sv->sel, sv->att_cmp, b, s);
        /* selection and window */
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int g = h / rep;
                const float *qt = in->q + ((size_t)b * T + t) * Hd + (size_t)h * d;
                const int *sel = sv->sel + (((size_t)b * T + t) * G + g) * s->topn;
                const size_t row = (((size_t)b * H + h) * T + t) * T, kv0 = (size_t)b * T * Gd + (size_t)g * d;
                for (int j = 0; j < T; j++) mask[j] = 0;
                for (int k = 0; k < s->topn && sel[k] >= 0; k++)
                    for (int j = sel[k] * lp; j < sel[k] * lp + lp && j <= t; j++) mask[j] = 1;
                for (int j = 0; j < T; j++) x[j] = dot(qt, in->k_slc + kv0 + (size_t)j * Gd, d) * scale;
                masked_softmax(att_slc + row, x, mask, T);
                mix(sv->o_slc + ((size_t)b * T + t) * Hd + (size_t)h * d, att_slc + row, in->v_slc + kv0, T, Gd, d);
                for (int j = 0; j < T; j++) {
                    mask[j] = j <= t && j > t - s->window;
                    x[j] = dot(qt, in->k_win + kv0 + (size_t)j * Gd, d) * scale;
                }
                masked_softmax(att_win + row, x, mask, T);
                mix(sv->o_win + ((size_t)b * T + t) * Hd + (size_t)h * d, att_win + row, in->v_win + kv0, T, Gd, d);
            }
    }
    for (size_t r = 0; r < (size_t)B * T; r++)
        for (int h = 0; h < H; h++) {
            const float *gt = in->gate + r * H * 3 + (size_t)h * 3;
            for (int c = 0; c < d; c++) {
                size_t o = r * Hd + (size_t)h * d + c;
                out[o] = gt[0] * sv->o_cmp[o] + gt[1] * sv->o_slc[o] + gt[2] * sv->o_win[o];
            }
        }
    free(x);
    free(mask);
}

/* The backward of one map row: p (n) the probabilities, keys/values rows every
 * ld floats; dq (d) +=, dk, dv rows +=. dO: the gradient of p V. */
static void map_row_backward(float *dq, float *dk, float *dv, const float *p, const float *dO, const float *q,
                             const float *k, const float *v, int n, int ld, int d, float scale) {
    double D = 0;
    for (int j = 0; j < n; j++)
        if (p[j] != 0.0f) D += p[j] * dot(dO, v + (size_t)j * ld, d);
    for (int j = 0; j < n; j++) {
        if (p[j] == 0.0f) continue;
        const float ds = p[j] * (dot(dO, v + (size_t)j * ld, d) - (float)D) * scale;
        for (int c = 0; c < d; c++) {
            dq[c] += ds * k[(size_t)j * ld + c];
            dk[(size_t)j * ld + c] += ds * q[c];
            dv[(size_t)j * ld + c] += p[j] * dO[c];
        }
    }
}

size_t nsa_reference_scratch_floats(const nsa_shape *s) { return 2 * nsa_saved_floats_kv(s) + 3 * (size_t)s->d; }

void nsa_reference_backward(const nsa_grads *gr, const float *dout, const nsa_inputs *in, const nsa_saved *sv,
                            const nsa_shape *s, float *scratch) {
    const int B = s->B, T = s->T, H = s->H, G = s->G, d = s->d, rep = H / G, Nc = nsa_n_compressed(s, T);
    const int Hd = H * d, Gd = G * d;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t nkv = (size_t)B * T * Gd;
    float *dkc = scratch, *dvc = scratch + nsa_saved_floats_kv(s), *dO = dvc + nsa_saved_floats_kv(s);
    memset(dkc, 0, 2 * nsa_saved_floats_kv(s) * sizeof(float));
    memset(gr->dq, 0, (size_t)B * T * Hd * sizeof(float));
    float *dkv[6] = {gr->dk_cmp, gr->dv_cmp, gr->dk_slc, gr->dv_slc, gr->dk_win, gr->dv_win};
    for (int k = 0; k < 6; k++) memset(dkv[k], 0, nkv * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const size_t r = ((size_t)b * T + t) * Hd + (size_t)h * d, gi = ((size_t)b * T + t) * H * 3 + h * 3;
                const float *o[3] = {sv->o_cmp + r, sv->o_slc + r, sv->o_win + r};
                for (int c = 0; c < 3; c++) gr->dgate[gi + c] = dot(dout + r, o[c], d);
                const size_t kc0 = (size_t)b * Nc * Gd + (size_t)(h / rep) * d;
                const size_t kv0 = (size_t)b * T * Gd + (size_t)(h / rep) * d;
                const size_t row = (((size_t)b * H + h) * T + t) * T;
                const float *q = in->q + r;
                for (int c = 0; c < d; c++) dO[c] = in->gate[gi] * dout[r + c];
                map_row_backward(gr->dq + r, dkc + kc0, dvc + kc0, sv->att_cmp + (((size_t)b * H + h) * T + t) * Nc,
                                 dO, q, sv->kc + kc0, sv->vc + kc0, Nc, Gd, d, scale);
                for (int c = 0; c < d; c++) dO[c] = in->gate[gi + 1] * dout[r + c];
                map_row_backward(gr->dq + r, gr->dk_slc + kv0, gr->dv_slc + kv0, sv->att_slc + row, dO, q,
                                 in->k_slc + kv0, in->v_slc + kv0, T, Gd, d, scale);
                for (int c = 0; c < d; c++) dO[c] = in->gate[gi + 2] * dout[r + c];
                map_row_backward(gr->dq + r, gr->dk_win + kv0, gr->dv_win + kv0, sv->att_win + row, dO, q,
                                 in->k_win + kv0, in->v_win + kv0, T, Gd, d, scale);
            }
    nsa_compress_backward(gr->dk_cmp, gr->dwck, gr->dpe_k, dkc, in->k_cmp, in->wck, in->pe_k, s);
    nsa_compress_backward(gr->dv_cmp, gr->dwcv, gr->dpe_v, dvc, in->v_cmp, in->wcv, in->pe_v, s);
}
