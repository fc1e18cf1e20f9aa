/* The JSON bodies of diffattn serve's endpoints, parsed and checked before
 * anything runs (the fuzz target fuzz_serve_request drives these). An error
 * names the field and what was expected; it becomes a 400. */
#ifndef DA_SERVE_REQUEST_H
#define DA_SERVE_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/core.h"

#define SRV_MAX_STOP 4      /* OpenAI's limit on stop strings */
#define SRV_MAX_LOGPROBS 20 /* top alternatives per position */
#define SRV_MAX_CHOICES 256 /* sequences one request may ask for: prompts times "n" */

typedef enum { SRV_COMPLETION = 0, SRV_CHAT = 1, SRV_TOKENIZE = 2, SRV_DETOKENIZE = 3 } srv_kind;

/* A tool call of an assistant message (OpenAI's {id, type: "function", function: {name, arguments}}). */
typedef struct {
    char *name;           /* no NUL */
    char *arguments;      /* the arguments as the client sent them when a string (OpenAI's form), else NULL */
    char *arguments_json; /* the arguments value as Jinja's tojson writes it (a string is quoted) */
} srv_tool_call;

/* Texts carry their length: JSON's \u0000 is a byte of the text like any other. */
typedef struct {
    char *role;       /* no NUL (refused) */
    char *content;
    size_t n_content;
    srv_tool_call *tool_calls; /* assistant messages; a null or empty list is none */
    int n_tool_calls;
} srv_message;

/* A function the model may call: OpenAI's {"type": "function", "function": {name, description, parameters}}. */
typedef struct {
    char *name;
    char *tojson;        /* the whole tool object as Jinja's tojson writes it: compact, and indented by 4 */
    char *tojson_indent;
    char *parameters;    /* the parameters schema as JSON text; NULL when not given (any object) */
} srv_tool;

/* tool_choice: "none" (the tools are shown, no call is read), "auto" (calls the model writes are read),
 * "required" (one call, constrained), or a named function (that one, constrained). */
typedef enum { SRV_TOOLS_NONE = 0, SRV_TOOLS_AUTO = 1, SRV_TOOLS_REQUIRED = 2, SRV_TOOLS_NAMED = 3 } srv_tool_choice;

/* The answer's form: free text, any JSON object, or JSON that fits a schema (docs/serving.md). */
typedef enum { SRV_JSON_NONE = 0, SRV_JSON_OBJECT = 1, SRV_JSON_SCHEMA = 2 } srv_json_mode;

/* One prompt: a string, or token ids. */
typedef struct {
    char *text; /* NULL when ids */
    size_t n_text;
    int *ids;
    int n_ids;
} srv_prompt;

typedef struct {
    srv_kind kind;
    char *model;            /* NULL: not given */
    srv_prompt *prompts;    /* completions: one or more (a list is answered as that many choices); tokenize: one */
    int n_prompts;
    srv_message *messages;  /* chat, and tokenize with "messages" */
    int n_messages;
    int max_tokens;         /* -1: not given */
    float temperature, top_p;
    uint64_t seed;
    int has_seed;
    char *stop[SRV_MAX_STOP];
    size_t stop_len[SRV_MAX_STOP];
    int n_stop;
    int n_choices;          /* "n": choices per prompt (1..SRV_MAX_CHOICES) */
    int stream, echo;
    int logprobs;           /* top alternatives per position; -1: none */
    int ignore_eos;         /* 1: generate past the end-of-text token (vLLM's field) */
    int include_usage;      /* stream_options.include_usage: a last chunk with the usage */
    int cache_prompt;       /* 0: feed the whole prompt anew (llama-server's field; default 1) */
    int add_special;        /* tokenize: add the tokenizer's special tokens (default 1) */
    int *tokens;            /* detokenize */
    int n_tokens;
    srv_json_mode json;     /* completions and chat: the answer's form (response_format, json_schema) */
    char *schema_json;      /* SRV_JSON_SCHEMA: the schema's text, already compiled once (so it compiles) */
    srv_tool *tools;        /* chat: the functions the model may call */
    int n_tools;
    srv_tool_choice tool_choice; /* auto when tools are given, else none */
    int tool_named;         /* SRV_TOOLS_NAMED: the index in tools */
} srv_request;

/* Parses body[0..n) for an endpoint of kind k into r (zeroed first; free it
 * with srv_request_free even on error). A key twice in one object, a key or a
 * name (model, role, part type) holding a NUL, and an OpenAI field this
 * server does not implement set to anything but its neutral value are errors. */
da_status srv_request_parse(srv_request *r, srv_kind k, const char *body, size_t n);
void srv_request_free(srv_request *r);

#endif
