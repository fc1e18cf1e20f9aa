/* NSA decoding, one token at a time (nsa.h, nsa_cache). The cache keeps
 * every token's selection keys and values (any block may be chosen), the
 * window's as a ring of w rows, the last l tokens' raw compression keys and
 * values as a ring, and the compressed blocks, one appended when a token
 * completes a block. The keys are kept transposed (a column per token), so a
 * query's logits are outer products over channels, vectorised over keys. A
 * step costs ~ (t/s + n*l' + w) keys per head, and the group's heads read each
 * key once. */
#include <math.h>
#include <string.h>

#include "attn/nsa.h"
#include "attn/nsa_choose.h"
#include "attn/nsa_rows.h"
#include "ops/vexp.h"

/* Block i from the raw rings, per group: Wc . flatten(raw[i*s .. i*s+l-1] + pe);
 * written to dst[(g*d + c) * ld + col] (ld 1, col 0: a row; else a column of a transposed cache). */
static void compress_block(float *dst, size_t ld, int col, const float *raw, const float *wc, const float *pe, int i,
                           const nsa_shape *s, float *x) {
    const int G = s->G, d = s->d, l = s->block, ldw = l * d;
    for (int g = 0; g < G; g++) {
        for (int p = 0; p < l; p++) {
            const float *row = raw + (size_t)((i * s->stride + p) % l) * G * d + (size_t)g * d;
            for (int c = 0; c < d; c++) x[p * d + c] = row[c] + pe[p * d + c];
        }
        for (int c = 0; c < d; c++) {
            const float *wr = wc + (size_t)c * ldw;
            float acc = 0;
#pragma omp simd reduction(+ : acc)
            for (int k = 0; k < ldw; k++) acc += wr[k] * x[k];
            dst[((size_t)g * d + c) * ld + col] = acc;
        }
    }
}

/* og (rep rows of d) += gate[c] of each head times o. */
static void add_gated(float *og, const float *o, const float *gate, int c, int rep, int d) {
    for (int hh = 0; hh < rep; hh++)
        for (int k = 0; k < d; k++) og[hh * d + k] += gate[hh * 3 + c] * o[hh * d + k];
}

static void nsa_decode_step(float *out, nsa_cache *c, const nsa_inputs *in, const nsa_shape *s, float *scratch) {
    const int t = c->n_tokens, G = s->G, d = s->d, Gd = G * d, rep = s->H / G, w = s->window, l = s->block;
    const int ld_slc = nsa_ldT(c->max_T), ld_win = nsa_ldT(w), ld_c = nsa_ldT(c->max_T / s->stride + 1);
    const int nk_slc = s->topn * s->select;
    for (int k = 0; k < Gd; k++) { /* the transposed caches take a column */
        c->k_slc[(size_t)k * ld_slc + t] = in->k_slc[k];
        c->k_win[(size_t)k * ld_win + t % w] = in->k_win[k];
    }
    memcpy(c->v_slc + (size_t)t * Gd, in->v_slc, (size_t)Gd * sizeof(float));
    memcpy(c->v_win + (size_t)(t % w) * Gd, in->v_win, (size_t)Gd * sizeof(float));
    memcpy(c->k_raw + (size_t)(t % l) * Gd, in->k_cmp, (size_t)Gd * sizeof(float));
    memcpy(c->v_raw + (size_t)(t % l) * Gd, in->v_cmp, (size_t)Gd * sizeof(float));
    c->n_tokens = t + 1;
    const int cols = nsa_decode_cols(s, c->max_T);
    float *p = scratch, *imp = p + 2 * (size_t)rep * cols, *x = imp + c->max_T / s->select + 1 + s->topn;
    int *sel = (int *)(imp + c->max_T / s->select + 1);
    float *o = x + (size_t)l * d;
    if (nsa_n_visible(s, t) > c->n_blocks) { /* token t completes block n_blocks */
        compress_block(c->kc, ld_c, c->n_blocks, c->k_raw, in->wck, in->pe_k, c->n_blocks, s, x);
        compress_block(c->vc + (size_t)c->n_blocks * Gd, 1, 0, c->v_raw, in->wcv, in->pe_v, c->n_blocks, s, x);
        c->n_blocks++;
    }
    /* the window's keys t-nw+1 .. t as ring runs */
    const int nw = t + 1 < w ? t + 1 : w, a = (t - nw + 1) % w;
    int ws[2] = {a, 0}, we[2] = {a + nw <= w ? a + nw : w, a + nw - w}, nwr = a + nw <= w ? 1 : 2;
    int cs[1] = {0}, ce[1] = {c->n_blocks};
    for (int g = 0; g < G; g++) {
        const float *q = in->q + (size_t)g * rep * d, *gate = in->gate + (size_t)g * rep * 3;
        float *og = out + (size_t)g * rep * d;
        memset(og, 0, (size_t)rep * d * sizeof(float));
        attend_runs(o, NULL, 0, q, c->kc + (size_t)g * d * ld_c, ld_c, c->vc + g * d, Gd, cs, ce,
                    c->n_blocks > 0, rep, d, cols, p);
        nsa_importance(imp, p, cols, rep, t, s);
        nsa_choose(sel, imp, t, s);
        add_gated(og, o, gate, 0, rep, d);
        nsa_slc_row_forward(o, NULL, 0, q, c->k_slc + (size_t)g * d * ld_slc, ld_slc, c->v_slc + g * d, Gd, sel,
                            t, rep, s, p);
        add_gated(og, o, gate, 1, rep, d);
        attend_runs(o, NULL, 0, q, c->k_win + (size_t)g * d * ld_win, ld_win, c->v_win + g * d, Gd, ws, we, nwr, rep, d, nk_slc,
                    p);
        add_gated(og, o, gate, 2, rep, d);
    }
}
