/* Tool calls streamed as the model writes them (docs/serving.md, "Tool
 * calls"), in OpenAI's deltas: text as content until a call's start is
 * recognised (a text that may still become the template's call marker is held
 * back), then per call a first delta with its index, id, type and name, and
 * deltas with its arguments' bytes as they come, the same bytes as the whole
 * answer's `arguments` (serve/tools.h). */
#ifndef DA_SERVE_TOOL_STREAM_H
#define DA_SERVE_TOOL_STREAM_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "serve/chat.h"

typedef struct {
    srv_template t;
    int forced;        /* required or named: the reply is one call's JSON from its first byte */
    char answer_id[48];
    int in_call;       /* 0: text (content, or what follows a call); 1: a call's JSON; 2: a call's JSON ended,
                          its closing tag to come */
    size_t done_at;    /* text before this is dealt with: sent as content, dropped or part of a call */
    size_t call_lo;    /* where the call being read starts */
    int n_calls;       /* calls whose first delta went out */
    int header;        /* the call being read has had its first delta */
    size_t args_sent;  /* the call being read: its arguments sent up to this offset */
    int open;          /* a call was started and is not whole */
    int plain;         /* Llama 3.1: the reply is not a call (it is recognised only at the start) */
} srv_tool_stream;

void srv_tool_stream_init(srv_tool_stream *ts, srv_template t, int forced, const char *answer_id);

/* text[0..n) is the reply so far (it only grows between calls); done: it is
 * whole. Appends to deltas (a JSON array) the chat deltas now due, each one
 * chunk's "delta": {"content"} or {"tool_calls": [one]} (cJSON leaves out
 * what it cannot allocate). */
void srv_tool_stream_feed(srv_tool_stream *ts, const char *text, size_t n, int done, cJSON *deltas);

/* The finish_reason once the reply is whole: "tool_calls" when every call
 * started is whole and there was one; else the job's ("length" or "stop"). */
const char *srv_tool_stream_finish(const srv_tool_stream *ts, int finish_length);

/* How much of text[lo..n), a text outside calls, may go out as content now:
 * up to the end less what is held back, white space then a proper prefix of
 * the template's call marker (Qwen3's <tool_call>), or at the start of a Llama
 * 3.1 reply (first), a reply that may still become a call (<|python_tag|> or
 * {"name"...). The white space before a call is not content. *marker: where a
 * whole marker starts, n when none; *call: where the call's JSON then starts. */
size_t srv_tool_stream_sendable(srv_template t, int first, const char *text, size_t lo, size_t n, size_t *marker,
                                size_t *call);

#endif
