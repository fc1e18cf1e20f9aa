/* Tool calls streamed as the model writes them (serve/tool_stream.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/reply.h"
#include "serve/tool_stream.h"
#include "serve/tools.h"

static const char CHATML_OPEN[] = "<tool_call>", CHATML_CLOSE[] = "</tool_call>", PYTHON_TAG[] = "<|python_tag|>";

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t trim_end(const char *s, size_t lo, size_t hi) {
    while (hi > lo && is_space(s[hi - 1])) hi--;
    return hi;
}

static const char *find(const char *s, size_t n, const char *needle) {
    const size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++)
        if (!memcmp(s + i, needle, k)) return s + i;
    return NULL;
}

/* s[0..n) against the start of a Llama 3.1 call, {"name" (or "parameters", "arguments"): 2 when it begins so,
 * 1 when it may still, 0 when it cannot. */
static int llama_call_start(const char *s, size_t n) {
    if (!n) return 1;
    if (s[0] != '{') return 0;
    size_t i = 1;
    while (i < n && is_space(s[i])) i++;
    if (i == n) return 1;
    if (s[i] != '"') return 0;
    static const char *const keys[] = {"name\"", "parameters\"", "arguments\""};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const size_t len = strlen(keys[k]), m = n - i - 1 < len ? n - i - 1 : len;
        if (!memcmp(s + i + 1, keys[k], m)) return m == len ? 2 : 1;
    }
    return 0;
}

size_t srv_tool_stream_sendable(srv_template t, int first, const char *text, size_t lo, size_t n, size_t *marker,
                                size_t *call) {
    *marker = *call = n;
    if (t == SRV_TMPL_LLAMA31) {
        if (!first) return trim_end(text, lo, n);
        size_t i = lo;
        while (i < n && is_space(text[i])) i++;
        const size_t tag = strlen(PYTHON_TAG), m = n - i < tag ? n - i : tag;
        if (!memcmp(text + i, PYTHON_TAG, m)) {
            if (m == tag) *marker = i, *call = i + tag;
            return lo;
        }
        const int start = llama_call_start(text + i, n - i);
        if (start == 2) *marker = *call = i;
        return start ? lo : n;
    }
    const char *open = find(text + lo, n - lo, CHATML_OPEN);
    if (open) {
        *marker = (size_t)(open - text), *call = *marker + strlen(CHATML_OPEN);
        return trim_end(text, lo, *marker);
    }
    size_t k = strlen(CHATML_OPEN) - 1;
    while (k > 0 && (n - lo < k || memcmp(text + n - k, CHATML_OPEN, k))) k--;
    return trim_end(text, lo, n - k);
}

void srv_tool_stream_init(srv_tool_stream *ts, srv_template t, int forced, const char *answer_id) {
    memset(ts, 0, sizeof *ts);
    ts->t = t, ts->forced = forced;
    snprintf(ts->answer_id, sizeof ts->answer_id, "%s", answer_id);
    if (forced) ts->in_call = 1, ts->open = 1;
}

/* {"tool_calls": [{"index": k, "function": {}}]} into deltas: the call's object, its function in *f. */
static cJSON *call_delta(cJSON *deltas, int k, cJSON **f) {
    cJSON *d = cJSON_CreateObject(), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(deltas, d);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(d, "tool_calls"), c);
    cJSON_AddNumberToObject(c, "index", k);
    *f = cJSON_CreateObject();
    return c;
}

/* The call being read, as far as text[0..n) goes: its first delta once its name is whole, then its arguments'
 * new bytes. 1 when the call's JSON has ended, 0 when it goes on, -1 when it is not a call's JSON. */
static int feed_call(srv_tool_stream *ts, const char *text, size_t n, cJSON *deltas) {
    srv_call_scan sc;
    srv_tools_scan_call(ts->t, text, ts->call_lo, n, &sc);
    cJSON *f;
    if (!ts->header && sc.name_hi) {
        cJSON *name = cJSON_ParseWithLength(text + sc.name_lo, sc.name_hi - sc.name_lo);
        cJSON *c = call_delta(deltas, ts->n_calls, &f);
        char id[96];
        snprintf(id, sizeof id, "call_%s_0_%d", ts->answer_id, ts->n_calls);
        cJSON_AddStringToObject(c, "id", id);
        cJSON_AddStringToObject(c, "type", "function");
        cJSON_AddItemToObject(c, "function", f);
        cJSON_AddStringToObject(f, "name", cJSON_IsString(name) ? name->valuestring : "");
        cJSON_AddStringToObject(f, "arguments", "");
        cJSON_Delete(name);
        ts->header = 1, ts->n_calls++, ts->args_sent = 0;
    }
    if (ts->header && sc.args_lo) {
        const size_t lo = ts->args_sent > sc.args_lo ? ts->args_sent : sc.args_lo;
        if (sc.args_hi > lo) {
            cJSON *c = call_delta(deltas, ts->n_calls - 1, &f);
            cJSON_AddItemToObject(c, "function", f);
            cJSON_AddItemToObject(f, "arguments", srv_json_text(text + lo, sc.args_hi - lo));
            ts->args_sent = sc.args_hi;
        }
    }
    if (sc.bad) return -1;
    if (sc.end) ts->done_at = sc.end;
    return sc.end != 0;
}

void srv_tool_stream_feed(srv_tool_stream *ts, const char *text, size_t n, int done, cJSON *deltas) {
    for (;;) {
        if (ts->in_call == 1) {
            const int r = feed_call(ts, text, n, deltas);
            if (r == 0) break;
            ts->in_call = r > 0 && ts->t == SRV_TMPL_CHATML && !ts->forced ? 2 : 0;
            if (r < 0) /* the text goes out as content; a Llama 3.1 reply is no call then */
                ts->done_at = ts->call_lo, ts->open = ts->header, ts->plain = 1;
            else ts->open = 0;
        } else if (ts->in_call == 2) {
            const char *close = find(text + ts->done_at, n - ts->done_at, CHATML_CLOSE);
            if (!close) break;
            ts->done_at = (size_t)(close - text) + strlen(CHATML_CLOSE);
            ts->in_call = 0;
        } else {
            size_t marker, call;
            const int first = ts->n_calls == 0 && !ts->plain && !ts->forced;
            size_t c = srv_tool_stream_sendable(ts->t, first, text, ts->done_at, n, &marker, &call);
            if (ts->t == SRV_TMPL_LLAMA31 && first && marker == n && c > ts->done_at) ts->plain = 1;
            if (done && marker == n) c = ts->n_calls ? trim_end(text, ts->done_at, n) : n;
            if (c > ts->done_at) {
                cJSON *d = cJSON_CreateObject();
                cJSON_AddItemToObject(d, "content", srv_json_text(text + ts->done_at, c - ts->done_at));
                cJSON_AddItemToArray(deltas, d);
                ts->done_at = c;
            }
            if (marker == n) break;
            ts->in_call = 1, ts->open = 1, ts->header = 0, ts->call_lo = ts->done_at = call;
        }
    }
}

const char *srv_tool_stream_finish(const srv_tool_stream *ts, int finish_length) {
    return ts->n_calls > 0 && !ts->open ? "tool_calls" : finish_length ? "length" : "stop";
}
