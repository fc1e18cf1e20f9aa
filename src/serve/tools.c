/* Tool calls (serve/tools.h): the constraint of a required call, and the
 * parser of the calls the model writes. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "infer/json_schema.h"
#include "serve/tools.h"

const char *srv_tools_opening(srv_template t) { return t == SRV_TMPL_CHATML ? "<tool_call>\n" : ""; }

/* The key the template's call holds the arguments under. */
static const char *args_key(srv_template t) { return t == SRV_TMPL_LLAMA31 ? "parameters" : "arguments"; }

/* {"type": "object", "properties": {"name": {"const": NAME}, ARGS: PARAMETERS}, "required": [...],
 * "additionalProperties": false}; NULL when out of memory or the parameters do not parse. */
static cJSON *call_schema(const srv_tool *tool, srv_template t) {
    cJSON *s = cJSON_CreateObject(), *props = cJSON_CreateObject(), *name = cJSON_CreateObject();
    cJSON *params = tool->parameters ? cJSON_Parse(tool->parameters) : cJSON_CreateObject();
    const char *req[2] = {"name", args_key(t)};
    if (params && !tool->parameters) cJSON_AddStringToObject(params, "type", "object");
    if (!s || !props || !name || !params) {
        cJSON_Delete(s), cJSON_Delete(props), cJSON_Delete(name), cJSON_Delete(params);
        return NULL;
    }
    cJSON_AddStringToObject(s, "type", "object");
    cJSON_AddStringToObject(name, "const", tool->name);
    cJSON_AddItemToObject(props, "name", name);
    cJSON_AddItemToObject(props, args_key(t), params);
    cJSON_AddItemToObject(s, "properties", props);
    cJSON_AddItemToObject(s, "required", cJSON_CreateStringArray(req, 2));
    cJSON_AddFalseToObject(s, "additionalProperties");
    return s;
}

da_status srv_tools_constraint(const srv_request *r, srv_template t, char **schema_json) {
    *schema_json = NULL;
    if (r->tool_choice != SRV_TOOLS_REQUIRED && r->tool_choice != SRV_TOOLS_NAMED) return da_ok();
    cJSON *s;
    if (r->tool_choice == SRV_TOOLS_NAMED || r->n_tools == 1) {
        s = call_schema(&r->tools[r->tool_choice == SRV_TOOLS_NAMED ? r->tool_named : 0], t);
    } else {
        s = cJSON_CreateObject();
        cJSON *any = s ? cJSON_AddArrayToObject(s, "anyOf") : NULL;
        for (int k = 0; any && k < r->n_tools; k++) {
            cJSON *one = call_schema(&r->tools[k], t);
            if (!one) any = NULL;
            else cJSON_AddItemToArray(any, one);
        }
        if (!any) cJSON_Delete(s), s = NULL;
    }
    if (!s) return da_errorf("out of memory");
    da_json_schema *compiled = NULL;
    da_status st = da_json_schema_compile(&compiled, s, "tools[].function.parameters");
    da_json_schema_free(compiled);
    if (!st.code && !(*schema_json = cJSON_PrintUnformatted(s))) st = da_errorf("out of memory");
    cJSON_Delete(s);
    if (st.code) {
        da_status e = da_errorf("tool_choice: the call cannot be constrained: %s", st.msg);
        return e;
    }
    return da_ok();
}

void srv_parsed_calls_free(srv_parsed_call *calls, int n) {
    for (int i = 0; calls && i < n; i++) {
        free(calls[i].name);
        free(calls[i].arguments);
    }
    free(calls);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_space(const char *s, size_t i, size_t n) {
    while (i < n && is_space(s[i])) i++;
    return i;
}

/* Just past the JSON string that starts at s[i] == '"'; 0 when s ends first. */
static size_t string_end(const char *s, size_t i, size_t n) {
    for (i++; i < n; i++) {
        if (s[i] == '\\') i++;
        else if (s[i] == '"') return i + 1;
    }
    return 0;
}

/* Just past the JSON value that starts at s[i]; 0 when s ends first (a number could go on). */
static size_t value_end(const char *s, size_t i, size_t n) {
    if (s[i] == '"') return string_end(s, i, n);
    if (s[i] == '{' || s[i] == '[') {
        for (int depth = 0; i < n;) {
            if (s[i] == '"') {
                if (!(i = string_end(s, i, n))) return 0;
                continue;
            }
            if (s[i] == '{' || s[i] == '[') depth++;
            else if ((s[i] == '}' || s[i] == ']') && --depth == 0) return i + 1;
            i++;
        }
        return 0;
    }
    while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && !is_space(s[i])) i++;
    return i < n ? i : 0;
}

static int key_is(const char *s, size_t lo, size_t hi, const char *key) {
    return hi - lo == strlen(key) + 2 && !memcmp(s + lo + 1, key, strlen(key));
}

void srv_tools_scan_call(srv_template t, const char *s, size_t lo, size_t n, srv_call_scan *c) {
    memset(c, 0, sizeof *c);
    size_t i = skip_space(s, lo, n);
    if (i == n) return;
    if (s[i] != '{') {
        c->bad = 1;
        return;
    }
    i = skip_space(s, i + 1, n);
    if (i < n && s[i] == '}') c->end = i + 1;
    while (i < n && !c->end) {
        size_t k = s[i] == '"' ? string_end(s, i, n) : 0, v = k ? skip_space(s, k, n) : 0;
        if (s[i] != '"' || (v < n && k && s[v] != ':')) c->bad = 1;
        if (!k || v == n || c->bad || (v = skip_space(s, v + 1, n)) == n) return;
        const size_t e = value_end(s, v, n);
        if (key_is(s, i, k, "name") && s[v] == '"') {
            c->name_lo = e ? v : 0, c->name_hi = e;
        } else if (key_is(s, i, k, "arguments") || (t == SRV_TMPL_LLAMA31 && key_is(s, i, k, "parameters"))) {
            c->args_lo = v, c->args_hi = e ? e : n, c->args_whole = e != 0;
        }
        if (!e || (i = skip_space(s, e, n)) == n) return;
        if (s[i] == '}') c->end = i + 1;
        else if (s[i] != ',') c->bad = 1;
        else i = skip_space(s, i + 1, n);
    }
}

/* One call's JSON text[0..n) (surrounding whitespace allowed): {"name": one of the tools, ARGS: {...}} into *c.
 * 1 when it is one, 0 when not, -1 when out of memory. */
static int read_call(const srv_request *r, srv_template t, const char *text, size_t n, srv_parsed_call *c) {
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(text, n, &end, 0);
    while (o && end && end < text + n && is_space(*end)) end++;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, args_key(t));
    if (!args && t == SRV_TMPL_LLAMA31) args = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    int known = 0;
    for (int k = 0; cJSON_IsString(name) && k < r->n_tools; k++) known |= !strcmp(r->tools[k].name, name->valuestring);
    int ok = cJSON_IsObject(o) && end == text + n && known && cJSON_IsObject(args) && cJSON_GetArraySize(o) == 2;
    srv_call_scan at;
    if (ok) srv_tools_scan_call(t, text, 0, n, &at);
    if (ok) {
        c->name = strdup(name->valuestring);
        c->arguments = at.args_whole ? strndup(text + at.args_lo, at.args_hi - at.args_lo) : NULL;
        if (!c->name || !c->arguments) ok = -1;
    }
    cJSON_Delete(o);
    return ok;
}

static const char *find(const char *s, size_t n, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

int srv_tools_parse(const srv_request *r, srv_template t, int forced, const char *text, size_t n,
                    srv_parsed_call **calls, size_t *content_len) {
    *calls = NULL;
    *content_len = n;
    if (r->tool_choice == SRV_TOOLS_NONE || (t != SRV_TMPL_CHATML && t != SRV_TMPL_LLAMA31)) return 0;
    int cap = 4, count = 0, ok = 1;
    if (!(*calls = calloc((size_t)cap, sizeof **calls))) return -1;
    if (forced || t == SRV_TMPL_LLAMA31) {
        size_t lo = 0;
        while (!forced && lo < n && is_space(text[lo])) lo++;
        const char *tag = "<|python_tag|>";
        if (!forced && n - lo >= strlen(tag) && !memcmp(text + lo, tag, strlen(tag))) lo += strlen(tag);
        ok = read_call(r, t, text + lo, n - lo, &(*calls)[0]);
        count = ok == 1;
        if (count) *content_len = 0;
    } else { /* ChatML: <tool_call> blocks, only whitespace between and after them */
        const char *open = find(text, n, "<tool_call>"), *at = open;
        while (at && ok == 1) {
            const char *body = at + strlen("<tool_call>");
            const char *close = find(body, n - (size_t)(body - text), "</tool_call>");
            if (!close) break;
            if (count == cap) {
                srv_parsed_call *grown = realloc(*calls, (size_t)(cap *= 2) * sizeof **calls);
                if (!grown) {
                    ok = -1;
                    break;
                }
                *calls = grown;
                memset(*calls + count, 0, (size_t)(cap - count) * sizeof **calls);
            }
            ok = read_call(r, t, body, (size_t)(close - body), &(*calls)[count]);
            count += ok == 1;
            at = close + strlen("</tool_call>");
            while (at < text + n && is_space(*at)) at++;
            if (at == text + n) break;
            if ((size_t)(text + n - at) < strlen("<tool_call>") || memcmp(at, "<tool_call>", strlen("<tool_call>"))) ok = 0;
        }
        if (ok == 1 && count && at == text + n) {
            size_t c = (size_t)(open - text);
            while (c > 0 && is_space(text[c - 1])) c--;
            *content_len = c;
        } else if (ok != -1) {
            ok = 0;
        }
    }
    if (ok != 1 || !count) {
        srv_parsed_calls_free(*calls, count);
        *calls = NULL;
        *content_len = n;
        return ok < 0 ? -1 : 0;
    }
    return count;
}
