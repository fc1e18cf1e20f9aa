/* Generation: a prompt, then tokens sampled one at a time and fed back,
 * through one session of the engine. */
#include <stdlib.h>
#include <string.h>

#include "diffattn/generate.h"
#include "ops/finite.h"

/* Feeds tokens (n) from the session's position in calls of at most max_batch. */
static da_status feed_all(da_session *s, const int *tokens, int n, const float **logits) {
    da_status st = da_ok();
    for (int i = 0; i < n && !st.code;) {
        const int step = n - i < da_session_max_batch(s) ? n - i : da_session_max_batch(s);
        st = da_session_feed(s, tokens + i, step, 0, logits);
        i += step;
    }
    return st;
}

static da_status check_request(const da_session *s, int n_prompt, const da_generate_opts *o) {
    if (n_prompt < 1) return da_errorf("generate: the prompt is empty (give at least one token)");
    if (o->max_new < 0) return da_errorf("generate: max_new = %d must be >= 0", o->max_new);
    const int cap = da_session_capacity(s);
    if (o->slide && da_session_len(s) + n_prompt > cap)
        return da_errorf("generate: the prompt is %d tokens after %d; the session holds %d (the model's context is "
                         "at most max_seq_len): shorten the prompt",
                         n_prompt, da_session_len(s), cap);
    const long need = (long)da_session_len(s) + n_prompt + (o->max_new > 0 ? o->max_new - 1 : 0);
    if (!o->slide && need > cap)
        return da_errorf("generate: %d prompt tokens + %d new ones need %ld positions; the session holds %d "
                         "(at most the model's max_seq_len): generate fewer tokens, shorten the prompt, or slide "
                         "the context",
                         n_prompt, o->max_new, need, cap);
    return da_ok();
}

da_status da_generate(da_session *s, const int *prompt, int n_prompt, const da_generate_opts *o, int *n_out) {
    if (n_out) *n_out = 0;
    da_status st = check_request(s, n_prompt, o);
    if (st.code) return st;
    const int V = da_session_vocab_size(s), cap = da_session_capacity(s);
    /* the tokens of this call, for sliding: the prompt, then each one generated */
    int *hist = malloc(((size_t)n_prompt + o->max_new + 1) * sizeof(int));
    float *scratch = malloc(2 * (size_t)V * sizeof(float));
    if (!hist || !scratch) st = da_errorf("generate: out of memory");
    const float *logits = NULL;
    if (!st.code) {
        memcpy(hist, prompt, (size_t)n_prompt * sizeof(int));
        st = feed_all(s, prompt, n_prompt, &logits);
    }
    int n_hist = n_prompt;
    da_rng rng;
    da_rng_seed(&rng, o->seed);
    for (int g = 0; g < o->max_new && !st.code; g++) {
        const size_t bad = da_first_nonfinite(logits, (size_t)V);
        if (bad < (size_t)V) {
            st = da_errorf("generate: step %d: the logits hold %g (token %zu); the model's numbers are not finite, "
                           "nothing to sample from",
                           g, (double)logits[bad], bad);
            break;
        }
        const int tok = da_sample_token(logits, V, o->temperature, o->top_p, &rng, scratch);
        hist[n_hist++] = tok;
        if (n_out) *n_out = g + 1;
        const int stop = (o->on_token && o->on_token(o->ctx, tok)) || tok == o->stop_token;
        if (stop || g + 1 == o->max_new) break;
        if (da_session_len(s) == cap) { /* full (only when sliding): keep the last half */
            const int keep = cap / 2 > 0 ? cap / 2 : 1;
            da_session_reset(s);
            if ((st = feed_all(s, hist + n_hist - keep, keep - 1, &logits)).code) break;
        }
        st = da_session_feed(s, &tok, 1, 0, &logits);
    }
    free(hist);
    free(scratch);
    return st;
}
