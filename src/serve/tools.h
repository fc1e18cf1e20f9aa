/* Tool calls (docs/serving.md, "Tool calls"): the constraint a required or
 * named call is decoded under, and the calls read back from the model's text,
 * each in the form of the model's own chat template: Qwen3 writes
 * <tool_call>{"name", "arguments"}</tool_call>, Llama 3.1 a bare
 * {"name", "parameters"} (after <|python_tag|> at times). */
#ifndef DA_SERVE_TOOLS_H
#define DA_SERVE_TOOLS_H

#include <stddef.h>

#include "diffattn/core.h"
#include "serve/chat.h"
#include "serve/request.h"

/* The text the template writes before a call's JSON, which a constrained
 * answer starts from (put after the prompt): "<tool_call>\n" for ChatML, ""
 * for Llama 3.1. */
const char *srv_tools_opening(srv_template t);

/* With tool_choice "required" or a named function: the JSON schema of the
 * call (the name a const, the arguments the tool's parameters; anyOf over
 * the tools for "required"), as text in *schema_json (malloc'ed), compiled
 * once to check it. Otherwise *schema_json is NULL. */
da_status srv_tools_constraint(const srv_request *r, srv_template t, char **schema_json);

typedef struct {
    char *name;
    char *arguments; /* the arguments object's text as the model wrote it (what a stream sends) */
} srv_parsed_call;

/* Where the parts of one call's JSON object lie in s[lo..n), a text that may
 * stop anywhere (a reply being generated): offsets into s, 0 while unknown. */
typedef struct {
    size_t name_lo, name_hi; /* the "name" value, a JSON string with its quotes, once whole */
    size_t args_lo, args_hi; /* the arguments' value ("parameters" too for Llama 3.1), as far as it goes */
    int args_whole;          /* the arguments' value is closed */
    size_t end;              /* just past the object's closing brace, once there */
    int bad;                 /* s[lo..n) cannot begin an object of string keys */
} srv_call_scan;

void srv_tools_scan_call(srv_template t, const char *s, size_t lo, size_t n, srv_call_scan *c);

/* The calls in text[0..n): forced, the text is one call's JSON (the opening
 * was in the prompt); else the template's form, each call to one of r's tools
 * with an object of arguments, or none at all. *content_len: the bytes of
 * text before the first call (all of it when there is none). Returns the
 * count of calls (*calls malloc'ed; free with srv_parsed_calls_free), 0 when
 * the text holds none, -1 when out of memory. */
int srv_tools_parse(const srv_request *r, srv_template t, int forced, const char *text, size_t n,
                    srv_parsed_call **calls, size_t *content_len);
void srv_parsed_calls_free(srv_parsed_call *calls, int n);

#endif
