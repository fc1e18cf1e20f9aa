/* A session's state (engine_forward.c runs it, session.c makes it): the options
 * resolved against its engine, the KV cache, and every buffer of one call. */
#ifndef DA_INFER_SESSION_H
#define DA_INFER_SESSION_H

#include <stdint.h>

#include "attn/variant.h"
#include "diffattn/exec.h"
#include "diffattn/generate.h"
#include "infer/qtensor.h"
#include "ops/ops.h"

/* From this many tokens in one call (a prompt), an integer-activation matmul
 * dequantizes the weight matrix and the int8 activations and runs one sgemm:
 * the same products up to the order of float sums, 1.4-2x faster than an
 * int8 dot per (row, token) at 200 tokens, where the dequantization is paid
 * once for all of them. Decoding (one token) keeps the int8 dots. */
#define PREFILL_SGEMM_MIN 16

/* Values per scale in the int8 KV cache: 32, or the whole head when its size is not a multiple of 32. */
static inline int da_kv_scale_block(int head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

/* ---------------------------------------------------------------- running state */

struct da_session {
    da_config cfg;
    const da_engine *q;
    da_session_opts o; /* resolved: act >= 0, max_T and max_batch set */
    da_exec exec;              /* da_exec_default(): the kernels' level */
    const da_ops *ops;         /* kernels of that level */
    const attn_variant *var;   /* the model's attention variant */
    int n_attn;
    attn_tensor spec[ATTN_MAX_TENSORS];
    /* Resolved once here: the variant's table is rebuilt on each lookup, too slow for every (token, head). */
    int view_q;                   /* the tensor whose product is the query */
    int view_k, view_v, view_lam; /* the tensors whose products are the cached keys, values, and lam (or -1) */
    int attn_out;                 /* the output projection */
    int max_T, max_n, len;
    /* Cache rows per layer: max_T; or, with a sliding window shorter than max_seq_len, a ring of
     * window + max_n - 1 rows (the last window keys of every query of one call), position p in row
     * p % slots. A ring session takes positions past max_T: a query sees only keys within window
     * of it, so every RoPE distance stays one the model trained on. */
    int slots, ring;
    int kv_layer;     /* the layer attend reads the cache of */
    int d, Ckv, kb, nkb, n_threads, maxw;
    int Cao; /* the attention output's width (the output projection's input): dim unless head_dim is set */
    long small_work;  /* multiply-adds below which a step stays on one thread (small_work_for_policy) */
    /* The f32 and f16 caches hold each d-wide column block (a head's keys) of a layer contiguously, so that
     * a head's attention reads one run of memory, not d values in every Ckv-wide row. */
    float *kf, *vf;   /* f32 cache: (L, Ckv / d, slots, d) each */
    uint16_t *kh, *vh; /* f16 cache: (L, Ckv / d, slots, d) each */
    int8_t *k8, *v8;  /* int8 cache: (L, slots, Ckv) each */
    float *ks, *vs;   /* their scales: (L, slots, nkb) */
    float *rope_cos, *rope_sin; /* (max_T, d/2); positions past max_T (a ring) are computed into rope_far */
    float *rope_far;  /* (d): cos then sin of one position */
    float *x, *xn, *ao, *h1, *h3, *logits; /* (max_n, width) */
    float *proj[ATTN_MAX_TENSORS]; /* per ATTN_IN tensor: (max_n, rows), the new tokens' products */
    float *att;       /* (threads, 2, slots) */
    float *deq;       /* (threads, maxw): a dequantized weight row */
    float *wdeq;      /* batches (float activations, or int8 ones of >= PREFILL_SGEMM_MIN tokens): one dequantized matrix */
    float *xr;        /* (max_n, maxw): bf16-rounded activations, or int8 ones dequantized for a prefill sgemm */
    int8_t *aq;       /* (max_n, maxw) */
    float *ad;        /* (max_n, maxw / 32) */
    int32_t *asum;
    /* the flash prefill (f32 cache only): the variant's saved activations and scratch */
    float *fl_saved, *fl_scratch;
    /* a variant with a decoding cache of its own (attn_variant.cache_step): (L, own_floats), and one step's scratch */
    float *own, *own_scratch;
    size_t own_floats;
    const float *site_x; /* the prepared site's float input (n, width) */
    int site_w;
    const float *site_xd; /* a prompt in an int8 mode: the site's int8 activations as floats, q * d; else NULL */
    struct da_qstats *stats;
    da_pool *pool;    /* the team of the integer matmuls and decoding's attention (NULL: one thread) */
    da_qact *xs;      /* (max_n) views of the int8 activation rows */
};

/* The shape of the flash kernel's call for a prompt of n tokens. */
static inline attn_shape da_session_prompt_shape(const da_session *s, int n) {
    return da_attn_shape_of(&s->cfg, 1, n, s->n_threads);
}

#endif
