/* Tool calls read back from a model's text (serve/tools.c) in each template's
 * form, the texts that are not calls left as content, and Jinja's tojson
 * (serve/tojson.c) against texts @huggingface/jinja writes. */
#include <cjson/cJSON.h>

#include "harness.h"
#include "serve/tojson.h"
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
    CHECK(!strcmp(name, "get_weather") && !strcmp(args, "{\"city\":\"Paris\"}") && content == 0);
    /* text before the calls is content; two calls */
    CHECK(parse(SRV_TMPL_CHATML, 0, "Let me look.\n\n<tool_call>\n{\"name\": \"search\", \"arguments\": {}}\n</tool_call>\n"
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}}\n</tool_call>\n",
                name, args, &content) == 2);
    CHECK(!strcmp(name, "search") && content == strlen("Let me look."));
    /* the forced form: the opening was in the prompt */
    CHECK(parse(SRV_TMPL_CHATML, 1, "{\"arguments\": {\"q\": \"x\"}, \"name\": \"search\"}", name, args, &content) == 1);
    CHECK(!strcmp(args, "{\"q\":\"x\"}"));
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
    CHECK(!strcmp(name, "get_weather") && !strcmp(args, "{\"city\":\"Oslo\"}") && content == 0);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, " <|python_tag|>{\"name\": \"search\", \"parameters\": {}}\n", name, args, &content) == 1);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, "The weather: {\"name\": \"search\", \"parameters\": {}}", name, args, &content) == 0);
    CHECK(parse(SRV_TMPL_LLAMA31, 0, "{\"name\": \"search\", \"arguments\": {}}", name, args, &content) == 1);
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
    RUN(test_tojson);
    TH_SUMMARY();
}
