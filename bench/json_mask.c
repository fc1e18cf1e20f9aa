/* The per-token cost of structured output's token mask (docs/serving.md,
 * "Structured output"): da_token_mask_allowed over a vocabulary at five
 * points of an answer (before it, between values, in a key, inside a string,
 * inside a bounded integer), and the cost of building
 * the trie once, in CPU time. The vocabulary is a tokenizer.json's decoded tokens (special
 * tokens never allowed, as the server's make_mask does), or bytes (V 256)
 * without one. bench/json_mask.sh builds and runs it:
 *
 *     json_mask [TOKENIZER.json | -] [REPS]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "diffattn/tokenizer.h"
#include "infer/json_schema.h"

/* CPU time of this thread: on a shared machine, wall time counts the other processes' turns too. */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The best of 5 means of reps calls, in ms of CPU time a call. */
static double time_mask(const da_token_mask *m, const da_json_schema *s, const da_json_state *st, int reps,
                        uint8_t *allowed, int *n_allowed) {
    double best = 1e30;
    for (int round = 0; round < 5; round++) {
        const double t0 = now_s();
        for (int i = 0; i < reps; i++) *n_allowed = da_token_mask_allowed(m, s, st, 200, allowed);
        const double ms = 1e3 * (now_s() - t0) / reps;
        if (ms < best) best = ms;
    }
    return best;
}

int main(int argc, char **argv) {
    const char *tok_path = argc > 1 && strcmp(argv[1], "-") ? argv[1] : NULL;
    const int reps = argc > 2 ? atoi(argv[2]) : 50;
    da_tokenizer *tok = NULL;
    if (tok_path) {
        da_status st = da_tokenizer_load(&tok, tok_path);
        if (st.code) {
            fprintf(stderr, "json_mask: %s\n", st.msg);
            return 1;
        }
    }
    const int V = tok ? da_tokenizer_vocab_size(tok) : 256;
    uint8_t **bytes = calloc((size_t)V, sizeof *bytes);
    int *len = calloc((size_t)V, sizeof *len);
    uint8_t *allowed = malloc((size_t)V);
    if (!bytes || !len || !allowed) return 1;
    for (int i = 0; i < V; i++) {
        size_t n = 0, cap = 0;
        if (tok) {
            if (da_tokenizer_decode(tok, &i, 1, &bytes[i], &n, &cap).code || !bytes[i]) n = 0;
            char *text = n ? malloc(n + 1) : NULL;
            if (text) {
                memcpy(text, bytes[i], n);
                text[n] = 0;
                if (da_tokenizer_special_id(tok, text) == i) n = 0;
                free(text);
            }
        } else if ((bytes[i] = malloc(1))) {
            bytes[i][0] = (uint8_t)i, n = 1;
        }
        len[i] = (int)n;
    }
    const int end_id = tok ? da_tokenizer_special_id(tok, "<|eot_id|>") : -1;
    da_token_mask *m = NULL;
    double t0 = now_s();
    if (da_token_mask_build(&m, (const uint8_t *const *)bytes, len, V, &end_id, end_id >= 0).code) return 1;
    const double build_ms = 1e3 * (now_s() - t0);
    const char *schema_text = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                              "\"age\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":150},"
                              "\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"red\",\"green\",\"blue\"]}}},"
                              "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}";
    cJSON *schema_json = cJSON_Parse(schema_text);
    da_json_schema *s = NULL;
    if (!schema_json || da_json_schema_compile(&s, schema_json, "schema").code) return 1;
    const struct {
        const char *where, *text;
    } points[] = {{"start (before the object)", ""},
                  {"between values (after {\"name\":)", "{\"name\":"},
                  {"a key (after {\"name\":\"ab\",)", "{\"name\":\"ab\","},
                  {"inside a string (after {\"name\":\"ab)", "{\"name\":\"ab"},
                  {"inside a number (after {\"name\":\"ab\",\"age\":1)", "{\"name\":\"ab\",\"age\":1"}};
    printf("vocabulary %d tokens (%s); trie built in %.1f ms\n", V, tok_path ? tok_path : "bytes", build_ms);
    for (size_t k = 0; k < sizeof points / sizeof points[0]; k++) {
        da_json_state st;
        da_json_start(s, &st);
        if (!da_json_feed_bytes(s, &st, (const uint8_t *)points[k].text, strlen(points[k].text))) return 1;
        int n = 0;
        const double ms = time_mask(m, s, &st, reps, allowed, &n);
        printf("%-48s %9.4f ms a token  (%d tokens allowed)\n", points[k].where, ms, n);
    }
    da_json_schema_free(s);
    cJSON_Delete(schema_json);
    da_token_mask_free(m);
    for (int i = 0; i < V; i++) free(bytes[i]);
    free(bytes);
    free(len);
    free(allowed);
    da_tokenizer_free(tok);
    return 0;
}
