/* Queued responses of diffattn serve: JSON, text, OpenAI-shaped errors;
 * each counted by status for /metrics and logged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/reply.h"

static int status_index(unsigned s) {
    return s < 300 ? 0 : s == 400 ? 1 : s == 401 ? 2 : s == 404 ? 3 : s == 413 ? 4 : 5;
}

static void log_request(srv *S, struct MHD_Connection *c, const char *method, const char *url, unsigned status) {
    (void)c;
    pthread_mutex_lock(&S->mu);
    S->requests[status_index(status)]++;
    pthread_mutex_unlock(&S->mu);
    if (!S->o.quiet) fprintf(stderr, "serve: %s %s %u\n", method, url, status);
}

/* A queued response's text, and the server whose count of answers in flight it is in. */
typedef struct {
    srv *S;
    char *text;
} sent_text;

static void text_sent(void *cls) {
    sent_text *t = cls;
    srv_answer_done(t->S);
    free(t->text);
    free(t);
}

void srv_answer_done(srv *S) {
    pthread_mutex_lock(&S->mu);
    S->answers--;
    pthread_cond_broadcast(&S->out_cv);
    pthread_mutex_unlock(&S->mu);
}

enum MHD_Result srv_send_text(srv *S, struct MHD_Connection *c, unsigned status, const char *type, char *text,
                                 const char *method, const char *url) {
    sent_text *t = malloc(sizeof *t);
    struct MHD_Response *r =
        t ? MHD_create_response_from_buffer_with_free_callback_cls(strlen(text), text, text_sent, t) : NULL;
    if (!r) {
        free(t);
        free(text);
        return MHD_NO;
    }
    /* counted until MHD frees it, its last byte sent or its client gone: the server exits after that */
    t->S = S, t->text = text;
    pthread_mutex_lock(&S->mu);
    S->answers++;
    pthread_mutex_unlock(&S->mu);
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    log_request(S, c, method, url, status);
    return ret;
}

enum MHD_Result srv_send_json(srv *S, struct MHD_Connection *c, unsigned status, cJSON *j, const char *method,
                              const char *url) {
    char *text = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (!text) return MHD_NO;
    return srv_send_text(S, c, status, "application/json", text, method, url);
}

/* OpenAI's error shape: {"error": {"message", "type", "param", "code"}}. */
enum MHD_Result srv_send_error(srv *S, struct MHD_Connection *c, unsigned status, const char *msg, const char *method,
                               const char *url) {
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "unavailable_error"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    if (!S->o.quiet) fprintf(stderr, "serve: %s %s: %s\n", method, url, msg);
    cJSON *j = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(j, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", type);
    cJSON_AddNullToObject(e, "param");
    if (status == 404 && strstr(msg, "model")) cJSON_AddStringToObject(e, "code", "model_not_found");
    else cJSON_AddNullToObject(e, "code");
    return srv_send_json(S, c, status, j, method, url);
}


char *srv_json_quote(const char *s, size_t n) {
    char *q = malloc(6 * n + 3), *o = q;
    if (!q) return NULL;
    *o++ = '"';
    for (size_t i = 0; i < n; i++) {
        const unsigned char ch = (unsigned char)s[i];
        const char *esc = ch == '"' ? "\\\"" : ch == '\\' ? "\\\\" : ch == '\b' ? "\\b" : ch == '\f' ? "\\f"
                        : ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : NULL;
        if (esc) {
            memcpy(o, esc, 2);
            o += 2;
        } else if (ch < 0x20) {
            o += sprintf(o, "\\u%04x", ch);
        } else {
            *o++ = (char)ch;
        }
    }
    *o++ = '"';
    *o = 0;
    return q;
}

cJSON *srv_json_text(const char *s, size_t n) {
    char *q = srv_json_quote(s, n);
    cJSON *j = q ? cJSON_CreateRaw(q) : NULL;
    free(q);
    return j ? j : cJSON_CreateString("");
}
