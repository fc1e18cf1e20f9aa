/* JSON text as the chat templates' Jinja writes it with `tojson`
 * (transformers' filter, @huggingface/jinja's): keys in the order given,
 * ", " and ": " between items, non-ASCII characters as they are, and with an
 * indent, one item a line. Tool definitions and arguments are rendered into
 * prompts this way. */
#ifndef DA_SERVE_TOJSON_H
#define DA_SERVE_TOJSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* A growing text for the renderers: each put appends; a failed allocation sets oom, and nothing more is appended. */
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
} srv_text;
void srv_text_put_n(srv_text *b, const char *s, size_t n);
void srv_text_put(srv_text *b, const char *s);
/* s[0..n) as a JSON string the way Jinja's tojson writes it. */
void srv_text_put_json_string(srv_text *b, const char *s, size_t n);

/* v's text (malloc'ed, NULL when out of memory); indent 0: on one line. Strings must hold no NUL. */
char *srv_tojson(const cJSON *v, int indent);

#endif
