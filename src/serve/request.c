/* Request bodies: JSON through cJSON, every field type-checked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "serve/request.h"

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
    }
    free(r->messages);
    for (int i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->tokens);
    memset(r, 0, sizeof *r);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
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
static da_status parse_prompt(srv_request *r, const cJSON *p) {
    if (!p) return da_errorf("prompt: missing (a string, or a list of token ids)");
    const int list = cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child));
    const int n = list ? cJSON_GetArraySize(p) : 1;
    if (!cJSON_IsString(p) && !cJSON_IsArray(p))
        return da_errorf("prompt: expected a string, a list of token ids, or a list of those");
    if (n > 256) return da_errorf("prompt: %d prompts in one request; at most 256", n);
    r->prompts = calloc((size_t)n, sizeof *r->prompts);
    if (!r->prompts) return da_errorf("out of memory");
    r->n_prompts = n;
    const cJSON *e = list ? p->child : p;
    for (int i = 0; i < n; i++, e = e->next) {
        char field[32];
        snprintf(field, sizeof field, list ? "prompt[%d]" : "prompt", i);
        if (cJSON_IsString(e)) {
            if (!(r->prompts[i].text = dup_str(e->valuestring))) return da_errorf("out of memory");
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
static da_status parse_content(const cJSON *c, int i, char **out) {
    if (cJSON_IsString(c)) return (*out = dup_str(c->valuestring)) ? da_ok() : da_errorf("out of memory");
    if (cJSON_IsNull(c) || !c) return (*out = dup_str("")) ? da_ok() : da_errorf("out of memory");
    if (!cJSON_IsArray(c)) return da_errorf("messages[%d].content: expected a string or a list of text parts", i);
    size_t len = 0;
    for (const cJSON *p = c->child; p; p = p->next) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(t)) return da_errorf("messages[%d].content: each part needs a string \"text\"", i);
        len += strlen(t->valuestring);
    }
    if (!(*out = malloc(len + 1))) return da_errorf("out of memory");
    (*out)[0] = 0;
    for (const cJSON *p = c->child; p; p = p->next) strcat(*out, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    return da_ok();
}

static da_status parse_messages(srv_request *r, const cJSON *m) {
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
        if (!(r->messages[i].role = dup_str(role->valuestring))) return da_errorf("out of memory");
        da_status st = parse_content(cJSON_GetObjectItemCaseSensitive(e, "content"), i, &r->messages[i].content);
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

static da_status parse_stop(srv_request *r, const cJSON *s) {
    if (!s || cJSON_IsNull(s)) return da_ok();
    const int list = cJSON_IsArray(s);
    if (!list && !cJSON_IsString(s)) return da_errorf("stop: expected a string or a list of up to 4 strings");
    if (list && cJSON_GetArraySize(s) > SRV_MAX_STOP) return da_errorf("stop: at most %d strings", SRV_MAX_STOP);
    for (const cJSON *e = list ? s->child : s; e; e = list ? e->next : NULL) {
        if (!cJSON_IsString(e) || !e->valuestring[0]) return da_errorf("stop: each entry must be a non-empty string");
        if (!(r->stop[r->n_stop++] = dup_str(e->valuestring))) return da_errorf("out of memory");
    }
    return da_ok();
}

/* The fields every generating endpoint shares. */
static da_status parse_sampling(srv_request *r, const cJSON *o) {
    double v;
    da_status st;
    v = -1;
    if ((st = get_num(o, r->kind == SRV_CHAT && cJSON_GetObjectItemCaseSensitive(o, "max_completion_tokens")
                             ? "max_completion_tokens" : "max_tokens",
                      0, 1 << 30, 1, &v)).code)
        return st;
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
    if ((st = get_bool(o, "stream", &r->stream)).code) return st;
    if ((st = get_bool(o, "ignore_eos", &r->ignore_eos)).code) return st;
    return parse_stop(r, cJSON_GetObjectItemCaseSensitive(o, "stop"));
}

/* "logprobs": completions take a number of alternatives (0..20); chat takes
 * true/false with "top_logprobs". */
static da_status parse_logprobs(srv_request *r, const cJSON *o) {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(o, "logprobs");
    r->logprobs = -1;
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

static da_status parse_object(srv_request *r, const cJSON *o) {
    da_status st;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model");
    if (model && !cJSON_IsNull(model)) {
        if (!cJSON_IsString(model)) return da_errorf("model: expected a string (see GET /v1/models)");
        if (!(r->model = dup_str(model->valuestring))) return da_errorf("out of memory");
    }
    switch (r->kind) {
    case SRV_COMPLETION:
        if ((st = parse_prompt(r, cJSON_GetObjectItemCaseSensitive(o, "prompt"))).code) return st;
        if ((st = get_bool(o, "echo", &r->echo)).code) return st;
        if ((st = parse_logprobs(r, o)).code) return st;
        if (r->n_prompts > 1 && r->stream) return da_errorf("stream: a list of prompts is answered without streaming");
        return parse_sampling(r, o);
    case SRV_CHAT:
        if ((st = parse_messages(r, cJSON_GetObjectItemCaseSensitive(o, "messages"))).code) return st;
        if ((st = parse_logprobs(r, o)).code) return st;
        return parse_sampling(r, o);
    case SRV_TOKENIZE: {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages");
        if (m) st = parse_messages(r, m);
        else if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "content")))
            return da_errorf("content: expected a string (or \"messages\": a chat to render with the template)");
        else st = (r->prompts = calloc(1, sizeof *r->prompts)) && (r->n_prompts = 1) &&
                          (r->prompts->text = dup_str(cJSON_GetObjectItemCaseSensitive(o, "content")->valuestring))
                      ? da_ok() : da_errorf("out of memory");
        if (st.code) return st;
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

da_status srv_request_parse(srv_request *r, srv_kind k, const char *body, size_t n) {
    memset(r, 0, sizeof *r);
    r->kind = k;
    r->max_tokens = -1;
    r->logprobs = -1;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, n, &end, 0);
    if (!o) {
        const size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return da_errorf("the body is not valid JSON (near byte %zu of %zu)", at, n);
    }
    da_status st = cJSON_IsObject(o) ? parse_object(r, o) : da_errorf("the body must be a JSON object");
    cJSON_Delete(o);
    return st;
}
