/* The JSON endpoints: /tokenize, /detokenize, /v1/completions and
 * /v1/chat/completions (whole answers and server-sent event streams). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve/http.h"
#include "serve/reply.h"
#include "serve/tool_stream.h"
#include "serve/tools.h"

/* ---------------------------------------------------------------- tokens and text */

static da_status encode(const srv *S, const char *text, size_t len, int add_special, int **ids, int *n) {
    size_t nn = 0, cap = 0;
    *ids = NULL;
    *n = 0;
    if (S->ids_only)
        return da_errorf("prompt: this model carries no tokenizer and its tokens are not bytes; send token ids "
                         "(or start the server with --tokenizer)");
    if (!S->tok) {
        nn = len;
        if (!(*ids = malloc((nn ? nn : 1) * sizeof **ids))) return da_errorf("out of memory");
        for (size_t i = 0; i < nn; i++) (*ids)[i] = (unsigned char)text[i];
        *n = (int)nn;
        return da_ok();
    }
    da_status st = add_special ? da_tokenizer_encode_add_special(S->tok, (const uint8_t *)text, len, ids, &nn, &cap)
                               : da_tokenizer_encode(S->tok, (const uint8_t *)text, len, ids, &nn, &cap);
    *n = (int)nn;
    return st;
}

/* The text of ids (malloc'ed, *n_out bytes, which may hold NULs, then a NUL); an id the model does not have is an
 * error. */
static da_status decode(const srv *S, const int *ids, int n, char **out, size_t *n_out, const char *field) {
    *out = NULL;
    *n_out = 0;
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
    *n_out = nb;
    return da_ok();
}

/* A required or named tool call: decoding is constrained, and starts after the template's opening of a call. */
static int tool_forced(const srv_request *r) {
    return r->kind == SRV_CHAT && (r->tool_choice == SRV_TOOLS_REQUIRED || r->tool_choice == SRV_TOOLS_NAMED);
}

/* The ids of a chat: the template's text, its special tokens recognised, nothing added. */
static da_status chat_ids(const srv *S, const srv_request *r, int **ids, int *n) {
    char *text = NULL;
    size_t len = 0;
    da_status st = srv_chat_render(S->tmpl, r->messages, r->n_messages, r->tools, r->n_tools, S->bos, &text, &len);
    const char *opening = tool_forced(r) ? srv_tools_opening(S->tmpl) : "";
    if (!st.code && opening[0]) {
        char *grown = realloc(text, len + strlen(opening) + 1);
        if (!grown) st = da_errorf("out of memory");
        else memcpy(grown + len, opening, strlen(opening) + 1), text = grown, len += strlen(opening);
    }
    if (!st.code) st = encode(S, text, len, 0, ids, n);
    free(text);
    return st;
}

static enum MHD_Result tokenize(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r) {
    int *ids = NULL, n = 0;
    da_status st = r->n_messages ? chat_ids(S, r, &ids, &n)
                                 : encode(S, r->prompts[0].text, r->prompts[0].n_text, r->add_special, &ids, &n);
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
    size_t len = 0;
    da_status st = decode(S, r->tokens, r->n_tokens, &text, &len, "tokens");
    if (st.code) return srv_send_error(S, c, 400, st.msg, "POST", url);
    cJSON *j = cJSON_CreateObject();
    cJSON_AddItemToObject(j, "content", srv_json_text(text, len));
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
    j->cache_prompt = r->cache_prompt && !j->prompt_lp; /* the prompt's log-probabilities need every row fed */
    j->refs = 2; /* the HTTP side's and the scheduler's */
    j->finish_length = 1;
    for (int i = 0; i < r->n_stop; i++) {
        if (!(j->stop[i] = malloc(r->stop_len[i] + 1))) goto oom;
        memcpy(j->stop[i], r->stop[i], r->stop_len[i] + 1);
        j->stop_len[i] = r->stop_len[i];
        j->n_stop = i + 1;
    }
    if (r->json == SRV_JSON_OBJECT && da_json_schema_any_object(&j->schema).code) goto oom;
    if (r->json == SRV_JSON_SCHEMA) { /* the request compiled this text once already */
        cJSON *schema = cJSON_Parse(r->schema_json);
        da_status st = schema ? da_json_schema_compile(&j->schema, schema, "json_schema") : da_errorf("out of memory");
        cJSON_Delete(schema);
        if (st.code) goto oom;
    }
    if (j->schema) da_json_start(j->schema, &j->json);
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
    else if (r->prompts[i].text) st = encode(S, r->prompts[i].text, r->prompts[i].n_text, 1, ids, n);
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

/* The text of token id as a JSON item; *len its length in bytes. */
static cJSON *token_text(const srv *S, int id, size_t *len) {
    char *t = NULL;
    size_t n = 0;
    if (decode(S, &id, 1, &t, &n, "token").code) n = 0;
    cJSON *s = srv_json_text(t ? t : "", n);
    free(t);
    if (len) *len = n;
    return s;
}

/* {"text of token": logprob, ...} of the top alternatives at position p, keys that may hold NULs escaped (cJSON
 * would cut them). */
static cJSON *top_object(const srv *S, const srv_job *j, int p) {
    size_t n = 1, cap = 256;
    char *o = malloc(cap);
    if (o) o[0] = '{';
    for (int k = 0; k < j->top_n && o; k++) {
        const int id = j->top_id[(size_t)p * j->top_n + k];
        char *t = NULL;
        size_t len = 0;
        if (decode(S, &id, 1, &t, &len, "token").code) len = 0;
        char *key = srv_json_quote(t ? t : "", len);
        free(t);
        cJSON *num = cJSON_CreateNumber(j->top_lp[(size_t)p * j->top_n + k]);
        char *v = num ? cJSON_PrintUnformatted(num) : NULL;
        cJSON_Delete(num);
        const size_t need = key && v ? n + strlen(key) + strlen(v) + 4 : 0; /* ',' ':' '}' NUL */
        char *grown = !need ? NULL : need > cap ? realloc(o, cap = 2 * need) : o;
        if (!grown) free(o);
        o = grown;
        if (o) n += (size_t)sprintf(o + n, "%s%s:%s", k ? "," : "", key, v);
        free(key);
        free(v);
    }
    if (!o) return cJSON_CreateObject();
    o[n] = '}', o[n + 1] = 0;
    cJSON *raw = cJSON_CreateRaw(o);
    free(o);
    return raw;
}

/* OpenAI's legacy logprobs: tokens, token_logprobs, top_logprobs, text_offset, from position `from`. */
static cJSON *legacy_logprobs(const srv *S, const srv_job *j, int from) {
    cJSON *o = cJSON_CreateObject(), *toks = cJSON_AddArrayToObject(o, "tokens"),
          *lps = cJSON_AddArrayToObject(o, "token_logprobs"), *tops = cJSON_AddArrayToObject(o, "top_logprobs"),
          *offs = cJSON_AddArrayToObject(o, "text_offset");
    long off = 0;
    for (int p = from; p < j->n_ids + j->n_out; p++) {
        const int id = p < j->n_ids ? j->ids[p] : j->out[p - j->n_ids];
        size_t len = 0;
        cJSON *t = token_text(S, id, &len);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += (long)len;
        cJSON_AddItemToArray(toks, t);
        if (p == 0 || (p < j->n_ids && !j->prompt_lp)) {
            cJSON_AddItemToArray(lps, cJSON_CreateNull());
            cJSON_AddItemToArray(tops, cJSON_CreateNull());
            continue;
        }
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(j->lp[p]));
        cJSON_AddItemToArray(tops, top_object(S, j, p));
    }
    return o;
}

/* Chat's logprobs: {"content": [{token, logprob, top_logprobs: [{token, logprob}]}]} of the generated tokens. */
static cJSON *chat_logprobs(const srv *S, const srv_job *j) {
    cJSON *o = cJSON_CreateObject(), *content = cJSON_AddArrayToObject(o, "content");
    for (int g = 0; g < j->n_out; g++) {
        const int p = j->n_ids + g;
        cJSON *e = cJSON_CreateObject(), *top = cJSON_CreateArray();
        cJSON_AddItemToObject(e, "token", token_text(S, j->out[g], NULL));
        cJSON_AddNumberToObject(e, "logprob", j->lp[p]);
        for (int k = 0; k < j->top_n; k++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddItemToObject(t, "token", token_text(S, j->top_id[(size_t)p * j->top_n + k], NULL));
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

/* OpenAI's tool_calls of a message: [{id, type: "function", function: {name, arguments}}], ids from the
 * answer's id and the choice. */
static cJSON *tool_calls_json(const srv_parsed_call *calls, int n, const char *answer_id, int choice) {
    cJSON *a = cJSON_CreateArray();
    for (int k = 0; k < n; k++) {
        cJSON *c = cJSON_CreateObject(), *f;
        char id[96];
        snprintf(id, sizeof id, "call_%s_%d_%d", answer_id, choice, k);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        f = cJSON_AddObjectToObject(c, "function");
        cJSON_AddStringToObject(f, "name", calls[k].name);
        cJSON_AddStringToObject(f, "arguments", calls[k].arguments);
        cJSON_AddItemToArray(a, c);
    }
    return a;
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
        const char *finish = j->finish_length ? "length" : "stop";
        if (r->kind == SRV_CHAT) {
            cJSON *m = cJSON_AddObjectToObject(ch, "message");
            cJSON_AddStringToObject(m, "role", "assistant");
            srv_parsed_call *calls = NULL;
            size_t content = j->n_text;
            const int n_calls = srv_tools_parse(r, S->tmpl, tool_forced(r), j->text ? j->text : "", j->n_text, &calls,
                                                &content);
            if (n_calls > 0 && !content) cJSON_AddNullToObject(m, "content");
            else cJSON_AddItemToObject(m, "content", srv_json_text(j->text ? j->text : "", content));
            if (n_calls > 0) {
                cJSON_AddItemToObject(m, "tool_calls", tool_calls_json(calls, n_calls, id, i));
                finish = "tool_calls";
            }
            srv_parsed_calls_free(calls, n_calls);
            if (j->top_n >= 0) cJSON_AddItemToObject(ch, "logprobs", chat_logprobs(S, j));
            else cJSON_AddNullToObject(ch, "logprobs");
        } else {
            char *echo = NULL;
            size_t n_echo = 0;
            if (r->echo && decode(S, j->ids, j->n_ids, &echo, &n_echo, "prompt").code) n_echo = 0;
            char *text = malloc(n_echo + j->n_text + 1);
            if (text) {
                if (n_echo) memcpy(text, echo, n_echo);
                if (j->n_text) memcpy(text + n_echo, j->text, j->n_text);
            }
            cJSON_AddItemToObject(ch, "text", srv_json_text(text ? text : "", text ? n_echo + j->n_text : 0));
            free(text);
            free(echo);
            if (j->top_n >= 0) cJSON_AddItemToObject(ch, "logprobs", legacy_logprobs(S, j, r->echo ? 0 : j->n_ids));
            else cJSON_AddNullToObject(ch, "logprobs");
        }
        cJSON_AddStringToObject(ch, "finish_reason", finish);
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
    char *echo;      /* completions with echo: the prompt's text (n_echo bytes), sent first */
    size_t n_echo;
    int counted;     /* 1 while it counts in S->streams: until its last byte is sent, or it is dropped */
    int usage;       /* stream_options.include_usage: "usage": null in each chunk, then a chunk with the usage */
    srv_tool_stream *ts; /* a chat with tools: its calls, read as they come */
} stream;

/* The stream has sent everything or is gone: the server need not wait for it to stop. */
static void stream_uncount(stream *st) {
    if (!st->counted) return;
    st->counted = 0;
    st->S->streams--;
    pthread_cond_broadcast(&st->S->out_cv);
}

/* o as one server-sent event, "data: JSON\n\n", then tail1 and tail2 (malloc'ed; NULL when out of memory); o is freed. */
static char *sse_event(cJSON *o, const char *tail1, const char *tail2) {
    char *json = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    char *ev = json ? malloc(strlen(json) + strlen(tail1) + strlen(tail2) + 9) : NULL;
    if (ev) sprintf(ev, "data: %s\n\n%s%s", json, tail1, tail2);
    free(json);
    return ev;
}

/* The chunk after the last choice's, as OpenAI sends it: no choices, the request's usage. */
static char *usage_event(const stream *st) {
    cJSON *o = cJSON_CreateObject();
    answer_head(st->S, o, st->id, st->chat ? "chat.completion.chunk" : "text_completion");
    cJSON_AddArrayToObject(o, "choices");
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", st->j->n_ids);
    cJSON_AddNumberToObject(u, "completion_tokens", st->j->n_out);
    cJSON_AddNumberToObject(u, "total_tokens", st->j->n_ids + st->j->n_out);
    return sse_event(o, "", "");
}

static char *event_of(const stream *st, const char *text, size_t n, const char *finish) {
    cJSON *o = cJSON_CreateObject(), *choices, *ch = cJSON_CreateObject();
    answer_head(st->S, o, st->id, st->chat ? "chat.completion.chunk" : "text_completion");
    choices = cJSON_AddArrayToObject(o, "choices");
    cJSON_AddNumberToObject(ch, "index", 0);
    if (st->chat) {
        cJSON *d = cJSON_AddObjectToObject(ch, "delta");
        if (st->phase == 0) cJSON_AddStringToObject(d, "role", "assistant");
        if (!finish) cJSON_AddItemToObject(d, "content", srv_json_text(text, n));
    } else {
        cJSON_AddItemToObject(ch, "text", srv_json_text(text, n));
    }
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish) cJSON_AddStringToObject(ch, "finish_reason", finish);
    else cJSON_AddNullToObject(ch, "finish_reason");
    cJSON_AddItemToArray(choices, ch);
    if (st->usage) cJSON_AddNullToObject(o, "usage");
    char *usage = finish && st->usage ? usage_event(st) : NULL;
    if (finish && st->usage && !usage) {
        cJSON_Delete(o);
        return NULL;
    }
    char *ev = sse_event(o, usage ? usage : "", finish ? "data: [DONE]\n\n" : "");
    free(usage);
    return ev;
}

static char *error_event(const char *msg) {
    cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", "server_error");
    return sse_event(o, "data: [DONE]\n\n", "");
}

/* A chat stream with tools: the deltas text[0..n_safe) makes due, one chunk each, and at the end the finish. */
static char *tool_events(stream *st) {
    const srv_job *j = st->j;
    cJSON *deltas = cJSON_CreateArray();
    srv_tool_stream_feed(st->ts, j->text ? j->text : "", j->n_safe, j->done, deltas);
    size_t len = 0, cap = 1;
    char *all = calloc(1, cap);
    for (const cJSON *d = deltas ? deltas->child : NULL; d && all; d = d->next) {
        cJSON *o = cJSON_CreateObject(), *ch = cJSON_CreateObject();
        answer_head(st->S, o, st->id, "chat.completion.chunk");
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "choices"), ch);
        cJSON_AddNumberToObject(ch, "index", 0);
        cJSON_AddItemToObject(ch, "delta", cJSON_Duplicate(d, 1));
        cJSON_AddNullToObject(ch, "logprobs");
        cJSON_AddNullToObject(ch, "finish_reason");
        if (st->usage) cJSON_AddNullToObject(o, "usage");
        char *ev = sse_event(o, "", "");
        const size_t need = ev ? len + strlen(ev) + 1 : 0;
        if (ev && need > cap) {
            char *grown = realloc(all, 2 * need);
            if (grown) all = grown, cap = 2 * need;
        }
        if (ev && need <= cap) len += (size_t)sprintf(all + len, "%s", ev);
        free(ev);
    }
    cJSON_Delete(deltas);
    char *end = j->done ? event_of(st, "", 0, srv_tool_stream_finish(st->ts, j->finish_length)) : NULL;
    char *grown = end && all ? realloc(all, len + strlen(end) + 1) : all;
    if (end && grown) strcpy((all = grown) + len, end);
    free(end);
    return all;
}

/* The next event: waits for text from the scheduler. NULL at the end. */
static char *next_event(stream *st) {
    srv *S = st->S;
    srv_job *j = st->j;
    if (st->phase == 0) {
        char *ev = event_of(st, st->echo ? st->echo : "", st->echo ? st->n_echo : 0, NULL);
        st->phase = 1;
        return ev;
    }
    if (st->phase == 2) return NULL;
    pthread_mutex_lock(&S->mu);
    while (!j->done && j->n_safe == st->sent) pthread_cond_wait(&S->out_cv, &S->mu);
    char *ev;
    if (st->ts && !j->err.code) {
        ev = tool_events(st);
        st->sent = j->n_safe;
        if (j->done) st->phase = 2;
    } else if (j->n_safe > st->sent) {
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
    S->answers--;
    pthread_cond_broadcast(&S->out_cv);
    pthread_mutex_unlock(&S->mu);
    free(st->buf);
    free(st->echo);
    free(st->ts);
    free(st);
}

/* Streams j, whose slot has taken it; the stream holds the job's reference and an answer in flight. */
static enum MHD_Result send_stream(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r,
                                   srv_job *j, const char *id) {
    stream *st = calloc(1, sizeof *st);
    if (!st) {
        release_all(S, &j, 1);
        return MHD_NO;
    }
    st->S = S, st->j = j, st->chat = r->kind == SRV_CHAT, st->usage = r->include_usage;
    snprintf(st->id, sizeof st->id, "%s", id);
    if (r->echo && decode(S, j->ids, j->n_ids, &st->echo, &st->n_echo, "prompt").code) st->n_echo = 0;
    if (r->kind == SRV_CHAT && r->tool_choice != SRV_TOOLS_NONE && (S->tmpl == SRV_TMPL_CHATML || S->tmpl == SRV_TMPL_LLAMA31) &&
        (st->ts = malloc(sizeof *st->ts)))
        srv_tool_stream_init(st->ts, S->tmpl, tool_forced(r), id);
    pthread_mutex_lock(&S->mu);
    S->streams++;
    S->answers++;
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

/* The client closed its end of the connection (read end of file), while its handler waits: nothing it sends
 * is read until the answer is out, so the socket holds either more requests (pipelined) or the hang-up. */
static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {.fd = ci->connect_fd, .events = POLLIN};
    if (poll(&p, 1, 0) <= 0) return 0;
    if (p.revents & (POLLHUP | POLLERR)) return 1;
    char b;
    return (p.revents & POLLIN) && recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Under mu: waits until every job is done (or, for a stream, has left the queue), looking at the client every
 * 100 ms. 0, or -1 when the client hung up (its jobs are then cancelled: the scheduler drops them within a
 * step, whether queued or running). */
static int wait_jobs(srv *S, struct MHD_Connection *c, srv_job **jobs, int n, int until_started) {
    for (;;) {
        int waiting = 0;
        for (int i = 0; i < n; i++) waiting |= !jobs[i]->done && !(until_started && jobs[i]->started);
        if (!waiting) return 0;
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        t.tv_nsec += 100000000L;
        if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&S->out_cv, &S->mu, &t);
        if (client_gone(c)) {
            for (int i = 0; i < n; i++) jobs[i]->cancelled = 1;
            pthread_cond_broadcast(&S->work_cv);
            return -1;
        }
    }
}

/* The jobs of r: each prompt (or the chat) times "n", choice k of a prompt seeded seed + k. NULL when one fails
 * (*st says why). */
static srv_job **make_jobs(srv *S, const srv_request *r, int n_jobs, unsigned long serial, da_status *st) {
    srv_job **jobs = calloc((size_t)n_jobs, sizeof *jobs);
    if (!jobs) {
        *st = da_errorf("out of memory");
        return NULL;
    }
    const uint64_t seed = r->has_seed ? r->seed : (uint64_t)time(NULL) * 1000003u + serial * 7919u;
    for (int i = 0; i < n_jobs && !st->code; i++) {
        int *ids = NULL, n_ids = 0;
        const int prompt = i / r->n_choices, choice = i % r->n_choices;
        *st = prompt_ids(S, r, prompt, &ids, &n_ids);
        const uint64_t s = seed + (r->has_seed ? (uint64_t)choice : (uint64_t)i);
        if (!st->code && !(jobs[i] = make_job(S, r, ids, n_ids, s))) *st = da_errorf("out of memory");
        if (!jobs[i]) free(ids);
        else if (jobs[i]->schema && jobs[i]->max_new < da_json_min_left(jobs[i]->schema, &jobs[i]->json))
            *st = da_errorf("max_tokens: %d tokens are fewer than the shortest answer the schema allows (%d tokens)",
                            jobs[i]->max_new, da_json_min_left(jobs[i]->schema, &jobs[i]->json));
    }
    if (!st->code) return jobs;
    for (int i = 0; i < n_jobs; i++)
        if (jobs[i]) jobs[i]->refs = 1;
    release_all(S, jobs, n_jobs);
    free(jobs);
    return NULL;
}

/* Queues the jobs (each then owes an answer, S->answers); 0, or -1 when the server is stopping. */
static int enqueue(srv *S, srv_job **jobs, int n) {
    pthread_mutex_lock(&S->mu);
    if (S->draining) {
        for (int i = 0; i < n; i++) jobs[i]->refs = 1, srv_job_release(S, jobs[i]);
        pthread_mutex_unlock(&S->mu);
        return -1;
    }
    const double now = srv_now();
    for (int i = 0; i < n; i++) {
        jobs[i]->t_queued = now;
        if (S->queue_tail) S->queue_tail->next = jobs[i];
        else S->queue_head = jobs[i];
        S->queue_tail = jobs[i];
        S->queued++;
    }
    S->answers++;
    pthread_cond_broadcast(&S->work_cv);
    pthread_mutex_unlock(&S->mu);
    return 0;
}

static enum MHD_Result generate(srv *S, struct MHD_Connection *c, const char *url, const srv_request *r) {
    const int n = (r->kind == SRV_CHAT ? 1 : r->n_prompts) * r->n_choices;
    static _Atomic unsigned long counter;
    const unsigned long serial = ++counter;
    da_status st = da_ok();
    srv_job **jobs = make_jobs(S, r, n, serial, &st);
    if (!jobs) return srv_send_error(S, c, 400, st.msg, "POST", url);
    if (enqueue(S, jobs, n)) {
        free(jobs);
        return srv_send_error(S, c, 503, "the server is shutting down", "POST", url);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%lu", r->kind == SRV_CHAT ? "chatcmpl" : "cmpl", serial);
    pthread_mutex_lock(&S->mu);
    const int gone = wait_jobs(S, c, jobs, n, r->stream);
    int refused = 0;
    for (int i = 0; i < n; i++) refused |= jobs[i]->refused;
    if (refused)
        for (int i = 0; i < n; i++) jobs[i]->cancelled = 1; /* a list of prompts partly running: all or nothing */
    pthread_mutex_unlock(&S->mu);
    enum MHD_Result ret = MHD_NO; /* the client hung up: the connection closes */
    if (!gone && refused) {
        ret = srv_send_error(S, c, 503, "the server is shutting down; the request was still queued", "POST", url);
    } else if (!gone && r->stream) {
        srv_job *j = jobs[0];
        free(jobs);
        ret = send_stream(S, c, url, r, j, id);
        srv_answer_done(S);
        return ret;
    } else if (!gone) {
        for (int i = 0; i < n; i++)
            if (jobs[i]->err.code) st = jobs[i]->err;
        ret = st.code ? srv_send_error(S, c, 500, st.msg, "POST", url)
                      : srv_send_json(S, c, 200, answer(S, r, jobs, n, id), "POST", url);
    }
    release_all(S, jobs, n);
    free(jobs);
    srv_answer_done(S);
    return ret;
}

enum MHD_Result srv_post(srv *S, struct MHD_Connection *c, const char *url, srv_kind k, const char *body, size_t n) {
    srv_request r;
    char *call_schema = NULL;
    da_status st = srv_request_parse(&r, k, body, n);
    enum MHD_Result ret;
    if (st.code) {
        ret = srv_send_error(S, c, 400, st.msg, "POST", url);
    } else if (r.model && strcmp(r.model, S->model_id)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model \"%.200s\" is not served here; this server serves \"%.200s\" (GET /v1/models)",
                 r.model, S->model_id);
        ret = srv_send_error(S, c, 404, msg, "POST", url);
    } else if (k == SRV_CHAT && (st = srv_tools_constraint(&r, S->tmpl, &call_schema)).code) {
        ret = srv_send_error(S, c, 400, st.msg, "POST", url);
    } else if (k == SRV_TOKENIZE) {
        ret = tokenize(S, c, url, &r);
    } else if (k == SRV_DETOKENIZE) {
        ret = detokenize(S, c, url, &r);
    } else {
        if (call_schema) { /* a required call: parse_tool_choice refused response_format beside it */
            free(r.schema_json);
            r.schema_json = call_schema, r.json = SRV_JSON_SCHEMA, call_schema = NULL;
        }
        ret = generate(S, c, url, &r);
    }
    free(call_schema);
    srv_request_free(&r);
    return ret;
}
