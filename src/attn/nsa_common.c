/* NSA: what every kernel shares (nsa.h): the block choice, the compression
 * of keys and values into blocks, the saved buffers' sizes and the FLOPs. */
#include <cblas.h>
#include <stdint.h>
#include <string.h>

#include "attn/nsa.h"
#include "attn/flash_attention.h"
#include "attn/nsa_choose.h"
#include "attn/nsa_rows.h"

extern const nsa_kernels nsa_kernels_scalar, nsa_kernels_avx2, nsa_kernels_avx512, nsa_kernels_avx512_vnni,
    nsa_kernels_avx512_bf16;

const nsa_kernels *nsa_kernels_of(da_isa isa) {
    static const nsa_kernels *const tables[DA_ISA_N] = {&nsa_kernels_scalar, &nsa_kernels_avx2, &nsa_kernels_avx512,
                                                        &nsa_kernels_avx512_vnni, &nsa_kernels_avx512_bf16};
    int level = (unsigned)isa < DA_ISA_N ? (int)isa : DA_ISA_N - 1;
    while (level > 0 && !da_isa_supported((da_isa)level)) level--;
    return tables[level];
}

int nsa_flash_max_cols(const nsa_shape *s) { return nsa_n_compressed(s, s->T); }

int nsa_slot_cols(const nsa_shape *s) {
    const int nb = s->T / s->select + 1;
    return (nb < s->topn ? nb : s->topn) * s->select;
}

/* Q, O, dQ, dO (M x d each), D (M), S and dP (M x max_cols each), the
 * importance (T/l' + 1), the selection's logits in slots (M x
 * nsa_slot_cols, the forward's), its gathered rows Qg, dOg, Og (M x d each) and
 * columns Pg, dSg (M x l' each), 1/sum (M), a product's operand (nsa_flash_bt_floats), and the tile's queries per block
 * (ints: T/l' + 2 offsets, NSA_BR * n rows and as many slots); M = NSA_BR * rep. */
size_t nsa_flash_scratch_per_thread(const nsa_shape *s) {
    const int rep = s->H / s->G, M = NSA_BR * rep;
    return (size_t)M * s->d * 4 + M + (size_t)M * nsa_flash_max_cols(s) * 2 + (size_t)s->T / s->select + 1 +
           (size_t)M * nsa_slot_cols(s) + 3 * (size_t)M * s->d + 2 * (size_t)M * s->select + M +
           nsa_flash_bt_floats(s) + (size_t)s->T / s->select + 2 + 2 * (size_t)NSA_BR * s->topn;
}

/* A product's right operand (nsa_flash.c): K rows of d padded to whole vectors, K <= max(Nc, l', M); 16
 * floats is the widest vector of any level. */
size_t nsa_flash_bt_floats(const nsa_shape *s) {
    const size_t M = (size_t)NSA_BR * (s->H / s->G);
    size_t rows = (size_t)(nsa_flash_max_cols(s) > s->select ? nsa_flash_max_cols(s) : s->select);
    if (rows < M) rows = M;
    return rows * ((size_t)s->d + 16);
}

attn_shape nsa_window_shape(const nsa_shape *s) {
    return (attn_shape){.B = s->B, .T = s->T, .n_heads = s->H, .n_kv_heads = s->G, .d = s->d, .C = s->H * s->d,
                        .Ckv = s->G * s->d, .n_threads = s->n_threads, .window = s->window};
}

size_t nsa_flash_window_offset(const nsa_shape *s) {
    /* after the threads' parts, dKc and dVc */
    return (size_t)s->n_threads * nsa_flash_scratch_per_thread(s) + 2 * nsa_saved_floats_kv(s);
}

size_t nsa_flash_window_floats(const nsa_shape *s) {
    const attn_shape as = nsa_window_shape(s);
    const size_t rows = (size_t)s->B * s->T * s->H;
    return da_flash_scratch_size(&as, &NSA_WINDOW_LAYOUT) + rows + 2 * rows * s->d;
}

size_t nsa_flash_planes_offset(const nsa_shape *s) { return nsa_flash_window_offset(s) + nsa_flash_window_floats(s); }

size_t nsa_flash_planes_floats(const nsa_shape *s) {
    const size_t Gd = (size_t)s->G * s->d;
    return 2 * (size_t)s->B * Gd * ((size_t)nsa_ldT(s->T) + (size_t)nsa_ldT(nsa_n_compressed(s, s->T)));
}

size_t nsa_flash_scratch_floats(const nsa_shape *s) { return nsa_flash_planes_offset(s) + nsa_flash_planes_floats(s); }


int nsa_choose_blocks(int *chosen, const float *imp, int t, const nsa_shape *s) {
    return nsa_choose(chosen, imp, t, s);
}

/* Block i of group g is Wc . (x_i + pe) with x_i = kv rows i*s .. i*s+l-1 of
 * the group, so per position p it is a GEMM over all blocks at once: rows
 * i*s + p (stride s*G*d) times Wc's columns p*d .. p*d+d-1; pe adds the same
 * vector Wc . flatten(pe) to every block. */
void nsa_compress_forward(float *kc, const float *kv, const float *wc, const float *pe, const nsa_shape *s) {
    const int T = s->T, G = s->G, d = s->d, l = s->block, Nc = nsa_n_compressed(s, T), ld = l * d;
    if (Nc == 0) return;
    float bias[1024]; /* d <= DA_MAX_HEAD_DIM */
    for (int c = 0; c < d; c++) {
        double acc = 0;
        for (int k = 0; k < ld; k++) acc += (double)wc[(size_t)c * ld + k] * pe[k];
        bias[c] = (float)acc;
    }
    for (int b = 0; b < s->B; b++)
        for (int g = 0; g < G; g++) {
            float *out = kc + (size_t)b * Nc * G * d + (size_t)g * d;
            for (int i = 0; i < Nc; i++) memcpy(out + (size_t)i * G * d, bias, (size_t)d * sizeof(float));
            for (int p = 0; p < l; p++)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, Nc, d, d, 1.0f,
                            kv + ((size_t)b * T + p) * G * d + (size_t)g * d, s->stride * G * d, wc + (size_t)p * d,
                            ld, 1.0f, out, G * d);
        }
}

void nsa_compress_backward(float *dkv, float *dwc, float *dpe, const float *dkc, const float *kv, const float *wc,
                           const float *pe, const nsa_shape *s) {
    const int T = s->T, G = s->G, d = s->d, l = s->block, Nc = nsa_n_compressed(s, T), ld = l * d;
    if (Nc == 0) return;
    float colsum[1024]; /* sum over every block and group of dkc: what pe's gradient and term need */
    memset(colsum, 0, (size_t)d * sizeof(float));
    for (int b = 0; b < s->B; b++)
        for (int i = 0; i < Nc; i++)
            for (int g = 0; g < G; g++)
                for (int c = 0; c < d; c++) colsum[c] += dkc[(((size_t)b * Nc + i) * G + g) * d + c];
    for (int b = 0; b < s->B; b++)
        for (int g = 0; g < G; g++) {
            const float *dc = dkc + (size_t)b * Nc * G * d + (size_t)g * d;
            for (int p = 0; p < l; p++) {
                const float *x = kv + ((size_t)b * T + p) * G * d + (size_t)g * d;
                /* dx_p += dC . Wc_p; dWc_p += dC^T x_p */
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, Nc, d, d, 1.0f, dc, G * d, wc + (size_t)p * d,
                            ld, 1.0f, dkv + ((size_t)b * T + p) * G * d + (size_t)g * d, s->stride * G * d);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d, d, Nc, 1.0f, dc, G * d, x, s->stride * G * d,
                            1.0f, dwc + (size_t)p * d, ld);
            }
        }
    /* pe: dWc[:, k] += colsum pe[k]; dpe[k] += colsum . Wc[:, k] */
    for (int c = 0; c < d; c++)
        for (int k = 0; k < ld; k++) dwc[(size_t)c * ld + k] += colsum[c] * pe[k];
    for (int k = 0; k < ld; k++) {
        float acc = 0;
        for (int c = 0; c < d; c++) acc += colsum[c] * wc[(size_t)c * ld + k];
        dpe[k] += acc;
    }
}

size_t nsa_saved_floats_kv(const nsa_shape *s) {
    return (size_t)s->B * nsa_n_compressed(s, s->T) * s->G * s->d;
}
size_t nsa_saved_floats_out(const nsa_shape *s) { return (size_t)s->B * s->T * s->H * s->d; }
size_t nsa_saved_ints_sel(const nsa_shape *s) { return (size_t)s->B * s->T * s->G * s->topn; }
size_t nsa_saved_floats_lse(const nsa_shape *s) { return (size_t)s->B * s->T * s->H * 3; }
size_t nsa_saved_floats_att(const nsa_shape *s) {
    return (size_t)s->B * s->H * s->T * (nsa_n_compressed(s, s->T) + 2 * (size_t)s->T);
}

double nsa_forward_flops(const nsa_shape *s) {
    double keys = 0;
    for (int t = 0; t < s->T; t++) {
        int cur = t / s->select, nb = cur + 1 < s->topn ? cur + 1 : s->topn;
        double slc = (double)nb * s->select;
        if (slc > t + 1) slc = t + 1;
        double win = t + 1 < s->window ? t + 1 : s->window;
        keys += nsa_n_visible(s, t) + slc + win;
    }
    const double Nc = nsa_n_compressed(s, s->T);
    const double compress = 2.0 * 2.0 * Nc * s->G * s->d * (double)s->block * s->d;
    return s->B * (4.0 * s->H * s->d * keys + compress);
}

size_t nsa_cache_floats(const nsa_shape *s, int max_T) {
    const size_t Gd = (size_t)s->G * s->d, nb = (size_t)max_T / s->stride + 1;
    return Gd * ((size_t)nsa_ldT(max_T) + max_T + (size_t)nsa_ldT(s->window) + s->window + 2 * (size_t)s->block +
                 (size_t)nsa_ldT((int)nb) + nb);
}

void nsa_cache_init(nsa_cache *c, float *mem, const nsa_shape *s, int max_T) {
    const size_t Gd = (size_t)s->G * s->d;
    const int nb = max_T / s->stride + 1;
    c->k_slc = mem;
    c->v_slc = c->k_slc + Gd * nsa_ldT(max_T);
    c->k_win = c->v_slc + Gd * max_T;
    c->v_win = c->k_win + Gd * nsa_ldT(s->window);
    c->k_raw = c->v_win + Gd * s->window;
    c->v_raw = c->k_raw + Gd * s->block;
    c->kc = c->v_raw + Gd * s->block;
    c->vc = c->kc + Gd * nsa_ldT(nb);
    c->max_T = max_T;
    c->n_tokens = 0;
    c->n_blocks = 0;
}

/* Keys one branch of a step may read: the compressed blocks, the chosen blocks' tokens, the window. */
int nsa_decode_cols(const nsa_shape *s, int max_T) {
    const int nc = max_T / s->stride + 1, ns = s->topn * s->select;
    const int cols = nc > ns ? nc : ns;
    return cols > s->window ? cols : s->window;
}

size_t nsa_decode_scratch_floats(const nsa_shape *s, int max_T) {
    const int rep = s->H / s->G, cols = nsa_decode_cols(s, max_T);
    return 2 * (size_t)rep * cols + (size_t)max_T / s->select + 1 + (size_t)s->topn + (size_t)s->block * s->d +
           (size_t)rep * (s->d + 1);
}
