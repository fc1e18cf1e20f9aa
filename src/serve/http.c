/* The HTTP side of diffattn serve, on libmicrohttpd with a thread per
 * connection: framing checks (RFC 9112 section 6.3), routing, API keys,
 * bodies (their limit, and refused ones drained), GET endpoints. A handler
 * may block until its job is done (api.c), and a stream's reader until the
 * scheduler has new text. The deadline of each request is kept in conns.c. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve/conns.h"
#include "serve/http.h"
#include "serve/reply.h"
#include "serve/slots.h"

/* What one request gathers across the calls of the access handler. */
typedef struct {
    char *body;
    size_t n, cap;
    size_t seen;   /* body bytes received, kept or dropped */
    int too_big, started;
    int keep;        /* 1: the body is kept (a POST not refused); 0: read and dropped */
    unsigned refuse; /* a status decided from the headers, sent once the body is read and dropped */
    char refuse_msg[200];
    double t0;
} conn_ctx;

/* Equal without an early exit, so that the time taken does not tell how much
 * of a guessed key is right. */
static int same_key(const char *given, const char *key) {
    const size_t ng = strlen(given), nk = strlen(key);
    volatile unsigned char diff = ng != nk;
    for (size_t i = 0; i < nk; i++) diff |= (unsigned char)(key[i] ^ (i < ng ? given[i] : 0));
    return diff == 0;
}

/* "Authorization: Bearer KEY", the scheme in any case (RFC 7235 section 2.1). */
static int authorized(const srv *S, struct MHD_Connection *c) {
    if (!S->o.api_key || !S->o.api_key[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer", 6) || (h[6] != ' ' && h[6] != '\t')) return 0;
    h += 6;
    while (*h == ' ' || *h == '\t') h++;
    return same_key(h, S->o.api_key);
}

static char *dup_cstr(const char *s) {
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

static enum MHD_Result get_models(srv *S, struct MHD_Connection *c, const char *url) {
    cJSON *j = cJSON_CreateObject(), *data = cJSON_AddArrayToObject(j, "data"), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "object", "list");
    cJSON_AddStringToObject(m, "id", S->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)time(NULL));
    cJSON_AddStringToObject(m, "owned_by", "diffattn");
    cJSON *meta = cJSON_AddObjectToObject(m, "meta");
    cJSON_AddNumberToObject(meta, "n_ctx", S->ctx);
    cJSON_AddNumberToObject(meta, "n_vocab", S->V);
    cJSON_AddNumberToObject(meta, "parallel", S->o.parallel);
    cJSON_AddStringToObject(meta, "chat_template", srv_template_name(S->tmpl));
    cJSON_AddItemToArray(data, m);
    return srv_send_json(S, c, 200, j, "GET", url);
}

static enum MHD_Result get_metrics(srv *S, struct MHD_Connection *c, const char *url) {
    static const char *const codes[] = {"2xx", "400", "401", "404", "413", "other"};
    char *t = malloc(4096);
    if (!t) return MHD_NO;
    size_t n = 0;
    pthread_mutex_lock(&S->mu);
    n += (size_t)snprintf(t + n, 4096 - n, "# HELP diffattn_requests_total HTTP requests answered, by status.\n"
                                           "# TYPE diffattn_requests_total counter\n");
    for (int i = 0; i < 6; i++)
        n += (size_t)snprintf(t + n, 4096 - n, "diffattn_requests_total{status=\"%s\"} %ld\n", codes[i], S->requests[i]);
    n += (size_t)snprintf(
        t + n, 4096 - n,
        "# HELP diffattn_prompt_tokens_total Prompt tokens fed.\n# TYPE diffattn_prompt_tokens_total counter\n"
        "diffattn_prompt_tokens_total %ld\n"
        "# HELP diffattn_prompt_tokens_cached_total Prompt tokens taken from a slot's cache (not fed).\n"
        "# TYPE diffattn_prompt_tokens_cached_total counter\ndiffattn_prompt_tokens_cached_total %ld\n"
        "# HELP diffattn_requests_started_ahead_total Requests started before an earlier queued one, for the start "
        "a slot's cache holds.\n# TYPE diffattn_requests_started_ahead_total counter\n"
        "diffattn_requests_started_ahead_total %ld\n"
        "# HELP diffattn_generated_tokens_total Tokens generated.\n# TYPE diffattn_generated_tokens_total counter\n"
        "diffattn_generated_tokens_total %ld\n"
        "# HELP diffattn_decode_steps_total Batched decoding steps.\n# TYPE diffattn_decode_steps_total counter\n"
        "diffattn_decode_steps_total %ld\n"
        "# HELP diffattn_decode_tokens_per_second Tokens per second of the last decoding step (all slots).\n"
        "# TYPE diffattn_decode_tokens_per_second gauge\ndiffattn_decode_tokens_per_second %.3f\n"
        "# HELP diffattn_slots_busy Slots holding a request.\n# TYPE diffattn_slots_busy gauge\n"
        "diffattn_slots_busy %d\n"
        "# HELP diffattn_slots_total Slots (--parallel).\n# TYPE diffattn_slots_total gauge\n"
        "diffattn_slots_total %d\n"
        "# HELP diffattn_queue_length Requests waiting for a slot.\n# TYPE diffattn_queue_length gauge\n"
        "diffattn_queue_length %d\n"
        "# HELP diffattn_uptime_seconds Seconds since start.\n# TYPE diffattn_uptime_seconds gauge\n"
        "diffattn_uptime_seconds %.3f\n",
        S->tokens_in, S->tokens_cached, S->jobs_ahead, S->tokens_out, S->decode_steps, S->decode_tokens_per_s, S->busy, S->o.parallel, S->queued,
        srv_now() - S->t_start);
    pthread_mutex_unlock(&S->mu);
    return srv_send_text(S, c, 200, "text/plain; version=0.0.4", t, "GET", url);
}

static enum MHD_Result route_get(srv *S, struct MHD_Connection *c, const char *url) {
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
        char *page = dup_cstr(srv_chat_page);
        return page ? srv_send_text(S, c, 200, "text/html; charset=utf-8", page, "GET", url) : MHD_NO;
    }
    if (!strcmp(url, "/health")) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "status", S->ready ? "ok" : "loading model");
        return srv_send_json(S, c, S->ready ? 200 : 503, j, "GET", url);
    }
    if (!authorized(S, c)) return srv_send_error(S, c, 401, "missing or wrong API key (Authorization: Bearer KEY)", "GET", url);
    if (!strcmp(url, "/v1/models") || !strcmp(url, "/models"))
        return S->ready ? get_models(S, c, url) : srv_send_error(S, c, 503, "the model is loading", "GET", url);
    if (!strcmp(url, "/metrics")) return get_metrics(S, c, url);
    if (srv_slots_url(url)) return srv_slots_get(S, c, url);
    return srv_send_error(S, c, 404, "no such endpoint (GET /, /health, /v1/models, /metrics, /slots)", "GET", url);
}

static int post_kind(const char *url) {
    if (!strcmp(url, "/v1/completions") || !strcmp(url, "/completions")) return SRV_COMPLETION;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) return SRV_CHAT;
    if (!strcmp(url, "/tokenize") || !strcmp(url, "/v1/tokenize")) return SRV_TOKENIZE;
    if (!strcmp(url, "/detokenize") || !strcmp(url, "/v1/detokenize")) return SRV_DETOKENIZE;
    return -1;
}

/* Bytes of a refused body read and dropped before the refusal is sent; past
 * them the connection is closed (the client may then see a reset). */
static size_t drain_max(const srv *S) {
    const size_t floor = (size_t)64 << 20, four = 4 * (size_t)S->o.max_body;
    return four > floor ? four : floor;
}

typedef struct {
    int n_length, lengths_differ, n_coding;
    const char *length, *coding;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!key || !value) return MHD_YES;
    if (!strcasecmp(key, "Content-Length")) {
        if (f->n_length++ == 0) f->length = value;
        else if (strcmp(value, f->length)) f->lengths_differ = 1;
    } else if (!strcasecmp(key, "Transfer-Encoding")) {
        f->n_coding++;
        f->coding = value;
    }
    return MHD_YES;
}

/* libmicrohttpd closes the connection after the answer, whatever follows. */
static void close_after(struct MHD_Connection *c) {
    MHD_set_connection_value(c, MHD_HEADER_KIND, "Connection", "close");
}

/* RFC 9112 section 6.3: a body that two Content-Length headers disagree on, or
 * in a coding other than chunked, cannot be framed, so where the next request
 * starts is unknown: 400 and close. Content-Length beside chunked may be read
 * the other way by a proxy in front: the request is served (chunked), then the
 * connection is closed so that nothing after its body is taken for a request.
 * 1 when answered (in *r). */
static int refuse_framing(srv *S, struct MHD_Connection *c, const char *method, const char *url, enum MHD_Result *r) {
    framing f;
    memset(&f, 0, sizeof f);
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    char msg[200];
    if (f.lengths_differ)
        snprintf(msg, sizeof msg, "Content-Length headers disagree; the body cannot be framed (RFC 9112 section 6.3)");
    else if (f.n_coding > 1 || (f.n_coding && strcasecmp(f.coding, "chunked")))
        snprintf(msg, sizeof msg, "Transfer-Encoding \"%.60s\"%s: only a single chunked coding is understood", f.coding,
                 f.n_coding > 1 ? " (and others)" : "");
    else {
        if (f.n_coding && f.n_length) close_after(c);
        return 0;
    }
    close_after(c);
    *r = srv_send_error(S, c, 400, msg, method, url);
    return 1;
}

/* A POST refused from its headers (status and message in cc). Sent at once
 * when the client waits for "100 Continue" (its body is not on its way) or
 * announces more than drain_max; otherwise once the body is read and dropped,
 * as a client still sending when the server answers and closes (Node's fetch)
 * gets a reset instead of the answer. */
static enum MHD_Result refuse_post(srv *S, struct MHD_Connection *c, const char *url, conn_ctx *cc) {
    const char *expect = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Expect");
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if ((expect && !strcasecmp(expect, "100-continue")) || (len && strtod(len, NULL) > (double)drain_max(S))) {
        cc->started = 1;
        return srv_send_error(S, c, cc->refuse, cc->refuse_msg, "POST", url);
    }
    return MHD_YES;
}

/* The first call of a POST: a refusal decided before its body is read when it cannot succeed. */
static enum MHD_Result post_first(srv *S, struct MHD_Connection *c, const char *url, conn_ctx *cc) {
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (post_kind(url) < 0 && !srv_slots_url(url)) {
        cc->refuse = 404;
        snprintf(cc->refuse_msg, sizeof cc->refuse_msg,
                 "no such endpoint (POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize, /slots/{id})");
    } else if (!authorized(S, c)) {
        cc->refuse = 401;
        snprintf(cc->refuse_msg, sizeof cc->refuse_msg, "missing or wrong API key (Authorization: Bearer KEY)");
    } else if (len && strtod(len, NULL) > (double)S->o.max_body) {
        cc->refuse = 413;
        snprintf(cc->refuse_msg, sizeof cc->refuse_msg,
                 "the body is %.40s bytes; the server takes at most %ld (--max-body)", len, S->o.max_body);
    }
    return cc->refuse ? refuse_post(S, c, url, cc) : MHD_YES;
}

/* A piece of a body: kept, or dropped when the request is refused or takes none. */
static enum MHD_Result body_data(srv *S, const char *url, conn_ctx *cc, const char *data, size_t n) {
    cc->seen += n;
    if (cc->seen > (size_t)S->o.max_body) cc->too_big = 1;
    if (cc->seen > drain_max(S)) {
        /* libmicrohttpd cannot answer before the body ends: closed unanswered */
        if (!S->o.quiet)
            fprintf(stderr, "serve: %s: a body over %zu bytes (chunked) closes the connection\n", url, drain_max(S));
        return MHD_NO;
    }
    if (cc->too_big || cc->refuse || !cc->keep) return MHD_YES;
    if (cc->n + n + 1 > cc->cap) {
        size_t cap = (cc->n + n + 1) * 2;
        char *b = realloc(cc->body, cap);
        if (!b) return MHD_NO;
        cc->body = b, cc->cap = cap;
    }
    memcpy(cc->body + cc->n, data, n);
    cc->n += n;
    return MHD_YES;
}

/* GET, HEAD, OPTIONS and the methods refused, once the request is in. */
static enum MHD_Result answer_other(srv *S, struct MHD_Connection *c, const char *method, const char *url) {
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return route_get(S, c, url);
    if (!strcmp(method, "OPTIONS")) {
        char *empty = dup_cstr("");
        return empty ? srv_send_text(S, c, 204, "text/plain", empty, method, url) : MHD_NO;
    }
    return srv_send_error(S, c, 405, "method not allowed (GET or POST)", method, url);
}

/* libmicrohttpd calls this once the headers are in, then with each piece of
 * the body, then once more. Answers wait for that last call where they can:
 * libmicrohttpd 0.9.75 closes a connection answered at the first call. */
static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv *S = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        cc->t0 = srv_now();
        *con_cls = cc;
        enum MHD_Result r;
        if (refuse_framing(S, c, method, url, &r)) {
            cc->started = 1;
            return r;
        }
        if (strcmp(method, "POST")) return MHD_YES;
        cc->keep = 1;
        return post_first(S, c, url, cc);
    }
    if (cc->started) { /* answered already: the rest of the body is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        const size_t n = *upload_size;
        *upload_size = 0;
        return body_data(S, url, cc, upload, n);
    }
    cc->started = 1;
    srv_conns_request_in(S->conns, c);
    if (strcmp(method, "POST")) return answer_other(S, c, method, url);
    if (cc->refuse) return srv_send_error(S, c, cc->refuse, cc->refuse_msg, "POST", url);
    if (cc->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is over %ld bytes (--max-body)", S->o.max_body);
        return srv_send_error(S, c, 413, msg, "POST", url);
    }
    if (!S->ready) return srv_send_error(S, c, 503, "the model is loading; try again when /health answers 200", "POST", url);
    if (srv_slots_url(url)) return srv_slots_post(S, c, url, cc->body ? cc->body : "", cc->n);
    return srv_post(S, c, url, (srv_kind)post_kind(url), cc->body ? cc->body : "", cc->n);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    srv *S = cls;
    (void)toe;
    srv_conns_answered(S->conns, c);
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

/* poll(), not select(): no ceiling of FD_SETSIZE (1,024) descriptors. A thread
 * per connection, as a handler may wait for its job (api.c). addr NULL: no
 * listening socket, connections come through MHD_add_connection, and no log. */
static da_status start_daemon(srv *S, const struct sockaddr_in *addr) {
    da_status st = srv_conns_start(&S->conns, S->o.request_timeout_s);
    if (st.code) return st;
    struct MHD_OptionItem bind[] = {{addr ? MHD_OPTION_SOCK_ADDR : MHD_OPTION_END, 0, (void *)addr},
                                    {MHD_OPTION_END, 0, NULL}};
    const unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD |
                           (addr ? MHD_USE_ERROR_LOG : MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC);
    S->mhd = MHD_start_daemon(flags, (uint16_t)S->o.port, NULL, NULL, handle, S, MHD_OPTION_ARRAY, bind,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S->o.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                              srv_conns_limit(), MHD_OPTION_NOTIFY_COMPLETED, completed, S,
                              MHD_OPTION_NOTIFY_CONNECTION, srv_conns_notify, S->conns, MHD_OPTION_END);
    if (!S->mhd) {
        srv_conns_stop(S->conns);
        S->conns = NULL;
        return addr ? da_errorf("could not listen on %s:%d (is the port in use? pick another with --port)", S->o.host,
                                S->o.port)
                    : da_errorf("serve: libmicrohttpd did not start");
    }
    return da_ok();
}

da_status srv_http_start(srv *S) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)S->o.port);
    if (inet_pton(AF_INET, S->o.host, &addr.sin_addr) != 1)
        return da_errorf("--host %s: expected an IPv4 address such as 127.0.0.1 or 0.0.0.0", S->o.host);
    return start_daemon(S, &addr);
}

da_status srv_http_start_unbound(srv *S) {
    return start_daemon(S, NULL);
}

void srv_http_stop(srv *S) {
    if (S->mhd) MHD_stop_daemon(S->mhd);
    S->mhd = NULL;
    srv_conns_stop(S->conns);
    S->conns = NULL;
}
