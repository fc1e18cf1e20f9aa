/* Jinja's tojson (serve/tojson.h): Python's json.dumps(ensure_ascii=False),
 * which JavaScript's JSON.stringify matches but for numbers with a fraction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/tojson.h"

typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} jbuf;

static void put_n(jbuf *b, const char *s, size_t n) {
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
static void put(jbuf *b, const char *s) { put_n(b, s, strlen(s)); }

static void put_string(jbuf *b, const char *s) {
    put(b, "\"");
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        char esc[8];
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                      : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (!e && c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c), e = esc;
        if (e) put(b, e);
        else put_n(b, s, 1);
    }
    put(b, "\"");
}

/* The shortest text that reads back as v; integers without a fraction. */
static void put_number(jbuf *b, double v) {
    char t[40];
    if (v == floor(v) && fabs(v) < 1e16) snprintf(t, sizeof t, "%.0f", v);
    else if (!isfinite(v)) snprintf(t, sizeof t, "null");
    else
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(t, sizeof t, "%.*g", prec, v);
            if (strtod(t, NULL) == v) break;
        }
    put(b, t);
}

static void newline(jbuf *b, int indent, int depth) {
    if (!indent) return;
    put(b, "\n");
    for (int i = 0; i < indent * depth; i++) put(b, " ");
}

static void put_value(jbuf *b, const cJSON *v, int indent, int depth) {
    if (cJSON_IsString(v)) put_string(b, v->valuestring);
    else if (cJSON_IsNumber(v)) put_number(b, v->valuedouble);
    else if (cJSON_IsTrue(v)) put(b, "true");
    else if (cJSON_IsFalse(v)) put(b, "false");
    else if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        const int obj = cJSON_IsObject(v);
        put(b, obj ? "{" : "[");
        for (const cJSON *e = v->child; e; e = e->next) {
            newline(b, indent, depth + 1);
            if (obj) {
                put_string(b, e->string);
                put(b, ": ");
            }
            put_value(b, e, indent, depth + 1);
            if (e->next) put(b, indent ? "," : ", ");
        }
        if (v->child) newline(b, indent, depth);
        put(b, obj ? "}" : "]");
    } else put(b, "null");
}

char *srv_tojson(const cJSON *v, int indent) {
    jbuf b = {0};
    put(&b, "");
    put_value(&b, v, indent, 0);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
