/* Prompt and decoding speed through the inference engine (bench_generate.h). */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "bench/bench.h"
#include "ops/qblock.h"

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The session options of one model: the requested activations (the engine
 * runs float weights with f32 ones). */
static da_status run_opts(const da_bench_generate_opts *o, da_session_opts *so) {
    *so = da_session_opts_default();
    da_act_mode act;
    if (o->act && da_act_mode_parse(o->act, &act))
        return da_errorf("bench generate: act \"%s\" is not one of q8, int8-dynamic, int8-static, bf16, f32", o->act);
    if (o->act) so->act = act;
    so->kv_int8 = o->kv_int8;
    so->kv_f16 = o->kv_f16;
    so->max_T = o->prompt + o->gen;
    so->max_batch = o->prompt;
    return da_ok();
}

/* One timed run: the prompt in one call, then gen greedy decoding steps. */
static da_status time_once(const da_engine *e, const da_session_opts *so, const int *prompt,
                           const da_bench_generate_opts *o, da_bench_generate_result *r) {
    da_session *s = NULL;
    da_status st = da_session_create(&s, e, so);
    if (st.code) return st;
    const int V = da_engine_config(e)->vocab_size;
    const float *lg = NULL;
    const double t0 = da_now_s();
    st = da_session_feed(s, prompt, o->prompt, 0, &lg);
    const double t1 = da_now_s();
    int tk = st.code ? 0 : argmax(lg, V);
    for (int i = 0; i < o->gen && !st.code; i++) {
        st = da_session_feed(s, &tk, 1, 0, &lg);
        if (!st.code) tk = argmax(lg, V);
    }
    const double t2 = da_now_s();
    da_session_free(s);
    if (st.code) return st;
    const double pp = o->prompt / (t1 - t0), dd = o->gen / (t2 - t1);
    if (pp > r->best_prompt) r->best_prompt = pp;
    if (dd > r->best_decode) r->best_decode = dd;
    return st;
}

da_status da_bench_generate(const char *const *paths, int n, const da_bench_generate_opts *o,
                            da_bench_generate_result *res) {
    if (o->prompt < 1 || o->gen < 1 || o->reps < 1)
        return da_errorf("bench generate: prompt %d, gen %d and reps %d must be positive", o->prompt, o->gen, o->reps);
    da_engine **e = calloc((size_t)n, sizeof *e);
    da_session_opts *so = calloc((size_t)n, sizeof *so);
    int *prompt = malloc((size_t)o->prompt * sizeof(int));
    da_status st = e && so && prompt ? da_ok() : da_errorf("bench generate: out of memory");
    memset(res, 0, (size_t)n * sizeof *res);
    for (int i = 0; i < n && !st.code; i++) {
        if ((st = da_engine_load_with(&e[i], paths[i], &o->load)).code) break;
        const da_config *c = da_engine_config(e[i]);
        if (o->prompt + o->gen > c->max_seq_len)
            st = da_errorf("%s: prompt %d + gen %d exceeds max_seq_len %d", paths[i], o->prompt, o->gen, c->max_seq_len);
        if (!st.code) st = run_opts(o, &so[i]);
        da_session *probe = NULL; /* the activation mode the engine resolves for this model */
        if (!st.code && !(st = da_session_create(&probe, e[i], &so[i])).code)
            snprintf(res[i].act, sizeof res[i].act, "%s", da_act_mode_name(da_session_act(probe)));
        da_session_free(probe);
        snprintf(res[i].weight_type, sizeof res[i].weight_type, "%s", da_engine_weight_type(e[i]));
        snprintf(res[i].dots, sizeof res[i].dots, "%s", da_isa_name(da_exec_default().isa));
        res[i].kv_int8 = o->kv_int8;
        res[i].kv_f16 = o->kv_f16;
        res[i].file_bytes = (long)da_engine_file_bytes(e[i]);
        res[i].decode_bytes = da_engine_decode_bytes(e[i], o->prompt + o->gen / 2, o->kv_int8, o->kv_f16);
    }
    if (!st.code) {
        const int V = da_engine_config(e[0])->vocab_size;
        const char *text = "The quick brown fox jumps over the lazy dog. ";
        for (int i = 0; i < o->prompt; i++) prompt[i] = (unsigned char)text[i % strlen(text)] % V;
    }
    for (int r = 0; r < o->reps && !st.code; r++) /* interleaved: every model once per round */
        for (int i = 0; i < n && !st.code; i++) st = time_once(e[i], &so[i], prompt, o, &res[i]);
    for (int i = 0; e && i < n; i++) da_engine_free(e[i]);
    free(e);
    free(so);
    free(prompt);
    return st;
}

double da_copy_bandwidth_gbs(size_t bytes) {
    char *a = malloc(bytes), *b = malloc(bytes);
    double best = 0;
    if (a && b) {
        memset(a, 1, bytes); /* every page touched before timing */
        memset(b, 2, bytes);
        for (int pass = 0; pass < 5; pass++) {
            const double t0 = da_now_s();
#pragma omp parallel
            {
                const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
                const size_t lo = bytes / nt * id, hi = id + 1 == nt ? bytes : bytes / nt * (id + 1);
                memcpy(b + lo, a + lo, hi - lo);
            }
            const double gbs = 2.0 * (double)bytes / (da_now_s() - t0) / 1e9;
            if (gbs > best) best = gbs;
        }
    }
    free(a);
    free(b);
    return best;
}
