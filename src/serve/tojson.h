/* JSON text as the chat templates' Jinja writes it with `tojson`
 * (transformers' filter, @huggingface/jinja's): keys in the order given,
 * ", " and ": " between items, non-ASCII characters as they are, and with an
 * indent, one item a line. Tool definitions and arguments are rendered into
 * prompts this way. */
#ifndef DA_SERVE_TOJSON_H
#define DA_SERVE_TOJSON_H

#include <cjson/cJSON.h>

/* v's text (malloc'ed, NULL when out of memory); indent 0: on one line. Strings must hold no NUL. */
char *srv_tojson(const cJSON *v, int indent);

#endif
