/* da_serve: bind, load the model while /health says 503, schedule until told
 * to stop, then let the last streams finish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/slot_file.h"
#include "io/atomic_file.h"
#include "serve/server.h"

da_serve_opts da_serve_opts_default(void) {
    da_serve_opts o;
    memset(&o, 0, sizeof o);
    o.host = "127.0.0.1";
    o.port = 8080;
    o.parallel = 4;
    o.max_body = 1 << 20;
    o.timeout_s = 600;
    o.request_timeout_s = 10;
    o.prefill_chunk = 64;
    o.cache_hold_ms = 100;
    return o;
}

static da_status check_opts(const da_serve_opts *o) {
    if (!o->model_path) return da_errorf("serve: model_path is not set (--model)");
    if (o->port < 0 || o->port > 65535) return da_errorf("serve: port %d is out of range (0..65535)", o->port);
    if (o->parallel < 1 || o->parallel > 64) return da_errorf("serve: parallel %d is out of range (1..64)", o->parallel);
    if (o->ctx < 0) return da_errorf("serve: ctx %d must be >= 0 (0: the model's max_seq_len)", o->ctx);
    if (o->max_body < 64) return da_errorf("serve: max_body %ld is under 64 bytes", o->max_body);
    if (o->timeout_s < 1) return da_errorf("serve: timeout %d must be >= 1 second", o->timeout_s);
    if (o->request_timeout_s < 1 || o->request_timeout_s > 86400)
        return da_errorf("serve: request_timeout %d is out of range (1..86400 seconds)", o->request_timeout_s);
    if (o->prefill_chunk < 1) return da_errorf("serve: prefill_chunk %d must be >= 1", o->prefill_chunk);
    if (o->kv && strcmp(o->kv, "f32") && strcmp(o->kv, "f16") && strcmp(o->kv, "int8"))
        return da_errorf("serve: --kv \"%s\" is not a KV cache type (f32, f16 or int8)", o->kv);
    if (o->cache_hold_ms < 0 || o->cache_hold_ms > 10000)
        return da_errorf("serve: cache_hold_ms %d is out of range (0..10000; 0: no hold)", o->cache_hold_ms);
    if (o->slot_save_path && *o->slot_save_path) {
        da_status st = da_make_dirs(o->slot_save_path);
        if (st.code) return da_errorf("serve: --slot-save-path: %s", st.msg);
    }
    return da_ok();
}

static void set_model_id(srv *S, const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    snprintf(S->model_id, sizeof S->model_id, "%.*s", (int)(n - b), path + b);
}

/* The chat template, the end-of-text ids and the BOS text of the model's tokenizer. */
static void load_chat(srv *S) {
    const char *why_plain = NULL;
    S->tmpl = srv_template_of_model(S->o.model_path, &why_plain);
    if (why_plain)
        fprintf(stderr, "serve: warning: %s; chats are rendered by the plain fallback (\"role: content\" lines, then "
                        "\"assistant:\"; docs/serving.md)\n",
                why_plain);
    static const char *const ends[] = {"<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|endofturn|>"};
    _Static_assert(sizeof ends / sizeof ends[0] <= sizeof S->eos / sizeof S->eos[0], "srv.eos is too short");
    for (size_t i = 0; S->tok && i < sizeof ends / sizeof ends[0]; i++) {
        const int id = da_tokenizer_special_id(S->tok, ends[i]);
        if (id >= 0 && id < S->V) S->eos[S->n_eos++] = id;
    }
    snprintf(S->bos, sizeof S->bos, "%s", srv_template_bos(S->tok));
}

static da_status load(srv *S) {
    da_status st = da_engine_load(&S->e, S->o.model_path);
    if (st.code) return st;
    const da_config *c = da_engine_config(S->e);
    st = da_engine_choose_tokenizer(S->e, S->o.model_path, S->o.tokenizer_path, &S->tok_owned, &S->tok);
    if (st.code && !S->o.tokenizer_path && !da_engine_tokenizer(S->e) && c->vocab_size != 256) {
        /* token ids still work: what an evaluation harness that tokenizes itself sends */
        fprintf(stderr, "serve: warning: %s; prompts must be token ids, and the text of tokens past 255 is empty\n",
                st.msg);
        S->ids_only = 1;
        st = da_ok();
    }
    if (st.code) return st;
    S->V = c->vocab_size;
    S->ctx = S->o.ctx ? S->o.ctx : c->max_seq_len;
    if (S->ctx > c->max_seq_len)
        return da_errorf("--ctx %d is over the model's context (max_seq_len %d)", S->ctx, c->max_seq_len);
    load_chat(S);
    const int P = S->o.parallel, chunk = S->o.prefill_chunk < S->ctx ? S->o.prefill_chunk : S->ctx;
    S->o.prefill_chunk = chunk;
    S->slots = calloc((size_t)P, sizeof *S->slots);
    S->logits = malloc((size_t)P * S->V * sizeof(float));
    S->scratch = malloc(2 * (size_t)S->V * sizeof(float));
    S->lsm = malloc((size_t)S->V * sizeof(float));
    if (!S->slots || !S->logits || !S->scratch || !S->lsm) return da_errorf("out of memory");
    da_session_opts so = da_session_opts_default();
    so.kv_f16 = S->o.kv && !strcmp(S->o.kv, "f16");
    so.kv_int8 = S->o.kv && !strcmp(S->o.kv, "int8");
    so.max_T = S->ctx;
    so.max_batch = chunk;
    for (int i = 0; i < P && !st.code; i++) st = da_session_create(&S->slots[i].s, S->e, &so);
    const int wb = P < 15 ? P : 15;
    so.max_T = wb < c->max_seq_len ? wb : c->max_seq_len;
    so.max_batch = so.max_T;
    if (!st.code) st = da_session_create(&S->work, S->e, &so);
    if (!st.code && S->o.slot_save_path && *S->o.slot_save_path) S->fingerprint = da_engine_fingerprint(S->e);
    return st;
}

static void release(srv *S) {
    for (int i = 0; S->slots && i < S->o.parallel; i++) {
        if (S->slots[i].job) srv_job_release(S, S->slots[i].job);
        da_session_free(S->slots[i].s);
        free(S->slots[i].cached);
    }
    while (S->queue_head) {
        srv_job *j = S->queue_head;
        S->queue_head = j->next;
        srv_job_release(S, j);
    }
    free(S->slots);
    da_session_free(S->work);
    free(S->logits);
    free(S->scratch);
    free(S->lsm);
    da_token_mask_free(S->mask);
    free(S->allowed);
    free(S->masked);
    free(S->text);
    da_tokenizer_free(S->tok_owned);
    da_engine_free(S->e);
    pthread_mutex_destroy(&S->mu);
    pthread_cond_destroy(&S->work_cv);
    pthread_cond_destroy(&S->out_cv);
}

da_status da_serve(const da_serve_opts *o) {
    da_status st = check_opts(o);
    if (st.code) return st;
    srv *S = calloc(1, sizeof *S);
    if (!S) return da_errorf("out of memory");
    S->o = *o;
    S->t_start = srv_now();
    set_model_id(S, o->model_path);
    pthread_mutex_init(&S->mu, NULL);
    pthread_cond_init(&S->work_cv, NULL);
    pthread_cond_init(&S->out_cv, NULL);
    st = srv_http_start(S);
    if (!st.code) {
        fprintf(stderr, "serve: listening on http://%s:%d (loading %s)\n", o->host, o->port, o->model_path);
        st = load(S);
    }
    if (!st.code) {
        fprintf(stderr, "serve: ready: model \"%s\", %d slots of %d positions, chat template %s\n", S->model_id,
                o->parallel, S->ctx, srv_template_name(S->tmpl));
        pthread_mutex_lock(&S->mu);
        S->ready = 1;
        pthread_mutex_unlock(&S->mu);
        srv_schedule(S);
        /* every job is done or refused; the answers (streamed or whole, 503s included) reach their clients */
        pthread_mutex_lock(&S->mu);
        for (int waited = 0; S->answers > 0 && waited < 600; waited++) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += 100000000L;
            if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&S->out_cv, &S->mu, &t);
        }
        if (S->answers > 0) fprintf(stderr, "serve: %d answers still unsent after 60 s; closing\n", S->answers);
        pthread_mutex_unlock(&S->mu);
        fprintf(stderr, "serve: stopped\n");
    }
    srv_http_stop(S);
    release(S);
    free(S);
    return st;
}
