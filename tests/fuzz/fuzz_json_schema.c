/* Fuzz target: structured output's schema compiler and matcher
 * (src/infer/json_schema.h), as `diffattn serve` uses them for
 * response_format. The input is a JSON schema, a NUL byte, then an answer's
 * bytes fed one at a time. Properties: a text the matcher takes whole is
 * JSON that cJSON parses; da_json_min_left is met exactly by following
 * bytes that shorten it, and what that reaches parses too; the token mask
 * of a small fixed vocabulary never allows a token that feeding refuses. */
#include <cjson/cJSON.h>

#include "fuzz_util.h"
#include "infer/json_schema.h"

static const char *const vocab[] = {"{", "}", "[", "]", "\"", ":", ",", " ", "\n", "a", "ab", "\"a\"", "0", "1", "12",
                                    "-", ".", "5", "e", "true", "null", "false", "\\", "u", "\xc3\xa9", "\xc3", "\xa9",
                                    "\":", "\",\"", "\":\"", "\"}"};
enum { NV = sizeof vocab / sizeof vocab[0] };

static void check_parses(const uint8_t *text, size_t n) {
    cJSON *v = cJSON_ParseWithLength((const char *)text, n);
    if (!v) {
        fprintf(stderr, "the matcher took \"%.*s\", which is not JSON\n", (int)n, (const char *)text);
        abort();
    }
    cJSON_Delete(v);
}

/* From st, bytes that each shorten min_left by one: the answer must be whole after exactly L of them. */
static void check_shortest(const da_json_schema *s, da_json_state st, const uint8_t *prefix, size_t n) {
    int L = da_json_min_left(s, &st);
    if (L < 0 || L > 2048) return;
    uint8_t *text = malloc(n + (size_t)L + 1);
    if (!text) return;
    memcpy(text, prefix, n);
    for (int k = L; k > 0; k--) {
        int b = 0;
        for (; b < 256; b++) {
            da_json_state next = st;
            if (da_json_feed(s, &next, (uint8_t)b) && da_json_min_left(s, &next) == k - 1) {
                st = next;
                break;
            }
        }
        if (b == 256) {
            fprintf(stderr, "no byte shortens min_left %d after \"%.*s\"\n", k, (int)(n + (size_t)(L - k)), (const char *)text);
            abort();
        }
        text[n + (size_t)(L - k)] = (uint8_t)b;
    }
    if (!da_json_done(s, &st)) abort();
    check_parses(text, n + (size_t)L);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, 0, size);
    size_t n_schema = nul ? (size_t)(nul - data) : size;
    cJSON *j = cJSON_ParseWithLength((const char *)data, n_schema);
    if (!j) return 0;
    da_json_schema *s = NULL;
    da_status st = da_json_schema_compile(&s, j, "schema");
    cJSON_Delete(j);
    if (st.code) return 0;
    const uint8_t *text = nul ? nul + 1 : data + size;
    size_t n = nul ? size - n_schema - 1 : 0;
    da_json_state js;
    da_json_start(s, &js);
    check_shortest(s, js, text, 0);
    size_t fed = 0;
    for (; fed < n && fed < 4096; fed++)
        if (!da_json_feed(s, &js, text[fed])) break;
    if (fed == n) {
        if (da_json_done(s, &js)) check_parses(text, n);
        check_shortest(s, js, text, n);
        static da_token_mask *m;
        if (!m) {
            const uint8_t *bytes[NV];
            int len[NV];
            for (int i = 0; i < NV; i++) bytes[i] = (const uint8_t *)vocab[i], len[i] = (int)strlen(vocab[i]);
            if (da_token_mask_build(&m, bytes, len, NV, NULL, 0).code) abort();
        }
        uint8_t allowed[NV];
        da_token_mask_allowed(m, s, &js, (int)(size % 50), allowed);
        for (int i = 0; i < NV; i++) {
            da_json_state next = js;
            if (allowed[i] && !da_json_feed_bytes(s, &next, (const uint8_t *)vocab[i], strlen(vocab[i]))) abort();
        }
    }
    da_json_schema_free(s);
    return 0;
}
