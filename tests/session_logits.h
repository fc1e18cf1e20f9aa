/* The logits of a whole prompt through the inference engine, one batch from an empty session: the quantized
 * forward the format and quantization tests compare against the float model. */
#ifndef DA_TEST_SESSION_LOGITS_H
#define DA_TEST_SESSION_LOGITS_H

#include <string.h>

#include "diffattn/generate.h"

/* out: T x vocab_size. 0 on success, -1 when the session cannot be made or fed. */
static inline int session_logits(const da_engine *q, da_act_mode act, int kv_int8, const int *tok, int T,
                                 float *out) {
    da_session *s;
    da_session_opts o = da_session_opts_default();
    o.act = act;
    o.kv_int8 = kv_int8;
    o.max_T = T;
    if (da_session_create(&s, q, &o).code) return -1;
    const float *lg;
    da_status st = da_session_feed(s, tok, T, 1, &lg);
    if (!st.code) memcpy(out, lg, (size_t)T * q->cfg.vocab_size * sizeof(float));
    da_session_free(s);
    return st.code ? -1 : 0;
}

#endif
