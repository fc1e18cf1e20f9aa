/* The JSON endpoints: /tokenize, /detokenize, /v1/completions and
 * /v1/chat/completions (whole answers and server-sent event streams). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/http.h"
#include "serve/reply.h"

/* ---------------------------------------------------------------- tokens and text */

static da_status encode(const srv *S, const char *text, int add_special, int **ids, int *n) {
    size_t nn = 0, cap = 0;
    *ids = NULL;
    *n = 0;
    if (S->ids_only)
        return da_errorf("prompt: this model carries no tokenizer and its tokens are not bytes; send token ids "
                         "(or start the server with --tokenizer)");
    if (!S->tok) {
        nn = strlen(text);
        if (!(*ids = malloc((nn ? nn : 1) * sizeof **ids))) return da_errorf("out of memory");
        for (size_t i = 0; i < nn; i++) (*ids)[i] = (unsigned char)text[i];
        *n = (int)nn;
        return da_ok();
    }
    da_status st = add_special ? da_tokenizer_encode_add_special(S->tok, (const uint8_t *)text, strlen(text), ids, &nn, &cap)
                               : da_tokenizer_encode(S->tok, (const uint8_t *)text, strlen(text), ids, &nn, &cap);
    *n = (int)nn;
    return st;
}

/* The text of ids (malloc'ed, NUL-terminated); an id the model does not have is an error. */
static da_status decode(const srv *S, const int *ids, int n, char **out, const char *field) {
    *out = NULL;
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= S->V)
            return da_errorf("%s[%d]: token %d is out of range (the model has %d tokens)", field, i, ids[i], S->V);
    uint8_t *b = NULL;
    size_t nb = 0, cap = 0;
    if (S->tok) {
        da_status st = da_tokenizer_decode(S->tok, ids, (size_t)n, &b, &nb, &cap);
        if (st.code) {
            free(b);
            return st;
        }
    } else {
        b = malloc((size_t)n + 1);
        if (!b) return da_errorf("out of memory");
        for (int i = 0; i < n; i++)
            if (ids[i] < 256) b[nb++] = (uint8_t)ids[i];
    }
    char *s = realloc(b, nb + 1);
    if (!s) {
        free(b);
        return da_errorf("out of memory");
    }
    s[nb] = 0;
    *out = s;
    return da_ok();
}

/* The ids of a chat: the template's text, its special tokens recognised, nothing added. */
static da_status chat_ids(const srv *S, const srv_request *r, int **ids, int *n) {
    char *text = NULL;
    da_status st = srv_chat_render(S->tmpl, r->messages, r->n_messages, S->bos, &text);
    if (!st.code) st = encode(S, text, 0, ids, n);
    free(text);
    return st;
}

static enum MHD_Result tokenize(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r) {
    int *ids = NULL, n = 0;
    da_status st = r->n_messages ? chat_ids(S, r, &ids, &n) : encode(S, r->prompts[0].text, r->add_special, &ids, &n);
    if (st.code) {
        free(ids);
        return srv_send_error(S, c, 400, st.msg, "POST", url);
    }
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "tokens", cJSON_CreateIntArray(ids, n));
    free(ids);
    return srv_send_json(S, c, 200, j, "POST", url);
}

static enum MHD_Result detokenize(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r) {
    char *text = NULL;
    da_status st = decode(S, r->tokens, r->n_tokens, &text, "tokens");
    if (st.code) return srv_send_error(S, c, 400, st.msg, "POST", url);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "content", text);
    free(text);
    return srv_send_json(S, c, 200, j, "POST", url);
}

/* ---------------------------------------------------------------- jobs */

static srv_job *make_job(const srv *S, const srv_request *r, int *ids, int n_ids, uint64_t seed) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    j->ids = ids;
    j->n_ids = n_ids;
    const int room = S->ctx - n_ids;
    const int def = r->kind == SRV_CHAT ? room : 16; /* OpenAI's default for completions */
    const int want = r->max_tokens >= 0 ? r->max_tokens : def;
    j->max_new = want < room ? want : room;
    j->ignore_eos = r->ignore_eos;
    j->temperature = r->temperature;
    j->top_p = r->top_p;
    j->seed = seed;
    j->top_n = r->logprobs;
    j->prompt_lp = r->echo && r->logprobs >= 0;
    j->refs = 2; /* the HTTP side's and the scheduler's */
    j->finish_length = 1;
    for (int i = 0; i < r->n_stop; i++) {
        if (!(j->stop[i] = malloc(strlen(r->stop[i]) + 1))) goto oom;
        strcpy(j->stop[i], r->stop[i]);
        j->n_stop = i + 1;
    }
    const size_t np = (size_t)n_ids + (size_t)j->max_new;
    if (!(j->out = malloc(((size_t)j->max_new + 1) * sizeof *j->out))) goto oom;
    if (j->top_n >= 0) {
        j->lp = malloc(np * sizeof *j->lp);
        j->top_id = malloc((np * j->top_n + 1) * sizeof *j->top_id);
        j->top_lp = malloc((np * j->top_n + 1) * sizeof *j->top_lp);
        if (!j->lp || !j->top_id || !j->top_lp) goto oom;
    }
    return j;
oom:
    j->ids = NULL; /* the caller's */
    j->refs = 1;
    srv_job_release(NULL, j);
    return NULL;
}

/* Prompt i of r (or the chat) as ids, checked against the vocabulary and the context. */
static da_status prompt_ids(const srv *S, const srv_request *r, int i, int **ids, int *n) {
    da_status st = da_ok();
    if (r->kind == SRV_CHAT) st = chat_ids(S, r, ids, n);
    else if (r->prompts[i].text) st = encode(S, r->prompts[i].text, 1, ids, n);
    else {
        *n = r->prompts[i].n_ids;
        if (!(*ids = malloc((size_t)*n * sizeof **ids))) return da_errorf("out of memory");
        memcpy(*ids, r->prompts[i].ids, (size_t)*n * sizeof **ids);
        for (int k = 0; k < *n; k++)
            if ((*ids)[k] >= S->V)
                return da_errorf("prompt: token %d at position %d is out of range (the model has %d tokens)", (*ids)[k],
                                 k, S->V);
    }
    if (st.code) return st;
    if (*n < 1) return da_errorf("prompt: empty (it encodes to no tokens)");
    if (*n > S->ctx)
        return da_errorf("prompt: %d tokens; the context holds %d (--ctx): shorten the prompt", *n, S->ctx);
    return da_ok();
}

static void release_all(srv *S, srv_job **jobs, int n) {
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < n; i++)
        if (jobs[i]) srv_job_release(S, jobs[i]);
    pthread_mutex_unlock(&S->mu);
}

/* ---------------------------------------------------------------- answers */

static cJSON *token_text(const srv *S, int id) {
    char *t = NULL;
    if (decode(S, &id, 1, &t, "token").code) return cJSON_CreateString("");
    cJSON *s = cJSON_CreateString(t);
    free(t);
    return s;
}

/* OpenAI's legacy logprobs: tokens, token_logprobs, top_logprobs, text_offset, from position `from`. */
static cJSON *legacy_logprobs(const srv *S, const srv_job *j, int from) {
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs"),
          *offs = cJSON_AddArrayToObject(o, "text_offset");
    long off = 0;
    for (int p = from; p < j->n_ids + j->n_out; p++) {
        const int id = p < j->n_ids ? j->ids[p] : j->out[p - j->n_ids];
        cJSON *t = token_text(S, id);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += (long)strlen(cJSON_GetStringValue(t) ? cJSON_GetStringValue(t) : "");
        cJSON_AddItemToArray(toks, t);
        if (p == 0 || (p < j->n_ids && !j->prompt_lp)) {
            cJSON_AddItemToArray(lps, cJSON_CreateNull());
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(j->lp[p]));
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < j->top_n; k++) {
            cJSON *tt = token_text(S, j->top_id[(size_t)p * j->top_n + k]);
            cJSON_AddNumberToObject(top, cJSON_GetStringValue(tt) ? cJSON_GetStringValue(tt) : "",
                                    j->top_lp[(size_t)p * j->top_n + k]);
            cJSON_Delete(tt);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

/* Chat's logprobs: {"content": [{token, logprob, top_logprobs: [{token, logprob}]}]} of the generated tokens. */
static cJSON *chat_logprobs(const srv *S, const srv_job *j) {
    cJSON *o = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(o, "content");
    for (int g = 0; g < j->n_out; g++) {
        const int p = j->n_ids + g;
        cJSON *e = cJSON_CreateObject(), *top = cJSON_CreateArray();
        cJSON_AddItemToObject(e, "token", token_text(S, j->out[g]));
        cJSON_AddNumberToObject(e, "logprob", j->lp[p]);
        for (int k = 0; k < j->top_n; k++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddItemToObject(t, "token", token_text(S, j->top_id[(size_t)p * j->top_n + k]));
            cJSON_AddNumberToObject(t, "logprob", j->top_lp[(size_t)p * j->top_n + k]);
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddItemToObject(e, "top_logprobs", top);
        cJSON_AddItemToArray(content, e);
    }
    return o;
}

static void answer_head(const srv *S, cJSON *o, const char *id, const char *object) {
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)time(NULL));
    cJSON_AddStringToObject(o, "model", S->model_id);
}

/* The whole answer of finished jobs. */
static cJSON *answer(const srv *S, const srv_request *r, srv_job **jobs, int n, const char *id) {
    cJSON *o = cJSON_CreateObject(), *choices;
    answer_head(S, o, id, r->kind == SRV_CHAT ? "chat.completion" : "text_completion");
    choices = cJSON_AddArrayToObject(o, "choices");
    long in = 0, out = 0;
    for (int i = 0; i < n; i++) {
        const srv_job *j = jobs[i];
        cJSON *ch = cJSON_CreateObject();
        cJSON_AddNumberToObject(ch, "index", i);
        if (r->kind == SRV_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddStringToObject(m, "content", j->text ? j->text : "");
            if (j->top_n >= 0) cJSON_AddItemToObject(ch, "logprobs", chat_logprobs(S, j));
            else cJSON_AddNullToObject(ch, "logprobs");
        } else {
            char *echo = NULL;
            if (r->echo) decode(S, j->ids, j->n_ids, &echo, "prompt");
            char *text = malloc((echo ? strlen(echo) : 0) + j->n_text + 1);
            if (text) sprintf(text, "%s%s", echo ? echo : "", j->text ? j->text : "");
            cJSON_AddStringToObject(ch, "text", text ? text : "");
            free(text);
            free(echo);
            if (j->top_n >= 0) cJSON_AddItemToObject(ch, "logprobs", legacy_logprobs(S, j, r->echo ? 0 : j->n_ids));
            else cJSON_AddNullToObject(ch, "logprobs");
        }
        cJSON_AddStringToObject(ch, "finish_reason", j->finish_length ? "length" : "stop");
        cJSON_AddItemToArray(choices, ch);
        in += j->n_ids;
        out += j->n_out;
    }
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)in);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)out);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(in + out));
    return o;
}

/* ---------------------------------------------------------------- streams */

typedef struct {
    srv *S;
    srv_job *j;
    int chat, phase; /* 0: the opening event (chat's role, completions' echo); 1: text; 2: ended */
    char id[48];
    size_t sent;     /* bytes of j->text sent */
    char *buf;       /* the event being sent */
    size_t n, off;
    char *echo;      /* completions with echo: the prompt's text, sent first */
    int counted;     /* 1 while it counts in S->streams: until its last byte is sent, or it is dropped */
} stream;

/* The stream has sent everything or is gone: the server need not wait for it to stop. */
static void stream_uncount(stream *st) {
    if (!st->counted) return;
    st->counted = 0;
    st->S->streams--;
    pthread_cond_broadcast(&st->S->out_cv);
}

static char *event_of(const stream *st, const char *text, size_t n, const char *finish) {
    cJSON *o = cJSON_CreateObject(), *choices, *ch = cJSON_CreateObject();
    answer_head(st->S, o, st->id, st->chat ? "chat.completion.chunk" : "text_completion");
    choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddNumberToObject(ch, "index", 0);
    char *t = malloc(n + 1);
    if (t) memcpy(t, text, n), t[n] = 0;
    if (st->chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (st->phase == 0) cJSON_AddStringToObject(d, "role", "assistant");
        if (!finish) cJSON_AddStringToObject(d, "content", t ? t : "");
    } else {
        cJSON_AddStringToObject(ch, "text", t ? t : "");
    }
    free(t);
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(choices, ch);
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!json) return NULL;
    char *ev = malloc(strlen(json) + 40);
    if (ev) sprintf(ev, "data: %s\n\n%s", json, finish ? "data: [DONE]\n\n" : "");
    free(json);
    return ev;
}

static char *error_event(const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "server_error");
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    char *ev = json ? malloc(strlen(json) + 40) : NULL;
    if (ev) sprintf(ev, "data: %s\n\ndata: [DONE]\n\n", json);
    free(json);
    return ev;
}

/* The next event: waits for text from the scheduler. NULL at the end. */
static char *next_event(stream *st) {
    srv *S = st->S;
    srv_job *j = st->j;
    if (st->phase == 0) {
        char *ev = event_of(st, st->echo ? st->echo : "", st->echo ? strlen(st->echo) : 0, NULL);
        st->phase = 1;
        return ev;
    }
    if (st->phase == 2) return NULL;
    pthread_mutex_lock(&S->mu);
    while (!j->done && j->n_safe == st->sent) pthread_cond_wait(&S->out_cv, &S->mu);
    char *ev;
    if (j->n_safe > st->sent) {
        ev = event_of(st, j->text + st->sent, j->n_safe - st->sent, NULL);
        st->sent = j->n_safe;
    } else if (j->err.code) {
        ev = error_event(j->err.msg);
        st->phase = 2;
    } else {
        ev = event_of(st, "", 0, j->finish_length ? "length" : "stop");
        st->phase = 2;
    }
    pthread_mutex_unlock(&S->mu);
    return ev;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *st = cls;
    while (st->off == st->n) {
        free(st->buf);
        st->buf = next_event(st);
        st->n = st->buf ? strlen(st->buf) : 0;
        st->off = 0;
        if (!st->buf) {
            /* a kept-alive connection frees the response only later */
            pthread_mutex_lock(&st->S->mu);
            stream_uncount(st);
            pthread_mutex_unlock(&st->S->mu);
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
    }
    const size_t k = st->n - st->off < max ? st->n - st->off : max;
    memcpy(buf, st->buf + st->off, k);
    st->off += k;
    return (ssize_t)k;
}

/* The response is gone: sent, or the client left, in which case the slot drops the job. */
static void stream_free(void *cls) {
    stream *st = cls;
    srv *S = st->S;
    pthread_mutex_lock(&S->mu);
    if (!st->j->done) {
        st->j->cancelled = 1;
        pthread_cond_broadcast(&S->work_cv);
    }
    stream_uncount(st);
    srv_job_release(S, st->j);
    pthread_mutex_unlock(&S->mu);
    free(st->buf);
    free(st->echo);
    free(st);
}

static enum MHD_Result send_stream(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r,
                                   srv_job *j, const char *id) {
    stream *st = calloc(1, sizeof *st);
    if (!st) {
        release_all(S, &j, 1);
        return MHD_NO;
    }
    st->S = S, st->j = j, st->chat = r->kind == SRV_CHAT;
    snprintf(st->id, sizeof st->id, "%s", id);
    if (r->echo) decode(S, j->ids, j->n_ids, &st->echo, "prompt");
    pthread_mutex_lock(&S->mu);
    S->streams++;
    st->counted = 1;
    pthread_mutex_unlock(&S->mu);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!resp) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    pthread_mutex_lock(&S->mu);
    S->requests[0]++;
    pthread_mutex_unlock(&S->mu);
    if (!S->o.quiet) fprintf(stderr, "serve: POST %s 200 (stream)\n", url);
    return ret;
}

/* ---------------------------------------------------------------- completions */

static enum MHD_Result generate(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r) {
    const int n = r->kind == SRV_CHAT ? 1 : r->n_prompts;
    srv_job **jobs = calloc((size_t)n, sizeof *jobs);
    if (!jobs) return MHD_NO;
    static _Atomic unsigned long counter;
    const unsigned long serial = ++counter;
    da_status st = da_ok();
    for (int i = 0; i < n && !st.code; i++) {
        int *ids = NULL, n_ids = 0;
        st = prompt_ids(S, r, i, &ids, &n_ids);
        const uint64_t seed = r->has_seed ? r->seed : (uint64_t)time(NULL) * 1000003u + serial * 7919u + (uint64_t)i;
        if (!st.code && !(jobs[i] = make_job(S, r, ids, n_ids, seed))) st = da_errorf("out of memory");
        if (!jobs[i]) free(ids);
    }
    if (st.code) {
        for (int i = 0; i < n; i++)
            if (jobs[i]) jobs[i]->refs = 1;
        release_all(S, jobs, n);
        free(jobs);
        return srv_send_error(S, c, 400, st.msg, "POST", url);
    }
    pthread_mutex_lock(&S->mu);
    if (S->draining) {
        for (int i = 0; i < n; i++) jobs[i]->refs = 1, srv_job_release(S, jobs[i]);
        pthread_mutex_unlock(&S->mu);
        free(jobs);
        return srv_send_error(S, c, 503, "the server is shutting down", "POST", url);
    }
    const double now = srv_now();
    for (int i = 0; i < n; i++) {
        jobs[i]->t_queued = now;
        if (S->queue_tail) S->queue_tail->next = jobs[i];
        else S->queue_head = jobs[i];
        S->queue_tail = jobs[i];
        S->queued++;
    }
    pthread_cond_broadcast(&S->work_cv);
    pthread_mutex_unlock(&S->mu);
    char id[48];
    snprintf(id, sizeof id, "%s-%lu", r->kind == SRV_CHAT ? "chatcmpl" : "cmpl", serial);
    if (r->stream) {
        srv_job *j = jobs[0];
        free(jobs);
        return send_stream(S, c, url, r, j, id);
    }
    pthread_mutex_lock(&S->mu);
    for (int i = 0; i < n; i++)
        while (!jobs[i]->done) pthread_cond_wait(&S->out_cv, &S->mu);
    pthread_mutex_unlock(&S->mu);
    for (int i = 0; i < n; i++)
        if (jobs[i]->err.code) st = jobs[i]->err;
    enum MHD_Result ret = st.code ? srv_send_error(S, c, 500, st.msg, "POST", url)
                                  : srv_send_json(S, c, 200, answer(S, r, jobs, n, id), "POST", url);
    release_all(S, jobs, n);
    free(jobs);
    return ret;
}

enum MHD_Result srv_post(srv *S, struct MHD_Connection *c, const char *url, srv_kind k, const char *body, size_t n) {
    srv_request r;
    da_status st = srv_request_parse(&r, k, body, n);
    enum MHD_Result ret;
    if (st.code) {
        ret = srv_send_error(S, c, 400, st.msg, "POST", url);
    } else if (r.model && strcmp(r.model, S->model_id)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model \"%.200s\" is not served here; this server serves \"%.200s\" (GET /v1/models)",
                 r.model, S->model_id);
        ret = srv_send_error(S, c, 404, msg, "POST", url);
    } else if (k == SRV_TOKENIZE) {
        ret = tokenize(S, c, url, &r);
    } else if (k == SRV_DETOKENIZE) {
        ret = detokenize(S, c, url, &r);
    } else {
        ret = generate(S, c, url, &r);
    }
    srv_request_free(&r);
    return ret;
}
