/* Tool calls read back from a model's text (serve/tools.c) in each template's
 * form, the texts that are not calls left as content, and Jinja's tojson
 * (serve/tojson.c) against texts @huggingface/jinja writes. */
#include <cjson/cJSON.h>

#include "harness.h"
#include "serve/tojson.h"
#include "serve/tool_stream.h"
#include "serve/tools.h"

static const char *const REQ =
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":["
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":\"object\"}}},"
    "{\"type\":\"function\",\"function\":{\"name\":\"search\"}}]}";

/* The calls of text; *names and *args get the first call's, content its length. -1: out of memory. */
static int parse(srv_template t, int forced, const char *text, char *name, char *args, size_t *content) {
    srv_request r;
    if (srv_request_parse(&r, SRV_CHAT, REQ, strlen(REQ)).code) return -2;
    srv_parsed_call *calls = NULL;
    const int n = srv_tools_parse(&r, t, forced, text, strlen(text), &calls, content);
    name[0] = args[0] = 0;
    if (n > 0) strcpy(name, calls[0].name), strcpy(args, calls[0].arguments);
    srv_parsed_calls_free(calls, n);
    srv_request_free(&r);
    return n;
}

static int test_chatml_calls(void) {
    char name[64], args[256];
    size_t content;
    CHECK(parse(SRV_TMPL_CHATML, 0, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
                name, args, &content) == 1);
    CHECK(!strcmp(name, "get_weather") && !strcmp(args, "{\"city\": \"Paris\"}") && content == 0);
    /* text before the calls is content; two calls */
    CHECK(parse(SRV_TMPL_CHATML, 0, "Let me look.\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>\n"
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}}\n</tool_call>\n",
                name, args, &content) == 2);
    CHECK(!strcmp(name, "search") && content == strlen("Let me look."));
    /* the forced form: the opening was in the prompt */
    CHECK(parse(SRV_TMPL_CHATML, 1, "{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}", name, args, &content) == 1);
    CHECK(!strcmp(args, "{\"q\": \"x\"}"));
    /* the arguments as written: a number past double's precision, escapes, white space */
    CHECK(parse(SRV_TMPL_CHATML, 1, "{\"name\": \"search\", \"arguments\": { \"n\": 12345678901234567890, \"s\": \"\\u00e9\\/\" } }",
                name, args, &content) == 1);
    CHECK(!strcmp(args, "{ \"n\": 12345678901234567890, \"s\": \"\\u00e9\\/\" }"));
    return 0;
}

static int test_not_calls(void) {
    char name[64], args[256];
    size_t content;
    const char *texts[] = {
        "plain text",
        "<tool_call>\n{\"name\": \"unknown_tool\", \"arguments\": {}}\n</tool_call>", /* not one of the tools */
        "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{}\"}\n</tool_call>",    /* arguments not an object */
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n",                    /* not closed */
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {}} x\n</tool_call>",      /* trailing text in the call */
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call> and more", /* text after the calls */
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {}, \"x\": 1}\n</tool_call>",
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        const int n = parse(SRV_TMPL_CHATML, 0, texts[i], name, args, &content);
        if (n != 0 || content != strlen(texts[i])) {
            fprintf(stderr, "  text %zu read as %d calls, content %zu of %zu\n", i, n, content, strlen(texts[i]));
            return 1;
        }
    }
    CHECK(parse(SRV_TMPL_LLAMA3, 0, "{\"name\": \"search\", \"parameters\": {}}", name, args, &content) == 0);
    return 0;
}

static int test_llama31_calls(void) {
    char name[64], args[256];
    size_t content;
    CHECK(parse(SRV_TMPL_LLAMA31, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}", name, args,
                &content) == 1);
    CHECK(!strcmp(name, "get_weather") && !strcmp(args, "{\"city\": \"Oslo\"}") && content == 0);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, " <|python_tag|>{\"name\": \"search\", \"parameters\": {}}\n", name, args, &content) == 1);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, "The weather: {\"name\": \"search\", \"parameters\": {}}", name, args, &content) == 0);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, "{\"name\": \"search\", \"arguments\": {}}", name, args, &content) == 1);
    return 0;
}

/* What a reply may send as content while it is written: a possible start of a call is held back. */
static int test_stream_hold(void) {
    static const struct { srv_template t; int first; const char *text; size_t sendable, marker, call; } cases[] = {
        {SRV_TMPL_CHATML, 0, "Hello <tool", 5, 0, 0},          /* "<tool" may become <tool_call> */
        {SRV_TMPL_CHATML, 0, "Hello <b>", 9, 0, 0},            /* it cannot */
        {SRV_TMPL_CHATML, 0, "a\n <", 1, 0, 0},                /* white space before a possible call */
        {SRV_TMPL_CHATML, 0, "Hi\n\n<tool_call>\n{", 2, 4, 15},
        {SRV_TMPL_CHATML, 0, "x <tool_call", 1, 0, 0},
        {SRV_TMPL_LLAMA31, 1, "  <|pyth", 0, 0, 0},
        {SRV_TMPL_LLAMA31, 1, " {\"na", 0, 0, 0},
        {SRV_TMPL_LLAMA31, 1, "{ \"name\"", 0, 0, 0},           /* a call: its JSON starts at 0 */
        {SRV_TMPL_LLAMA31, 1, "<|python_tag|>{", 0, 0, 14},
        {SRV_TMPL_LLAMA31, 1, "{\"x\": 1}", 8, 0, 0},           /* JSON, not a call */
        {SRV_TMPL_LLAMA31, 1, "Sure", 4, 0, 0},
        {SRV_TMPL_LLAMA31, 0, "after \n", 5, 0, 0},             /* after a call: only white space is held */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *s = cases[i].text;
        const size_t n = strlen(s);
        size_t marker, call, c = srv_tool_stream_sendable(cases[i].t, cases[i].first, s, 0, n, &marker, &call);
        const int whole = cases[i].call != 0 || (cases[i].t == SRV_TMPL_LLAMA31 && s[0] == '{' && s[2] == '"' && s[3] == 'n');
        const size_t want_marker = whole ? cases[i].marker : n, want_call = whole ? cases[i].call : n;
        if (c != cases[i].sendable || marker != want_marker || call != want_call) {
            fprintf(stderr, "  case %zu %s: sendable %zu marker %zu call %zu\n", i, s, c, marker, call);
            return 1;
        }
    }
    return 0;
}

/* Fed one byte at a time as a stream would be, a reply's deltas put back together are the whole answer's
 * content and calls, and the first call's arguments (after its name) come in more than one fragment. */
static int stream_matches(srv_template t, int forced, const char *text) {
    srv_request r;
    if (srv_request_parse(&r, SRV_CHAT, REQ, strlen(REQ)).code) return 1;
    srv_parsed_call *calls = NULL;
    size_t content_len = 0;
    const size_t n = strlen(text);
    const int n_calls = srv_tools_parse(&r, t, forced, text, n, &calls, &content_len);
    srv_tool_stream ts;
    srv_tool_stream_init(&ts, t, forced, "x");
    char content[512] = "", names[4][64] = {{0}}, args[4][256] = {{0}};
    int fragments[4] = {0}, bad = 0, max_index = -1;
    for (size_t k = 1; k <= n; k++) {
        cJSON *deltas = cJSON_CreateArray();
        srv_tool_stream_feed(&ts, text, k, k == n, deltas);
        for (const cJSON *raw = deltas->child; raw; raw = raw->next) {
            char *json = cJSON_PrintUnformatted(raw); /* the content's text is raw JSON (serve/reply.h) */
            cJSON *d = cJSON_Parse(json);
            free(json);
            const cJSON *c = cJSON_GetObjectItem(d, "content"), *tc = cJSON_GetObjectItem(d, "tool_calls");
            if (c) strcat(content, c->valuestring);
            if (c && n_calls > 0 && strstr(c->valuestring, "<tool")) bad = 1; /* the marker leaked into the content */
            if (!tc) {
                cJSON_Delete(d);
                continue;
            }
            const int i = cJSON_GetObjectItem(tc->child, "index")->valueint;
            const cJSON *f = cJSON_GetObjectItem(tc->child, "function"), *name = cJSON_GetObjectItem(f, "name");
            if (name) strcat(names[i], name->valuestring);
            strcat(args[i], cJSON_GetObjectItem(f, "arguments")->valuestring);
            fragments[i] += !name;
            max_index = i > max_index ? i : max_index;
            cJSON_Delete(d);
        }
        cJSON_Delete(deltas);
    }
    bad |= max_index + 1 != (n_calls > 0 ? n_calls : 0) || strlen(content) != content_len || strncmp(content, text, content_len);
    for (int i = 0; i < n_calls && !bad; i++)
        bad = strcmp(names[i], calls[i].name) || strcmp(args[i], calls[i].arguments) || (i == 0 && strlen(args[i]) > 2 && fragments[i] < 2);
    bad |= strcmp(srv_tool_stream_finish(&ts, 0), n_calls > 0 ? "tool_calls" : "stop") != 0;
    if (bad) fprintf(stderr, "  %s\n  streamed content [%s], call 0 %s %s (%d fragments)\n", text, content, names[0], args[0], fragments[0]);
    srv_parsed_calls_free(calls, n_calls);
    srv_request_free(&r);
    return bad;
}

static int test_stream_deltas(void) {
    CHECK(!stream_matches(SRV_TMPL_CHATML, 0, "Let me <b>look</b>.\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {\"q\": \"cats < dogs\"}}\n</tool_call>\n"
                          "<tool_call>\n{\"arguments\": {\"a\": [1, {\"b\": \"}\"}]}, \"name\": \"get_weather\"}\n</tool_call>\n"));
    CHECK(!stream_matches(SRV_TMPL_CHATML, 0, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\xc3\xbcrich\"}}\n</tool_call>"));
    CHECK(!stream_matches(SRV_TMPL_CHATML, 1, "{\"name\": \"get_weather\", \"arguments\": { \"city\" : \"Paris\", \"n\": 12345678901234567890 }}"));
    CHECK(!stream_matches(SRV_TMPL_CHATML, 0, "No call, but <tool_ in the text and a trailing <"));
    CHECK(!stream_matches(SRV_TMPL_LLAMA31, 0, "  <|python_tag|>{\"name\": \"search\", \"parameters\": {\"q\": \"x y\"}}\n"));
    CHECK(!stream_matches(SRV_TMPL_LLAMA31, 0, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}"));
    CHECK(!stream_matches(SRV_TMPL_LLAMA31, 1, "{\"name\": \"search\", \"parameters\": {\"q\": \"x\"}}"));
    CHECK(!stream_matches(SRV_TMPL_LLAMA31, 0, "{\"answer\": 42} is JSON, not a call"));
    CHECK(!stream_matches(SRV_TMPL_LLAMA31, 0, " Sure, here."));
    return 0;
}

/* Expected texts: Python's json.dumps(ensure_ascii=False) (transformers' tojson), with indent=4 the second;
 * @huggingface/jinja writes the same but for the exponent (-3e-7). */
static int test_tojson(void) {
    cJSON *v = cJSON_Parse("{\"a\":\"W\\u00e9 \\\"q\\\"\\n<b>\\u0001\",\"n\":[1,2.5,-3e-7,true,null],\"e\":{},\"l\":[]}");
    char *flat = srv_tojson(v, 0), *ind = srv_tojson(v, 4);
    const char *want_flat = "{\"a\": \"W\xc3\xa9 \\\"q\\\"\\n<b>\\u0001\", \"n\": [1, 2.5, -3e-07, true, null], \"e\": {}, \"l\": []}";
    const char *want_ind = "{\n    \"a\": \"W\xc3\xa9 \\\"q\\\"\\n<b>\\u0001\",\n    \"n\": [\n        1,\n        2.5,\n"
                           "        -3e-07,\n        true,\n        null\n    ],\n    \"e\": {},\n    \"l\": []\n}";
    int bad = strcmp(flat, want_flat) || strcmp(ind, want_ind);
    if (bad) fprintf(stderr, "  got %s\n  and %s\n", flat, ind);
    free(flat), free(ind), cJSON_Delete(v);
    return bad;
}

int main(void) {
    RUN(test_chatml_calls);
    RUN(test_not_calls);
    RUN(test_llama31_calls);
    RUN(test_stream_hold);
    RUN(test_stream_deltas);
    RUN(test_tojson);
    TH_SUMMARY();
}
