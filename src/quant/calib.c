/* Calibration: activation statistics of the full-precision model on training
 * windows, and AWQ's activation-aware per-channel weight scaling from them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attn/variant.h"
#include "quant/calib.h"

da_status da_calibrate(const da_model *m, const da_text_data *data, int n_seq, int T, uint64_t seed, da_qstats *st) {
    if (n_seq < 1) return da_errorf("--calib-samples must be positive");
    if (T < 2 || T > m->cfg.max_seq_len)
        return da_errorf("calibration length %d is out of range (2..max_seq_len=%d)", T, m->cfg.max_seq_len);
    if (data->vocab_size > m->cfg.vocab_size)
        return da_errorf("the calibration data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size,
                         m->cfg.vocab_size);
    da_engine e;
    da_status s = da_engine_init_from_model(&e, m);
    if (s.code) return s;
    da_session *qs = NULL;
    da_session_opts ro = da_session_opts_default();
    ro.act = DA_ACTQ_F32;
    ro.max_T = T;
    int *tok = malloc((size_t)T * sizeof(int)), *tgt = malloc((size_t)T * sizeof(int));
    if (!tok || !tgt) s = da_errorf("out of memory");
    if (!s.code) s = da_qstats_create(st, &m->cfg);
    if (!s.code) s = da_session_create(&qs, &e, &ro);
    if (!s.code) {
        da_session_attach_stats(qs, st);
        da_rng rng;
        da_rng_seed(&rng, seed);
        for (int i = 0; i < n_seq && !s.code; i++) {
            da_text_data_sample(data, &rng, 1, T, tok, tgt);
            da_session_reset(qs);
            s = da_session_feed(qs, tok, T, 1, NULL);
        }
    }
    if (s.code) da_qstats_free(st);
    da_session_free(qs);
    free(tok);
    free(tgt);
    da_engine_release(&e);
    return s;
}

/* sum over the matrices Ws (rows x cols each) of sum_c ex2[c] / s[c]^2 * |dW'[:, c]|^2,
 * W' = W diag(s) quantized to type. */
static double scaled_error(float *const *Ws, const int *rows, int nW, int cols, const double *ex2, const float *s,
                           int type) {
    double err = 0.0;
    for (int k = 0; k < nW; k++) {
#pragma omp parallel for reduction(+ : err) schedule(dynamic, 16)
        for (int r = 0; r < rows[k]; r++) {
            float *row = malloc((size_t)cols * 2 * sizeof(float));
            unsigned char *buf = malloc(da_qtype_row_bytes(type, cols));
            if (!row || !buf) {
                free(row);
                free(buf);
                continue;
            }
            float *deq = row + cols;
            const float *w = Ws[k] + (size_t)r * cols;
            for (int c = 0; c < cols; c++) row[c] = w[c] * s[c];
            da_quantize_row(type, buf, row, cols);
            da_dequantize_row(type, buf, deq, cols);
            double e = 0.0;
            for (int c = 0; c < cols; c++) {
                const double dw = (double)(row[c] - deq[c]) / s[c];
                e += ex2[c] * dw * dw;
            }
            err += e;
            free(row);
            free(buf);
        }
    }
    return err;
}

/* One site: choose alpha, scale the columns of the weights Ws by s, and
 * divide the producer of the input by s: prod_vec[c] (a norm gain), or row c
 * of prod_mat (prod_width wide: W3, whose row c makes gate channel c). */
static da_status awq_site(float *const *Ws, const int *rows, int nW, int cols, float *prod_vec, float *prod_mat,
                          int prod_width, const da_qstats *st, int site, int type, float *alpha_out) {
    /* the type the matmul really gets (da_engine_quantize falls back to q8_0, then f32, for widths off the block) */
    if (cols % da_qtype_block(type)) type = cols % QK8_0 ? DA_QT_F32 : DA_QT_Q8_0;
    *alpha_out = 0.0f;
    if (type == DA_QT_F32) return da_ok();
    const double *ch = st->chan + st->chan_off[site], *ch2 = st->chan2 + st->chan_off[site];
    const double n = st->rows > 0 ? (double)st->rows : 1.0;
    double *ex2 = malloc((size_t)cols * sizeof(double));
    float *s = malloc((size_t)cols * sizeof(float)), *best = malloc((size_t)cols * sizeof(float));
    if (!ex2 || !s || !best) {
        free(ex2);
        free(s);
        free(best);
        return da_errorf("out of memory");
    }
    for (int c = 0; c < cols; c++) ex2[c] = ch2[c] / n;
    double best_err = INFINITY;
    float best_alpha = 0.0f;
    for (int a = 0; a <= 10; a++) {
        const float alpha = 0.1f * (float)a;
        double lmax = -INFINITY, lmin = INFINITY;
        for (int c = 0; c < cols; c++) {
            s[c] = (float)pow(fmax(ch[c] / n, 1e-6), alpha);
            lmax = fmax(lmax, log(s[c]));
            lmin = fmin(lmin, log(s[c]));
        }
        const float norm = (float)exp(-(lmax + lmin) / 2); /* AWQ's 1 / sqrt(max s * min s) */
        for (int c = 0; c < cols; c++) s[c] *= norm;
        const double err = scaled_error(Ws, rows, nW, cols, ex2, s, type);
        if (err < best_err) {
            best_err = err;
            best_alpha = alpha;
            memcpy(best, s, (size_t)cols * sizeof(float));
        }
    }
    for (int k = 0; k < nW; k++)
        for (int r = 0; r < rows[k]; r++)
            for (int c = 0; c < cols; c++) Ws[k][(size_t)r * cols + c] *= best[c];
    for (int c = 0; c < cols; c++) {
        if (prod_vec) prod_vec[c] /= best[c];
        if (prod_mat)
            for (int j = 0; j < prod_width; j++) prod_mat[(size_t)c * prod_width + j] /= best[c];
    }
    *alpha_out = best_alpha;
    free(ex2);
    free(s);
    free(best);
    return da_ok();
}

da_status da_awq_apply(da_model *m, const da_qstats *st, int type, float *alpha_out) {
    const da_config *c = &m->cfg;
    const int C = c->dim, F = c->ffn_hidden;
    if (!da_qtype_block(type) || type == DA_QT_F32) return da_ok();
    /* every matrix that reads the normed attention input (q, k, v, and a variant's own such as DIFF V2's
     * lambda_proj), at its own height (GQA, head_dim, GDA's noise heads) */
    attn_tensor spec[ATTN_MAX_TENSORS];
    const int n_attn = da_attn_tensors(c, spec);
    int in_idx[ATTN_MAX_TENSORS], in_rows[ATTN_MAX_TENSORS], n_in = 0;
    for (int j = 0; j < n_attn; j++)
        if (spec[j].role == ATTN_IN) in_idx[n_in] = j, in_rows[n_in++] = spec[j].rows;
    da_status s = da_ok();
    for (int l = 0; l < c->n_layers && !s.code; l++) {
        da_layer_weights *w = &m->w.layers[l];
        const int site = DA_SITES_PER_LAYER * l;
        float *in[ATTN_MAX_TENSORS];
        for (int k = 0; k < n_in; k++) in[k] = w->attn[in_idx[k]];
        s = awq_site(in, in_rows, n_in, C, w->attention_norm, NULL, 0, st, site + DA_SITE_ATTN_IN, type,
                     &alpha_out[site + DA_SITE_ATTN_IN]);
        float *up[2] = {w->w1, w->w3};
        int up_rows[2] = {F, F};
        if (!s.code)
            s = awq_site(up, up_rows, 2, C, w->ffn_norm, NULL, 0, st, site + DA_SITE_FFN_IN, type,
                         &alpha_out[site + DA_SITE_FFN_IN]);
        /* the gate silu(h1) * h3 is linear in h3: W3's rows carry 1/s */
        float *down[1] = {w->w2};
        int down_rows[1] = {C};
        if (!s.code)
            s = awq_site(down, down_rows, 1, F, NULL, w->w3, C, st, site + DA_SITE_FFN_GATE, type,
                         &alpha_out[site + DA_SITE_FFN_GATE]);
        alpha_out[site + DA_SITE_ATTN_OUT] = 0.0f;
    }
    const int last = DA_SITES_PER_LAYER * c->n_layers;
    alpha_out[last] = 0.0f;
    if (!s.code && !c->tie_embeddings) {
        /* the LM head is quantized to q6_K for 4-bit types (q8_0 off its 256 block: da_engine_quantize); its
         * error is measured at that type */
        const int head_type = (type == DA_QT_Q4_0 || type == DA_QT_Q4_K) ? (C % QK_K ? DA_QT_Q8_0 : DA_QT_Q6_K) : type;
        float *head[1] = {m->w.output};
        int head_rows[1] = {c->vocab_size};
        s = awq_site(head, head_rows, 1, C, m->w.norm, NULL, 0, st, last, head_type, &alpha_out[last]);
    }
    return s;
}
