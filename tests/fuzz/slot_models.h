/* The small models and sessions that fuzz_slot_file.c and test_slot_file.c
 * share, one per kind of cache a slot file holds: f32, f16, q8 (int8 with a
 * scale per block), an f32 ring (a sliding window shorter than the context)
 * and MoBA's own decoding cache. Random weights, made in memory. */
#ifndef DA_TESTS_SLOT_MODELS_H
#define DA_TESTS_SLOT_MODELS_H

#include <string.h>

#include "diffattn.h"
#include "infer/slot_file.h"

enum { SLOT_F32, SLOT_F16, SLOT_Q8, SLOT_RING, SLOT_OWN, SLOT_KINDS };
#define SLOT_MAX_T 16
#define SLOT_BATCH 4
#define SLOT_VOCAB 64

typedef struct {
    da_model m[3]; /* plain, windowed, MoBA */
    da_engine *e[3];
    uint64_t fp[3];
    da_session *s[SLOT_KINDS];
} slot_models;

static inline int slot_engine_of(int kind) { return kind == SLOT_RING ? 1 : kind == SLOT_OWN ? 2 : 0; }

/* 0 when every model and session is made. */
static inline int slot_models_make(slot_models *sm) {
    memset(sm, 0, sizeof *sm);
    for (int i = 0; i < 3; i++) {
        da_config c;
        da_config_default(&c);
        c.arch = i == 2 ? DA_ARCH_MOBA : DA_ARCH_DIFF;
        c.dim = 32;
        c.n_layers = 2;
        c.n_heads = 2;
        c.n_kv_heads = 1;
        c.vocab_size = SLOT_VOCAB;
        c.ffn_hidden = da_default_ffn_hidden(c.dim);
        c.max_seq_len = SLOT_MAX_T;
        if (i == 1) c.window = 4;
        if (i == 2) c.moba_block = 4, c.moba_topk = 2;
        if (da_model_create(&sm->m[i], &c).code) return 1;
        da_model_init(&sm->m[i], 5 + (uint64_t)i);
        if (da_engine_from_model(&sm->e[i], &sm->m[i]).code) return 1;
        sm->fp[i] = da_engine_fingerprint(sm->e[i]);
    }
    for (int k = 0; k < SLOT_KINDS; k++) {
        da_session_opts o = da_session_opts_default();
        o.max_T = SLOT_MAX_T;
        o.max_batch = SLOT_BATCH;
        o.kv_f16 = k == SLOT_F16;
        o.kv_int8 = k == SLOT_Q8;
        if (da_session_create(&sm->s[k], sm->e[slot_engine_of(k)], &o).code) return 1;
    }
    return 0;
}

static inline void slot_models_free(slot_models *sm) {
    for (int k = 0; k < SLOT_KINDS; k++) da_session_free(sm->s[k]);
    for (int i = 0; i < 3; i++) {
        da_engine_free(sm->e[i]);
        da_model_free(&sm->m[i]);
    }
}

#endif
