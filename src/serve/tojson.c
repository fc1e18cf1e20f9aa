/* Jinja's tojson (serve/tojson.h): Python's json.dumps(ensure_ascii=False),
 * which JavaScript's JSON.stringify matches but for numbers with a fraction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/tojson.h"

void srv_text_put_n(srv_text *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        const size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
void srv_text_put(srv_text *b, const char *s) { srv_text_put_n(b, s, strlen(s)); }

void srv_text_put_json_string(srv_text *b, const char *s, size_t n) {
    srv_text_put(b, "\"");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!e && c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c), e = esc;
        if (e) srv_text_put(b, e);
        else srv_text_put_n(b, s + i, 1);
    }
    srv_text_put(b, "\"");
}

/* The shortest text that reads back as v; integers without a fraction. */
static void put_number(srv_text *b, double v) {
    char t[40];
    if (v == floor(v) && fabs(v) < 1e16) snprintf(t, sizeof t, "%.0f", v);
    else if (!isfinite(v)) snprintf(t, sizeof t, "null");
    else
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v) break;
        }
    srv_text_put(b, t);
}

static void newline(srv_text *b, int indent, int depth) {
    if (!indent) return;
    srv_text_put(b, "\n");
    for (int i = 0; i < indent * depth; i++) srv_text_put(b, " ");
}

static void put_value(srv_text *b, const cJSON *v, int indent, int depth) {
    if (cJSON_IsString(v)) srv_text_put_json_string(b, v->valuestring, strlen(v->valuestring));
    else if (cJSON_IsNumber(v)) put_number(b, v->valuedouble);
    else if (cJSON_IsTrue(v)) srv_text_put(b, "true");
    else if (cJSON_IsFalse(v)) srv_text_put(b, "false");
    else if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        const int obj = cJSON_IsObject(v);
        srv_text_put(b, obj ? "{" : "[");
        for (const cJSON *e = v->child; e; e = e->next) {
            newline(b, indent, depth + 1);
            if (obj) {
                srv_text_put_json_string(b, e->string, strlen(e->string));
                srv_text_put(b, ": ");
            }
            put_value(b, e, indent, depth + 1);
            if (e->next) srv_text_put(b, indent ? "," : ", ");
        }
        if (v->child) newline(b, indent, depth);
        srv_text_put(b, obj ? "}" : "]");
    } else srv_text_put(b, "null");
}

char *srv_tojson(const cJSON *v, int indent) {
    srv_text b = {0};
    srv_text_put(&b, "");
    put_value(&b, v, indent, 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
