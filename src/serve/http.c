/* The HTTP side of diffattn serve, on libmicrohttpd with a thread per
 * connection: routing, API keys, bodies (and their limit), GET endpoints. A
 * handler may block until its job is done (api.c), and a stream's reader
 * until the scheduler has new text. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "serve/http.h"
#include "serve/reply.h"

/* What one request gathers across the calls of the access handler. */
typedef struct {
    char *body;
    size_t n, cap;
    int too_big, started;
    double t0;
} conn_ctx;

static int authorized(const srv *S, struct MHD_Connection *c) {
    if (!S->o.api_key || !S->o.api_key[0]) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    return h && !strncmp(h, "Bearer ", 7) && !strcmp(h + 7, S->o.api_key);
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
        S->tokens_in, S->tokens_out, S->decode_steps, S->decode_tokens_per_s, S->busy, S->o.parallel, S->queued,
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
    return srv_send_error(S, c, 404, "no such endpoint (GET /, /health, /v1/models, /metrics)", "GET", url);
}

static int post_kind(const char *url) {
    if (!strcmp(url, "/v1/completions") || !strcmp(url, "/completions")) return SRV_COMPLETION;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) return SRV_CHAT;
    if (!strcmp(url, "/tokenize") || !strcmp(url, "/v1/tokenize")) return SRV_TOKENIZE;
    if (!strcmp(url, "/detokenize") || !strcmp(url, "/v1/detokenize")) return SRV_DETOKENIZE;
    return -1;
}

/* The first call of a POST: refuse it before its body is read when it cannot succeed. */
static enum MHD_Result post_first(srv *S, struct MHD_Connection *c, const char *url, conn_ctx *cc, int *answered) {
    *answered = 1;
    if (post_kind(url) < 0)
        return srv_send_error(S, c, 404,
                              "no such endpoint (POST /v1/completions, /v1/chat/completions, /tokenize, /detokenize)",
                              "POST", url);
    if (!authorized(S, c)) return srv_send_error(S, c, 401, "missing or wrong API key (Authorization: Bearer KEY)", "POST", url);
    const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
    if (len && strtod(len, NULL) > (double)S->o.max_body) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is %s bytes; the server takes at most %ld (--max-body)", len, S->o.max_body);
        cc->too_big = 1;
        return srv_send_error(S, c, 413, msg, "POST", url);
    }
    *answered = 0;
    return MHD_YES;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv *S = cls;
    conn_ctx *cc = *con_cls;
    if (!cc) {
        if (!(cc = calloc(1, sizeof *cc))) return MHD_NO;
        cc->t0 = srv_now();
        *con_cls = cc;
        if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) return route_get(S, c, url);
        if (!strcmp(method, "OPTIONS")) {
            char *empty = dup_cstr("");
            return empty ? srv_send_text(S, c, 204, "text/plain", empty, method, url) : MHD_NO;
        }
        if (strcmp(method, "POST")) return srv_send_error(S, c, 405, "method not allowed (GET or POST)", method, url);
        int answered;
        enum MHD_Result r = post_first(S, c, url, cc, &answered);
        if (answered) cc->started = 1;
        return r;
    }
    if (cc->started) { /* answered already: the rest of the body is dropped */
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (cc->n + *upload_size > (size_t)S->o.max_body) cc->too_big = 1;
        if (!cc->too_big) {
            if (cc->n + *upload_size + 1 > cc->cap) {
                size_t cap = (cc->n + *upload_size + 1) * 2;
                char *b = realloc(cc->body, cap);
                if (!b) return MHD_NO;
                cc->body = b, cc->cap = cap;
            }
            memcpy(cc->body + cc->n, upload, *upload_size);
            cc->n += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    cc->started = 1;
    if (cc->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is over %ld bytes (--max-body)", S->o.max_body);
        return srv_send_error(S, c, 413, msg, "POST", url);
    }
    if (!S->ready) return srv_send_error(S, c, 503, "the model is loading; try again when /health answers 200", "POST", url);
    return srv_post(S, c, url, (srv_kind)post_kind(url), cc->body ? cc->body : "", cc->n);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

da_status srv_http_start(srv *S) {
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((uint16_t)S->o.port);
    if (inet_pton(AF_INET, S->o.host, &addr.sin_addr) != 1)
        return da_errorf("--host %s: expected an IPv4 address such as 127.0.0.1 or 0.0.0.0", S->o.host);
    S->mhd = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG,
                              (uint16_t)S->o.port, NULL, NULL, handle, S, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S->o.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)1024, MHD_OPTION_NOTIFY_COMPLETED, completed, S, MHD_OPTION_END);
    if (!S->mhd)
        return da_errorf("could not listen on %s:%d (is the port in use? pick another with --port)", S->o.host, S->o.port);
    return da_ok();
}

void srv_http_stop(srv *S) {
    if (S->mhd) MHD_stop_daemon(S->mhd);
    S->mhd = NULL;
}
