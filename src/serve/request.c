/* Request bodies: JSON through cJSON, every field type-checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "infer/json_schema.h"
#include "io/json_keys.h"
#include "serve/request.h"
#include "serve/tojson.h"

void srv_request_free(srv_request *r) {
    free(r->model);
    for (int i = 0; i < r->n_prompts; i++) {
        free(r->prompts[i].text);
        free(r->prompts[i].ids);
    }
    free(r->prompts);
    for (int i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
        for (int k = 0; k < r->messages[i].n_tool_calls; k++) {
            free(r->messages[i].tool_calls[k].name);
            free(r->messages[i].tool_calls[k].arguments);
            free(r->messages[i].tool_calls[k].arguments_json);
        }
        free(r->messages[i].tool_calls);
    }
    free(r->messages);
    for (int i = 0; i < r->n_tools; i++) {
        free(r->tools[i].name);
        free(r->tools[i].tojson);
        free(r->tools[i].tojson_indent);
        free(r->tools[i].parameters);
    }
    free(r->tools);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->tokens);
    free(r->schema_json);
    memset(r, 0, sizeof *r);
}

/* ---------------------------------------------------------------- string lengths
 * cJSON keeps every byte of a string, \u0000 included, but no length: the
 * lengths come from a scan of the body, its strings in document order, which
 * is the order of a pre-order walk of the tree (each key, then its value). */

typedef struct {
    const char *at; /* a key or a valuestring of the tree */
    size_t n;       /* its decoded length in bytes */
} str_len;

typedef struct {
    str_len *s;
    size_t n, cap;
} str_lens;

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static unsigned hex4(const char *p, const char *end) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        const int h = p + i < end ? hexval(p[i]) : -1;
        if (h < 0) return 0xFFFFFFFFu;
        v = v << 4 | (unsigned)h;
    }
    return v;
}

/* The decoded length of the string literal whose opening quote is at *p; *p is moved past its closing quote.
 * The body is valid JSON (cJSON took it), so escapes are whole. */
static size_t literal_len(const char **p, const char *end) {
    size_t n = 0;
    const char *q = *p + 1;
    while (q < end && *q != '"') {
        if (*q != '\\') {
            n++, q++;
            continue;
        }
        if (q + 1 < end && q[1] == 'u') {
            const unsigned cp = hex4(q + 2, end);
            if (cp >= 0xD800 && cp <= 0xDBFF && q + 11 < end && q[6] == '\\' && q[7] == 'u') {
                n += 4, q += 12; /* a surrogate pair: one 4-byte character */
                continue;
            }
            n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
            q += 6;
        } else {
            n++, q += 2;
        }
    }
    *p = q + 1;
    return n;
}

/* Pairs the tree's strings with the lengths of the literals of body[0..end), in document order. */
static int collect(const cJSON *o, str_lens *L, const char **p, const char *end) {
    for (const cJSON *e = o; e; e = e->next) {
        const char *texts[2] = {e->string, cJSON_IsString(e) ? e->valuestring : NULL};
        for (int k = 0; k < 2; k++) {
            if (!texts[k]) continue;
            while (*p < end && **p != '"') (*p)++;
            if (*p >= end) return -1;
            if (L->n == L->cap) {
                const size_t cap = L->cap ? 2 * L->cap : 64;
                str_len *s = realloc(L->s, cap * sizeof *s);
                if (!s) return -1;
                L->s = s, L->cap = cap;
            }
            L->s[L->n].at = texts[k];
            L->s[L->n++].n = literal_len(p, end);
        }
        if ((cJSON_IsObject(e) || cJSON_IsArray(e)) && collect(e->child, L, p, end)) return -1;
    }
    return 0;
}

static int cmp_at(const void *a, const void *b) {
    const char *x = ((const str_len *)a)->at, *y = ((const str_len *)b)->at;
    return (x > y) - (x < y);
}

/* The length of a key or valuestring of the tree (strlen if the scan missed it, which a valid body never does). */
static size_t len_of(const str_lens *L, const char *s) {
    const str_len key = {s, 0}, *f = L->n ? bsearch(&key, L->s, L->n, sizeof *L->s, cmp_at) : NULL;
    return f ? f->n : strlen(s);
}

/* ---------------------------------------------------------------- keys */

/* A key that holds a NUL (cJSON's lookups would match it by its first part) or appears twice in one object of
 * the tree at o, or NULL. *oom is set when the check could not be made. */
static const char *bad_key(const cJSON *o, const str_lens *L, int *has_nul, int *oom) {
    if (!cJSON_IsObject(o) && !cJSON_IsArray(o)) return NULL;
    for (const cJSON *e = o->child; e; e = e->next) {
        if (e->string && len_of(L, e->string) != strlen(e->string)) {
            *has_nul = 1;
            return e->string;
        }
        const char *d = bad_key(e, L, has_nul, oom);
        if (d || *oom) return d;
    }
    return da_json_duplicate_key(o, oom);
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = 0;
    return d;
}

/* A string field's text and length (malloc'ed). */
static da_status dup_text(const str_lens *L, const cJSON *e, char **out, size_t *n) {
    *n = len_of(L, e->valuestring);
    return (*out = dup_n(e->valuestring, *n)) ? da_ok() : da_errorf("out of memory");
}

/* A name (model, role): a string without NUL. */
static da_status dup_name(const str_lens *L, const cJSON *e, const char *field, char **out) {
    const size_t n = len_of(L, e->valuestring);
    if (n != strlen(e->valuestring)) return da_errorf("%s: holds a NUL character (\\u0000)", field);
    return (*out = dup_n(e->valuestring, n)) ? da_ok() : da_errorf("out of memory");
}

/* An array of token ids: integers in 0 .. INT32_MAX. */
static da_status parse_ids(const cJSON *a, const char *field, int **ids, int *n) {
    int m = cJSON_GetArraySize(a), i = 0;
    *ids = malloc((size_t)(m ? m : 1) * sizeof **ids);
    if (!*ids) return da_errorf("out of memory");
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        const double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || v != floor(v) || v < 0 || v > 2147483647.0)
            return da_errorf("%s[%d]: expected a token id (an integer >= 0)", field, i);
        (*ids)[i] = (int)v;
    }
    *n = m;
    return da_ok();
}

/* "prompt": a string, token ids, or a list of either. */
static da_status parse_prompt(srv_request *r, const str_lens *L, const cJSON *p) {
    if (!p) return da_errorf("prompt: missing (a string, or a list of token ids)");
    const int list = cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child));
    const int n = list ? cJSON_GetArraySize(p) : 1;
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return da_errorf("prompt: expected a string, a list of token ids, or a list of those");
    if (n > SRV_MAX_CHOICES) return da_errorf("prompt: %d prompts in one request; at most %d", n, SRV_MAX_CHOICES);
    r->prompts = calloc((size_t)n, sizeof *r->prompts);
    if (!r->prompts) return da_errorf("out of memory");
    r->n_prompts = n;
    const cJSON *e = list ? p->child : p;
    for (int i = 0; i < n; i++, e = e->next) {
        char field[32];
        snprintf(field, sizeof field, list ? "prompt[%d]" : "prompt", i);
        if (cJSON_IsString(e)) {
            da_status st = dup_text(L, e, &r->prompts[i].text, &r->prompts[i].n_text);
            if (st.code) return st;
        } else if (cJSON_IsArray(e)) {
            da_status st = parse_ids(e, field, &r->prompts[i].ids, &r->prompts[i].n_ids);
            if (st.code) return st;
            if (!r->prompts[i].n_ids) return da_errorf("%s: an empty list of token ids", field);
        } else {
            return da_errorf("%s: expected a string or a list of token ids", field);
        }
    }
    return da_ok();
}

/* The content of a message: a string, or OpenAI's list of {"type":"text","text":...} parts. */
static da_status parse_content(const str_lens *L, const cJSON *c, int i, char **out, size_t *n) {
    if (cJSON_IsString(c)) return dup_text(L, c, out, n);
    *n = 0;
    if (cJSON_IsNull(c) || !c) return (*out = dup_n("", 0)) ? da_ok() : da_errorf("out of memory");
    if (!cJSON_IsArray(c)) return da_errorf("messages[%d].content: expected a string or a list of text parts", i);
    size_t len = 0;
    int k = 0;
    for (const cJSON *p = c->child; p; p = p->next, k++) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text"),
                    *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "text") &&
                      len_of(L, type->valuestring) == 4))
            return da_errorf("messages[%d].content[%d].type: only \"text\" parts are read (this model takes text)", i, k);
        if (!cJSON_IsString(t)) return da_errorf("messages[%d].content[%d]: each part needs a string \"text\"", i, k);
        len += len_of(L, t->valuestring);
    }
    if (!(*out = malloc(len + 1))) return da_errorf("out of memory");
    for (const cJSON *p = c->child; p; p = p->next) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        const size_t m = len_of(L, t);
        memcpy(*out + *n, t, m);
        *n += m;
    }
    (*out)[*n] = 0;
    return da_ok();
}

/* A string anywhere in the tree from o holding a NUL: cJSON would read only its first part. */
static const char *nul_string(const str_lens *L, const cJSON *o) {
    for (const cJSON *e = o; e; e = e->next) {
        if (cJSON_IsString(e) && len_of(L, e->valuestring) != strlen(e->valuestring)) return e->valuestring;
        const char *in = e->child ? nul_string(L, e->child) : NULL;
        if (in) return in;
    }
    return NULL;
}

/* An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}], the
 * arguments a JSON string (OpenAI's form) or an object. */
static da_status parse_tool_calls(const str_lens *L, srv_message *msg, const cJSON *calls, int i) {
    if (!calls || cJSON_IsNull(calls)) return da_ok();
    if (!cJSON_IsArray(calls)) return da_errorf("messages[%d].tool_calls: expected a list of tool calls", i);
    if (strcmp(msg->role, "assistant") && calls->child)
        return da_errorf("messages[%d].tool_calls: only assistant messages carry tool calls", i);
    const int n = cJSON_GetArraySize(calls);
    if (!n) return da_ok();
    if (!(msg->tool_calls = calloc((size_t)n, sizeof *msg->tool_calls))) return da_errorf("out of memory");
    int k = 0;
    for (const cJSON *c = calls->child; c; c = c->next, k++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type"), *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name"), *args = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (type && !(cJSON_IsString(type) && !strcmp(type->valuestring, "function")))
            return da_errorf("messages[%d].tool_calls[%d].type: expected \"function\"", i, k);
        if (!cJSON_IsObject(f) || !cJSON_IsString(name) || !name->valuestring[0])
            return da_errorf("messages[%d].tool_calls[%d].function: expected {\"name\", \"arguments\"}", i, k);
        if (!cJSON_IsString(args) && !cJSON_IsObject(args))
            return da_errorf("messages[%d].tool_calls[%d].function.arguments: expected a JSON string (or an object)", i, k);
        if (nul_string(L, f->child))
            return da_errorf("messages[%d].tool_calls[%d].function: a string holds a NUL character", i, k);
        srv_tool_call *tc = &msg->tool_calls[k];
        msg->n_tool_calls = k + 1;
        tc->name = dup_n(name->valuestring, strlen(name->valuestring));
        tc->arguments = cJSON_IsString(args) ? dup_n(args->valuestring, strlen(args->valuestring)) : NULL;
        tc->arguments_json = srv_tojson(args, 0);
        if (!tc->name || !tc->arguments_json || (cJSON_IsString(args) && !tc->arguments)) return da_errorf("out of memory");
    }
    return da_ok();
}

static da_status parse_messages(srv_request *r, const str_lens *L, const cJSON *m) {
    if (!cJSON_IsArray(m) || !m->child) return da_errorf("messages: expected a non-empty list of {role, content}");
    const int n = cJSON_GetArraySize(m);
    r->messages = calloc((size_t)n, sizeof *r->messages);
    if (!r->messages) return da_errorf("out of memory");
    int i = 0;
    for (const cJSON *e = m->child; e; e = e->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
        if (!cJSON_IsObject(e) || !cJSON_IsString(role))
            return da_errorf("messages[%d].role: expected a string (system, user or assistant)", i);
        r->n_messages = i + 1; /* from here srv_request_free frees message i, whatever fails next */
        char field[40];
        snprintf(field, sizeof field, "messages[%d].role", i);
        da_status st = dup_name(L, role, field, &r->messages[i].role);
        if (!st.code)
            st = parse_content(L, cJSON_GetObjectItemCaseSensitive(e, "content"), i, &r->messages[i].content,
                               &r->messages[i].n_content);
        if (!st.code) st = parse_tool_calls(L, &r->messages[i], cJSON_GetObjectItemCaseSensitive(e, "tool_calls"), i);
        if (st.code) return st;
    }
    return da_ok();
}

/* A number field in [lo, hi], or its default when absent or null. */
static da_status get_num(const cJSON *o, const char *key, double lo, double hi, int integer, double *v) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!e || cJSON_IsNull(e)) return da_ok();
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= lo && e->valuedouble <= hi) ||
        (integer && e->valuedouble != floor(e->valuedouble)))
        return integer ? da_errorf("%s: expected an integer in [%.0f, %.0f]", key, lo, hi)
                       : da_errorf("%s: expected a number in [%g, %g]", key, lo, hi);
    *v = e->valuedouble;
    return da_ok();
}

static da_status get_bool(const cJSON *o, const char *key, int *v) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!e || cJSON_IsNull(e)) return da_ok();
    if (!cJSON_IsBool(e)) return da_errorf("%s: expected true or false", key);
    *v = cJSON_IsTrue(e);
    return da_ok();
}

static da_status parse_stop(srv_request *r, const str_lens *L, const cJSON *s) {
    if (!s || cJSON_IsNull(s)) return da_ok();
    const int list = cJSON_IsArray(s);
    if (!list && !cJSON_IsString(s)) return da_errorf("stop: expected a string or a list of up to 4 strings");
    if (list && cJSON_GetArraySize(s) > SRV_MAX_STOP) return da_errorf("stop: at most %d strings", SRV_MAX_STOP);
    for (const cJSON *e = list ? s->child : s; e; e = list ? e->next : NULL) {
        if (!cJSON_IsString(e) || !len_of(L, e->valuestring)) return da_errorf("stop: each entry must be a non-empty string");
        da_status st = dup_text(L, e, &r->stop[r->n_stop], &r->stop_len[r->n_stop]);
        if (st.code) return st;
        r->n_stop++;
    }
    return da_ok();
}

/* OpenAI's stream_options: include_usage, a last chunk with the usage and no choices. OpenAI refuses
 * it without stream; include_usage false without stream stays accepted, as it changes nothing. */
static da_status parse_stream_options(srv_request *r, const cJSON *o) {
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(o, "stream_options");
    if (!so || cJSON_IsNull(so)) return da_ok();
    if (!cJSON_IsObject(so)) return da_errorf("stream_options: expected an object such as {\"include_usage\": true}");
    for (const cJSON *e = so->child; e; e = e->next)
        if (strcmp(e->string, "include_usage"))
            return da_errorf("stream_options.%s: not implemented by this server; include_usage is", e->string);
    da_status st = get_bool(so, "include_usage", &r->include_usage);
    if (st.code) return da_errorf("stream_options.include_usage: expected true or false");
    if (r->include_usage && !r->stream)
        return da_errorf("stream_options: only with stream: true (a whole answer always has its usage)");
    return da_ok();
}

/* The fields every generating endpoint shares. */
static da_status parse_sampling(srv_request *r, const str_lens *L, const cJSON *o) {
    double v;
    da_status st;
    v = -1;
    if ((st = get_num(o, "max_tokens", 0, 1 << 30, 1, &v)).code) return st;
    if (r->kind == SRV_CHAT) { /* OpenAI's newer name; both given must agree */
        double w = v;
        if ((st = get_num(o, "max_completion_tokens", 0, 1 << 30, 1, &w)).code) return st;
        if (v != -1 && w != v)
            return da_errorf("max_completion_tokens: %.0f, but max_tokens says %.0f: send one", w, v);
        v = w;
    }
    r->max_tokens = (int)v;
    v = 1.0;
    if ((st = get_num(o, "temperature", 0, 100, 0, &v)).code) return st;
    r->temperature = (float)v;
    v = 1.0;
    if ((st = get_num(o, "top_p", 0, 1, 0, &v)).code) return st;
    r->top_p = (float)v;
    v = -1;
    if ((st = get_num(o, "seed", -9007199254740991.0, 9007199254740991.0, 1, &v)).code) return st;
    r->has_seed = v != -1 || cJSON_GetObjectItemCaseSensitive(o, "seed") != NULL;
    r->seed = (uint64_t)(int64_t)v;
    v = 1;
    if ((st = get_num(o, "n", 1, SRV_MAX_CHOICES, 1, &v)).code) return st;
    r->n_choices = (int)v;
    const int prompts = r->kind == SRV_CHAT ? 1 : r->n_prompts;
    if ((long)prompts * r->n_choices > SRV_MAX_CHOICES)
        return da_errorf("n: %d choices of %d prompts are %ld sequences; at most %d", r->n_choices, prompts,
                         (long)prompts * r->n_choices, SRV_MAX_CHOICES);
    if ((st = get_bool(o, "stream", &r->stream)).code) return st;
    if (r->stream && r->n_choices > 1) return da_errorf("n: %d choices are answered without streaming (stream: false)", r->n_choices);
    if (r->stream && prompts > 1) return da_errorf("stream: a list of prompts is answered without streaming");
    if (r->stream && r->logprobs >= 0)
        return da_errorf("logprobs: not sent in streams; ask without streaming (stream: false) for log-probabilities");
    if ((st = parse_stream_options(r, o)).code) return st;
    if ((st = get_bool(o, "cache_prompt", &r->cache_prompt)).code) return st;
    if ((st = get_bool(o, "ignore_eos", &r->ignore_eos)).code) return st;
    return parse_stop(r, L, cJSON_GetObjectItemCaseSensitive(o, "stop"));
}

/* "logprobs": completions take a number of alternatives (0..20); chat takes
 * true/false with "top_logprobs". */
static da_status parse_logprobs(srv_request *r, const cJSON *o) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "logprobs");
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(o, "top_logprobs");
    r->logprobs = -1;
    if (r->kind == SRV_CHAT && top && !cJSON_IsNull(top) && !cJSON_IsTrue(e))
        return da_errorf("top_logprobs: needs \"logprobs\": true");
    if (!e || cJSON_IsNull(e)) return da_ok();
    if (r->kind == SRV_CHAT) {
        if (!cJSON_IsBool(e)) return da_errorf("logprobs: expected true or false (chat completions)");
        if (!cJSON_IsTrue(e)) return da_ok();
        double v = 0;
        da_status st = get_num(o, "top_logprobs", 0, SRV_MAX_LOGPROBS, 1, &v);
        r->logprobs = (int)v;
        return st;
    }
    double v = -1;
    da_status st = get_num(o, "logprobs", 0, SRV_MAX_LOGPROBS, 1, &v);
    r->logprobs = (int)v;
    return st;
}

/* OpenAI's fields (and llama.cpp's and vLLM's common ones) that change an answer and that this server does not
 * implement: taken at their neutral value, refused otherwise, so that no client gets an answer that silently
 * differs from what it asked. */
typedef enum { NEUTRAL_NUMBER, NEUTRAL_EMPTY, NEUTRAL_NO_TOOL } neutral_kind;
static const struct {
    const char *key;
    neutral_kind kind;
    double value, value2; /* NEUTRAL_NUMBER: either value is neutral */
    int chat_only;
} unimplemented[] = {
    {"best_of", NEUTRAL_NUMBER, 1, 1, 0},
    {"presence_penalty", NEUTRAL_NUMBER, 0, 0, 0},
    {"frequency_penalty", NEUTRAL_NUMBER, 0, 0, 0},
    {"repetition_penalty", NEUTRAL_NUMBER, 1, 1, 0},
    {"top_k", NEUTRAL_NUMBER, 0, -1, 0},
    {"min_p", NEUTRAL_NUMBER, 0, 0, 0},
    {"min_tokens", NEUTRAL_NUMBER, 0, 0, 0},
    {"logit_bias", NEUTRAL_EMPTY, 0, 0, 0},
    {"suffix", NEUTRAL_EMPTY, 0, 0, 0},
    {"functions", NEUTRAL_EMPTY, 0, 0, 1},
    {"function_call", NEUTRAL_NO_TOOL, 0, 0, 1},
    {"grammar", NEUTRAL_EMPTY, 0, 0, 0},
};

static int is_neutral(const cJSON *e, neutral_kind kind, double v1, double v2) {
    if (!e || cJSON_IsNull(e)) return 1;
    switch (kind) {
    case NEUTRAL_NUMBER: return cJSON_IsNumber(e) && (e->valuedouble == v1 || e->valuedouble == v2);
    case NEUTRAL_EMPTY:
        return ((cJSON_IsObject(e) || cJSON_IsArray(e)) && !e->child) || (cJSON_IsString(e) && !e->valuestring[0]);
    case NEUTRAL_NO_TOOL:
        return cJSON_IsString(e) && (!strcmp(e->valuestring, "none") || !strcmp(e->valuestring, "auto"));
    }
    return 0;
}

static da_status check_unimplemented(const srv_request *r, const cJSON *o) {
    for (size_t i = 0; i < sizeof unimplemented / sizeof unimplemented[0]; i++) {
        if (unimplemented[i].chat_only && r->kind != SRV_CHAT) continue;
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, unimplemented[i].key);
        if (!is_neutral(e, unimplemented[i].kind, unimplemented[i].value, unimplemented[i].value2))
            return da_errorf("%s: not implemented by this server; leave it out (docs/serving.md lists the fields "
                             "read)",
                             unimplemented[i].key);
    }
    return da_ok();
}

/* The schema at `where`: compiled once to check it (a keyword outside the subset is refused by name), kept as text
 * for the jobs, which each compile their own. */
static da_status take_schema(srv_request *r, const str_lens *L, const cJSON *schema, const char *where) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema)) return da_errorf("%s: expected a JSON schema (an object)", where);
    if (cJSON_IsObject(schema) && schema->child && nul_string(L, schema->child))
        return da_errorf("%s: a string holds a NUL character, which the schema cannot hold here", where);
    da_json_schema *s = NULL;
    da_status st = da_json_schema_compile(&s, schema, where);
    da_json_schema_free(s);
    if (st.code) return st;
    r->json = SRV_JSON_SCHEMA;
    return (r->schema_json = cJSON_PrintUnformatted(schema)) ? da_ok() : da_errorf("out of memory");
}

/* OpenAI's response_format ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema",
 * "strict", "description"}}) and llama-server's "json_schema" (a schema). */
static da_status parse_format(srv_request *r, const str_lens *L, const cJSON *o) {
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(o, "json_schema");
    if (js && !cJSON_IsNull(js)) {
        if (rf && !cJSON_IsNull(rf)) return da_errorf("json_schema: give response_format or json_schema, not both");
        return take_schema(r, L, js, "json_schema");
    }
    if (!rf || cJSON_IsNull(rf)) return da_ok();
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsObject(rf) || !cJSON_IsString(type))
        return da_errorf("response_format: expected {\"type\": \"text\" | \"json_object\" | \"json_schema\", ...}");
    const char *t = type->valuestring;
    for (const cJSON *k = rf->child; k; k = k->next)
        if (strcmp(k->string, "type") && !(!strcmp(t, "json_schema") && !strcmp(k->string, "json_schema")) &&
            !(!strcmp(t, "json_object") && !strcmp(k->string, "schema")))
            return da_errorf("response_format.%s: not read with type \"%s\"", k->string, t);
    if (!strcmp(t, "text")) return da_ok();
    if (!strcmp(t, "json_object")) { /* llama-server's json_object may carry a schema */
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(rf, "schema");
        if (schema) return take_schema(r, L, schema, "response_format.schema");
        r->json = SRV_JSON_OBJECT;
        return da_ok();
    }
    if (strcmp(t, "json_schema"))
        return da_errorf("response_format.type: \"%.40s\" is not one of text, json_object, json_schema", t);
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!cJSON_IsObject(w)) return da_errorf("response_format.json_schema: expected {\"name\", \"schema\", \"strict\"}");
    for (const cJSON *k = w->child; k; k = k->next) {
        const int known = !strcmp(k->string, "name") || !strcmp(k->string, "schema") || !strcmp(k->string, "strict") ||
                          !strcmp(k->string, "description");
        if (!known) return da_errorf("response_format.json_schema.%s: not a field of json_schema", k->string);
    }
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(w, "strict");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return da_errorf("response_format.json_schema.strict: expected true or false (answers fit the schema either way)");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(w, "schema");
    if (!schema) return da_errorf("response_format.json_schema.schema: missing (the JSON schema answers must fit)");
    return take_schema(r, L, schema, "response_format.json_schema.schema");
}

/* "tools": [{"type": "function", "function": {"name", "description", "parameters"}}]; each kept as the template
 * writes it. A parameters schema is compiled when decoding is constrained to it (serve/tools.c), not here: with
 * "auto" the model only reads it. */
static da_status parse_tools(srv_request *r, const str_lens *L, const cJSON *t) {
    if (!t || cJSON_IsNull(t)) return da_ok();
    if (!cJSON_IsArray(t)) return da_errorf("tools: expected a list of {\"type\": \"function\", \"function\": {...}}");
    const int n = cJSON_GetArraySize(t);
    if (!n) return da_ok();
    if (!(r->tools = calloc((size_t)n, sizeof *r->tools))) return da_errorf("out of memory");
    int i = 0;
    for (const cJSON *e = t->child; e; e = e->next, i++) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "type"), *f = cJSON_GetObjectItemCaseSensitive(e, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name"), *desc = cJSON_GetObjectItemCaseSensitive(f, "description"),
                    *params = cJSON_GetObjectItemCaseSensitive(f, "parameters");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
            return da_errorf("tools[%d].type: expected \"function\" (the only kind of tool)", i);
        if (!cJSON_IsObject(f)) return da_errorf("tools[%d].function: expected {\"name\", \"description\", \"parameters\"}", i);
        if (!cJSON_IsString(name) || !name->valuestring[0] || strlen(name->valuestring) > 64 ||
            strspn(name->valuestring, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") !=
                strlen(name->valuestring))
            return da_errorf("tools[%d].function.name: expected 1 to 64 letters, digits, '_', '-' or '.'", i);
        if (desc && !cJSON_IsString(desc)) return da_errorf("tools[%d].function.description: expected a string", i);
        if (params && !cJSON_IsObject(params))
            return da_errorf("tools[%d].function.parameters: expected a JSON schema (an object)", i);
        if (nul_string(L, e->child)) return da_errorf("tools[%d]: a string holds a NUL character", i);
        for (int k = 0; k < i; k++)
            if (!strcmp(r->tools[k].name, name->valuestring))
                return da_errorf("tools[%d].function.name: \"%s\" is also tools[%d]'s; names must differ", i,
                                 name->valuestring, k);
        srv_tool *tool = &r->tools[i];
        r->n_tools = i + 1;
        tool->name = dup_n(name->valuestring, strlen(name->valuestring));
        tool->tojson = srv_tojson(e, 0);
        tool->tojson_indent = srv_tojson(e, 4);
        tool->parameters = params ? cJSON_PrintUnformatted(params) : NULL;
        if (!tool->name || !tool->tojson || !tool->tojson_indent || (params && !tool->parameters))
            return da_errorf("out of memory");
    }
    return da_ok();
}

/* "tool_choice": "none", "auto", "required", or {"type": "function", "function": {"name"}}. */
static da_status parse_tool_choice(srv_request *r, const cJSON *o) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "tool_choice");
    r->tool_choice = r->n_tools ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
    if (!c || cJSON_IsNull(c)) return da_ok();
    if (cJSON_IsString(c)) {
        const char *v = c->valuestring;
        if (!strcmp(v, "none")) r->tool_choice = SRV_TOOLS_NONE;
        else if (!strcmp(v, "auto")) r->tool_choice = r->n_tools ? SRV_TOOLS_AUTO : SRV_TOOLS_NONE;
        else if (!strcmp(v, "required")) r->tool_choice = SRV_TOOLS_REQUIRED;
        else return da_errorf("tool_choice: \"%.40s\" is not one of none, auto, required (or {\"type\": \"function\", ...})", v);
    } else {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type"), *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (!cJSON_IsObject(c) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name))
            return da_errorf("tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                             "\"function\": {\"name\": ...}}");
        r->tool_choice = SRV_TOOLS_NAMED;
        r->tool_named = -1;
        for (int k = 0; k < r->n_tools; k++)
            if (!strcmp(r->tools[k].name, name->valuestring)) r->tool_named = k;
        if (r->tool_named < 0)
            return da_errorf("tool_choice.function.name: \"%.64s\" is not one of the tools' names", name->valuestring);
    }
    if (r->tool_choice >= SRV_TOOLS_REQUIRED && !r->n_tools)
        return da_errorf("tool_choice: \"required\" needs \"tools\" (a non-empty list)");
    if (r->tool_choice >= SRV_TOOLS_REQUIRED && r->json != SRV_JSON_NONE)
        return da_errorf("tool_choice: a required tool call is its own JSON; leave out response_format/json_schema");
    return da_ok();
}

static da_status parse_object(srv_request *r, const str_lens *L, const cJSON *o) {
    da_status st;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model)) return da_errorf("model: expected a string (see GET /v1/models)");
        if ((st = dup_name(L, model, "model", &r->model)).code) return st;
    }
    switch (r->kind) {
    case SRV_COMPLETION:
        if ((st = parse_prompt(r, L, cJSON_GetObjectItemCaseSensitive(o, "prompt"))).code) return st;
        if ((st = get_bool(o, "echo", &r->echo)).code) return st;
        if ((st = parse_logprobs(r, o)).code) return st;
        if ((st = check_unimplemented(r, o)).code) return st;
        if ((st = parse_format(r, L, o)).code) return st;
        return parse_sampling(r, L, o);
    case SRV_CHAT:
        if ((st = parse_messages(r, L, cJSON_GetObjectItemCaseSensitive(o, "messages"))).code) return st;
        if ((st = parse_logprobs(r, o)).code) return st;
        if ((st = check_unimplemented(r, o)).code) return st;
        if ((st = parse_format(r, L, o)).code) return st;
        if ((st = parse_tools(r, L, cJSON_GetObjectItemCaseSensitive(o, "tools"))).code) return st;
        if ((st = parse_tool_choice(r, o)).code) return st;
        return parse_sampling(r, L, o);
    case SRV_TOKENIZE: {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages"), *content;
        if (m) st = parse_messages(r, L, m);
        else if (!cJSON_IsString(content = cJSON_GetObjectItemCaseSensitive(o, "content")))
            return da_errorf("content: expected a string (or \"messages\": a chat to render with the template)");
        else if (!(r->prompts = calloc(1, sizeof *r->prompts))) return da_errorf("out of memory");
        else {
            r->n_prompts = 1;
            st = dup_text(L, content, &r->prompts->text, &r->prompts->n_text);
        }
        if (st.code) return st;
        if (m && (st = parse_tools(r, L, cJSON_GetObjectItemCaseSensitive(o, "tools"))).code) return st;
        if (m && cJSON_GetObjectItemCaseSensitive(o, "add_special"))
            return da_errorf("add_special: not read with \"messages\" (the template's own special tokens are kept)");
        r->add_special = 1;
        return get_bool(o, "add_special", &r->add_special);
    }
    case SRV_DETOKENIZE: {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tokens");
        if (!cJSON_IsArray(t)) return da_errorf("tokens: expected a list of token ids");
        return parse_ids(t, "tokens", &r->tokens, &r->n_tokens);
    }
    }
    return da_errorf("unknown request kind");
}

/* The lengths of o's strings and its keys checked, then its fields. */
static da_status parse_tree(srv_request *r, const cJSON *o, const char *body, const char *end) {
    str_lens L = {0};
    const char *p = body;
    if (collect(o, &L, &p, end)) {
        free(L.s);
        return da_errorf("out of memory");
    }
    if (L.n) qsort(L.s, L.n, sizeof *L.s, cmp_at); /* an object without strings has no table */
    int has_nul = 0, oom = 0;
    const char *bad = bad_key(o, &L, &has_nul, &oom);
    da_status st = oom             ? da_errorf("out of memory")
                   : bad && has_nul ? da_errorf("key \"%.80s\\u0000...\": a key holds a NUL character", bad)
                   : bad            ? da_errorf("%.80s: the key appears twice in one object (readers disagree on "
                                                "which one counts): send it once",
                                                bad)
                                    : parse_object(r, &L, o);
    free(L.s);
    return st;
}

da_status srv_request_parse(srv_request *r, srv_kind k, const char *body, size_t n) {
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->max_tokens = -1;
    r->logprobs = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->n_choices = 1;
    r->cache_prompt = 1;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, n, &end, 0);
    if (!o) {
        const size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return da_errorf("the body is not valid JSON (near byte %zu of %zu)", at, n);
    }
    da_status st = cJSON_IsObject(o) ? parse_tree(r, o, body, end && end >= body && end <= body + n ? end : body + n)
                                     : da_errorf("the body must be a JSON object");
    cJSON_Delete(o);
    return st;
}
