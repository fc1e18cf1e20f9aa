/* Generation: a prompt, then tokens sampled one at a time and fed back,
 * through one session of the engine. */
#include <stdlib.h>

#include "diffattn/generate.h"

da_status da_generate(da_session *s, const int *prompt, int n_prompt, const da_generate_opts *o, int *n_out) {
    if (n_out) *n_out = 0;
    if (n_prompt < 1) return da_errorf("generate: the prompt is empty (give at least one token)");
    if (o->max_new < 0) return da_errorf("generate: max_new = %d must be >= 0", o->max_new);
    const long need = (long)da_session_len(s) + n_prompt + (o->max_new > 0 ? o->max_new - 1 : 0);
    if (need > da_session_capacity(s))
        return da_errorf("generate: %d prompt tokens + %d new ones need %ld positions; the session holds %d "
                         "(at most the model's max_seq_len): generate fewer tokens or shorten the prompt",
                         n_prompt, o->max_new, need, da_session_capacity(s));
    const float *logits = NULL;
    da_status st = da_ok();
    for (int i = 0; i < n_prompt && !st.code;) { /* the prompt in calls of at most max_batch tokens */
        const int n = n_prompt - i < da_session_max_batch(s) ? n_prompt - i : da_session_max_batch(s);
        st = da_session_feed(s, prompt + i, n, 0, &logits);
        i += n;
    }
    const int V = da_session_vocab_size(s);
    float *scratch = st.code ? NULL : malloc(2 * (size_t)V * sizeof(float));
    if (!st.code && !scratch) st = da_errorf("generate: out of memory");
    da_rng rng;
    da_rng_seed(&rng, o->seed);
    for (int g = 0; g < o->max_new && !st.code; g++) {
        const int tok = da_sample_token(logits, V, o->temperature, o->top_p, &rng, scratch);
        if (n_out) *n_out = g + 1;
        const int stop = (o->on_token && o->on_token(o->ctx, tok)) || tok == o->stop_token;
        if (stop || g + 1 == o->max_new) break;
        st = da_session_feed(s, &tok, 1, 0, &logits);
    }
    free(scratch);
    return st;
}
