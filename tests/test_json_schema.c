/* Constrained JSON (src/infer/json_schema.h): the subset's refusals, texts
 * accepted and refused, random answers checked by a validator written apart
 * from the matcher (below, straight from the JSON Schema rules), the
 * exactness of da_json_min_left, and the token mask against a brute force. */
#include <cjson/cJSON.h>

#include "diffattn/rng.h"
#include "harness.h"
#include "infer/json_schema.h"

/* ---- an independent validator of the subset ---- */

static const cJSON *root_schema;

static int utf8_count(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int valid(const cJSON *v, const cJSON *sch);

static int type_ok(const cJSON *v, const char *t) {
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    return 0;
}

static int valid(const cJSON *v, const cJSON *sch) {
    if (cJSON_IsBool(sch)) return cJSON_IsTrue(sch);
    const cJSON *k;
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "$ref"))) {
        const char *r = k->valuestring;
        if (!strcmp(r, "#")) return valid(v, root_schema);
        return valid(v, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root_schema, "$defs"), r + 8));
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "type"))) {
        int ok = 0;
        if (cJSON_IsString(k)) ok = type_ok(v, k->valuestring);
        else
            for (const cJSON *t = k->child; t; t = t->next) ok |= type_ok(v, t->valuestring);
        if (!ok) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "anyOf"))) {
        int ok = 0;
        for (const cJSON *t = k->child; t; t = t->next) ok |= valid(v, t);
        if (!ok) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "enum"))) {
        int ok = 0;
        for (const cJSON *t = k->child; t; t = t->next) ok |= cJSON_Compare(v, t, 1);
        if (!ok) return 0;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(sch, "const")) && !cJSON_Compare(v, k, 1)) return 0;
    if (cJSON_IsString(v)) {
        int n = utf8_count(v->valuestring);
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "minLength")) && n < k->valueint) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "maxLength")) && n > k->valueint) return 0;
    }
    if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "minimum")) && x < k->valuedouble) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "maximum")) && x > k->valuedouble) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "exclusiveMinimum")) && x <= k->valuedouble) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "exclusiveMaximum")) && x >= k->valuedouble) return 0;
    }
    if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "minItems")) && n < k->valueint) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "maxItems")) && n > k->valueint) return 0;
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "items")))
            for (const cJSON *t = v->child; t; t = t->next)
                if (!valid(t, k)) return 0;
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(sch, "properties");
        const cJSON *add = cJSON_GetObjectItemCaseSensitive(sch, "additionalProperties");
        if ((k = cJSON_GetObjectItemCaseSensitive(sch, "required")))
            for (const cJSON *t = k->child; t; t = t->next)
                if (!cJSON_GetObjectItemCaseSensitive(v, t->valuestring)) return 0;
        for (const cJSON *t = v->child; t; t = t->next) {
            const cJSON *p = props ? cJSON_GetObjectItemCaseSensitive(props, t->string) : NULL;
            if (p) {
                if (!valid(t, p)) return 0;
            } else if (add && !valid(t, add)) return 0;
        }
    }
    return 1;
}

/* ---- helpers ---- */

static da_json_schema *compile(const char *text) {
    cJSON *j = cJSON_Parse(text);
    if (!j) return NULL;
    da_json_schema *s = NULL;
    da_status st = da_json_schema_compile(&s, j, "schema");
    cJSON_Delete(j);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    return s;
}

/* 1 when text is accepted whole. */
static int accepts(const da_json_schema *s, const char *text) {
    da_json_state st;
    da_json_start(s, &st);
    return da_json_feed_bytes(s, &st, (const uint8_t *)text, strlen(text)) && da_json_done(s, &st);
}

static const char *const schemas[] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":5},"
    "\"age\":{\"type\":\"integer\",\"minimum\":18,\"maximum\":130},\"tags\":{\"type\":\"array\",\"items\":"
    "{\"enum\":[\"a\",\"bc\",1,null]},\"minItems\":1,\"maxItems\":3}},\"required\":[\"name\",\"age\"],"
    "\"additionalProperties\":false}",
    "{\"type\":\"number\",\"minimum\":-2.5,\"exclusiveMaximum\":3.25}",
    "{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"object\",\"properties\":{\"x\":{\"const\":true}},"
    "\"required\":[\"x\"]},{\"type\":[\"integer\",\"null\"],\"minimum\":-7,\"maximum\":7}]}",
    "{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,"
    "\"maximum\":99},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\","
    "\"next\"]}},\"$ref\":\"#/$defs/node\"}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"boolean\"},"
    "\"s\":{\"type\":\"string\"}},\"required\":[\"s\"]},\"maxItems\":2}",
    "{\"type\":\"object\"}",
};

/* ---- cases ---- */

static int test_refuses_outside_subset(void) {
    const char *bad[][2] = {{"{\"type\":\"string\",\"pattern\":\"a+\"}", "pattern"},
                            {"{\"type\":\"string\",\"format\":\"date\"}", "format"},
                            {"{\"oneOf\":[{\"type\":\"string\"}]}", "oneOf"},
                            {"{\"type\":\"strng\"}", "strng"},
                            {"{\"type\":\"array\",\"items\":[{\"type\":\"string\"}]}", "items"},
                            {"{\"$ref\":\"http://x/y\"}", "$ref"},
                            {"{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "satisfies"},
                            {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"multipleOf\":2}}}", "multipleOf"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = cJSON_Parse(bad[i][0]);
        da_json_schema *s = NULL;
        da_status st = da_json_schema_compile(&s, j, "response_format.json_schema.schema");
        cJSON_Delete(j);
        if (!st.code || !strstr(st.msg, bad[i][1])) {
            fprintf(stderr, "  %s: %s\n", bad[i][0], st.code ? st.msg : "accepted");
            da_json_schema_free(s);
            return 1;
        }
        CHECK(strstr(st.msg, "response_format.json_schema.schema") != NULL);
    }
    return 0;
}

static int test_texts(void) {
    da_json_schema *s = compile(schemas[0]);
    CHECK(s);
    CHECK(accepts(s, "{\"name\":\"ab\",\"age\":18}"));
    CHECK(accepts(s, "{ \"age\" : 130 , \"name\" : \"\\u00e9\\n\\\"x\", \"tags\": [\"a\", 1, null]}"));
    CHECK(accepts(s, "{\"name\":\"h\xc3\xa9llo\",\"age\":99,\"tags\":[\"bc\"]}"));
    CHECK(!accepts(s, "{\"name\":\"a\",\"age\":18}"));          /* minLength */
    CHECK(!accepts(s, "{\"name\":\"abcdef\",\"age\":18}"));     /* maxLength */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":17}"));         /* minimum */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":131}"));        /* maximum */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":18.5}"));       /* integer */
    CHECK(!accepts(s, "{\"name\":\"ab\"}"));                    /* required */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":20,\"x\":1}")); /* additionalProperties */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":20,\"tags\":[]}"));
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":20,\"tags\":[1,1,1,1]}"));
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":20,\"name\":\"cd\"}")); /* a key twice */
    CHECK(!accepts(s, "{\"name\":\"\\ud800\",\"age\":20}"));    /* an escaped surrogate */
    CHECK(!accepts(s, "{\"name\":\"a\xc0\xafz\",\"age\":20}"));  /* overlong UTF-8 */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":20} "));         /* nothing after the value */
    CHECK(!accepts(s, "{\"name\":\"ab\",\"age\":020}"));
    da_json_schema_free(s);
    CHECK((s = compile(schemas[1])));
    CHECK(accepts(s, "-2.5") && accepts(s, "3.2499") && accepts(s, "0") && accepts(s, "-0.75"));
    CHECK(!accepts(s, "3.25") && !accepts(s, "-2.51") && !accepts(s, "1e0") && !accepts(s, "4"));
    da_json_schema_free(s);
    CHECK((s = compile(schemas[2])));
    CHECK(accepts(s, "\"abc\"") && accepts(s, "{\"x\":true}") && accepts(s, "-7") && accepts(s, "null"));
    CHECK(!accepts(s, "\"abcd\"") && !accepts(s, "{\"x\":false}") && !accepts(s, "8") && !accepts(s, "true"));
    da_json_schema_free(s);
    CHECK((s = compile(schemas[3])));
    CHECK(accepts(s, "{\"v\":1,\"next\":{\"v\":2,\"next\":null}}"));
    CHECK(!accepts(s, "{\"v\":1,\"next\":{\"v\":2}}"));
    da_json_schema_free(s);
    return 0;
}

/* Along random walks over all 256 bytes: done <=> min_left 0; every live byte leaves min_left >= L - 1;
 * some byte leaves L - 1. Together these make min_left the exact distance to a whole answer. */
static int check_min_left_at(const da_json_schema *s, const da_json_state *st) {
    int L = da_json_min_left(s, st);
    if (L < 0 || (L == 0) != da_json_done(s, st)) {
        fprintf(stderr, "  min_left %d, done %d\n", L, da_json_done(s, st));
        return 1;
    }
    int step = 0;
    for (int b = 0; b < 256; b++) {
        da_json_state next = *st;
        if (!da_json_feed(s, &next, (uint8_t)b)) continue;
        int l2 = da_json_min_left(s, &next);
        if (l2 < 0) continue; /* a live prefix with no whole answer is never offered (the mask checks this) */
        if (l2 < L - 1) {
            fprintf(stderr, "  byte %d: min_left %d after %d\n", b, l2, L);
            return 1;
        }
        step |= l2 == L - 1;
    }
    if (L > 0 && !step) {
        fprintf(stderr, "  no byte shortens min_left %d\n", L);
        return 1;
    }
    return 0;
}

/* A random answer: random allowed bytes (whitespace rarely), within budget bytes; then validated apart. */
static int random_answer(const da_json_schema *s, const cJSON *schema, da_rng *rng, int budget, int check_exact) {
    da_json_state st;
    da_json_start(s, &st);
    char text[512];
    int n = 0;
    while (!da_json_closed(s, &st)) {
        if (da_json_done(s, &st) && da_rng_uniform(rng) < 0.3) break;
        if (check_exact && check_min_left_at(s, &st)) {
            fprintf(stderr, "  after \"%.*s\"\n", n, text);
            return 1;
        }
        uint8_t ok[256], plain[256];
        int n_ok = 0, n_plain = 0; /* plain: printable ASCII, preferred so that answers stay readable */
        for (int b = 0; b < 256; b++) {
            da_json_state next = st;
            int l = da_json_feed(s, &next, (uint8_t)b) ? da_json_min_left(s, &next) : -1;
            if (l < 0 || l > budget - n - 1) continue;
            ok[n_ok++] = (uint8_t)b;
            if (b > ' ' && b < 0x7F) plain[n_plain++] = (uint8_t)b;
        }
        if (n_plain && da_rng_uniform(rng) < 0.9) memcpy(ok, plain, (size_t)(n_ok = n_plain));
        if (!n_ok && da_json_done(s, &st)) break; /* the budget is spent on a whole answer */
        if (!n_ok) {
            fprintf(stderr, "  no byte continues \"%.*s\" (budget %d)\n", n, text, budget);
            return 1;
        }
        uint8_t b = ok[da_rng_next(rng) % (uint64_t)n_ok];
        CHECK(da_json_feed(s, &st, b));
        text[n++] = (char)b;
        CHECK(n < (int)sizeof text - 1);
    }
    text[n] = 0;
    CHECK(n <= budget);
    cJSON *v = cJSON_ParseWithLength(text, (size_t)n);
    int ok = v && valid(v, schema);
    if (!ok) fprintf(stderr, "  invalid answer: %s\n", text);
    cJSON_Delete(v);
    return !ok;
}

static int test_random_answers_validate(void) {
    da_rng rng;
    da_rng_seed(&rng, 7);
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        cJSON *j = cJSON_Parse(schemas[i]);
        root_schema = j;
        da_json_schema *s = NULL;
        da_status st = da_json_schema_compile(&s, j, "schema");
        CHECK(!st.code);
        for (int r = 0; r < 200; r++) {
            da_json_state st0;
            da_json_start(s, &st0);
            int budget = da_json_min_left(s, &st0) + (int)(da_rng_next(&rng) % 60);
            if (random_answer(s, j, &rng, budget, r < 40)) {
                fprintf(stderr, "  schema %zu, walk %d\n", i, r);
                da_json_schema_free(s);
                cJSON_Delete(j);
                return 1;
            }
        }
        da_json_schema_free(s);
        cJSON_Delete(j);
    }
    return 0;
}

/* Walks of random allowed tokens, each step's mask (under a random token budget) checked against feeding
 * every token on its own. */
static int mask_walks(const da_json_schema *s, const uint8_t *const *bytes, const int *len, int V, int end,
                      uint64_t seed, int walks) {
    da_token_mask *m = NULL;
    CHECK(!da_token_mask_build(&m, bytes, len, V, &end, 1).code);
    da_rng rng;
    da_rng_seed(&rng, seed);
    uint8_t *allowed = malloc((size_t)V);
    CHECK(allowed);
    int bad = 0;
    for (int walk = 0; walk < walks && !bad; walk++) {
        da_json_state st;
        da_json_start(s, &st);
        for (int steps = 0; steps < 40 && !bad; steps++) {
            int left = (int)(da_rng_next(&rng) % 40) - 5;
            int n = da_token_mask_allowed(m, s, &st, left, allowed);
            int count = 0;
            for (int t = 0; t < V && !bad; t++) {
                int want;
                if (t == end) want = da_json_done(s, &st);
                else {
                    da_json_state next = st;
                    int l = da_json_feed_bytes(s, &next, bytes[t], (size_t)len[t]) ? da_json_min_left(s, &next) : -1;
                    want = len[t] > 0 && l >= 0 && (left <= 0 || l <= left - 1);
                }
                if (want != allowed[t]) {
                    fprintf(stderr, "  token %d (\"%.*s\"), budget %d: mask %d, brute force %d\n", t, len[t],
                            (const char *)bytes[t], left, allowed[t], want);
                    bad = 1;
                }
                count += want;
            }
            if (!bad && count != n) fprintf(stderr, "  mask counts %d, brute force %d\n", n, count), bad = 1;
            /* move on by a random allowed token of the unbudgeted mask */
            da_token_mask_allowed(m, s, &st, 0, allowed);
            int pick = -1, seen = 0;
            for (int t = 0; t < V; t++)
                if (allowed[t] && t != end && da_rng_next(&rng) % (uint64_t)++seen == 0) pick = t;
            if (pick < 0) break;
            if (!bad && !da_json_feed_bytes(s, &st, bytes[pick], (size_t)len[pick])) bad = 1;
        }
    }
    free(allowed);
    da_token_mask_free(m);
    return bad;
}

/* The trie walk gives the mask a token-by-token check gives. */
static int test_mask_matches_brute_force(void) {
    const char *words[] = {"{", "}", "\"", "\"name", "\":", "\": \"", "ab", "abc", "\\u00", "e9", "1", "13", "0",
                           "8", ",", ", \"", "age", "\"age\":", "tags", "[", "]", "null", "nu", "ll", " ", "\n",
                           "\xc3", "\xa9", "\xc3\xa9", "bc\"", "a\"", "\"a\"", "\"bc\"]", "e", "1.5", "-", "", "9"};
    enum { NW = sizeof words / sizeof words[0] };
    const uint8_t *bytes[NW + 256];
    int len[NW + 256];
    uint8_t one[256];
    for (int i = 0; i < 256; i++) one[i] = (uint8_t)i, bytes[i] = &one[i], len[i] = 1;
    for (int i = 0; i < NW; i++) bytes[256 + i] = (const uint8_t *)words[i], len[256 + i] = (int)strlen(words[i]);
    int end = -1; /* the empty word stands for an end token */
    for (int i = 0; i < NW; i++)
        if (!len[256 + i]) end = 256 + i;
    da_json_schema *s = compile(schemas[0]);
    CHECK(s);
    int bad = mask_walks(s, bytes, len, NW + 256, end, 3, 20);
    da_json_schema_free(s);
    return bad;
}

/* The same over a vocabulary shaped like a BPE one (Llama 3's: every number of 1 to 3 digits, digits glued to
 * punctuation and spaces, words of many lengths, UTF-8 pieces), on the schemas whose masks take shortcuts:
 * bounded integers and numbers (dead digit prefixes end early), strings with min/maxLength (the plain tokens
 * by character count). */
static int test_mask_bpe_like_vocabulary(void) {
    static const char *const pieces[] = {
        "\"", "\",", "\"}", "\":", "\": ", "\":\"", "\", \"", "\"]", "\"},", "},", "}", "{\"", "{", "[", "]", ",",
        ", ", " ", "  ", "\n", "-", ".", "e", "E", "e+", "e-", ".5", ".0", "-1", "-0", " -", "1.", "0.", "00",
        "1e", "a", "ab", "abc", "abcd", "abcde", "abcdefgh", "name", "age", "\"name", "\"age", "h\xc3\xa9", "\xc3\xa9",
        "\xc3", "\xa9", "\xe2\x80", "\xe2\x80\x94", "\x94", "\xf0\x9f\x98\x80", "\\", "\\n", "\\\"", "\\u", "\\u00e9",
        "x\"", "ab\"", "abc\",", "true", "false", "null", "nu", "tr", "ue", ""};
    enum { NP = sizeof pieces / sizeof pieces[0], ND = 10 + 100 + 1000, NV = 256 + NP + 3 * ND };
    static uint8_t store[NV][8];
    static const uint8_t *bytes[NV];
    static int len[NV];
    int V = 0, end = -1;
    for (int i = 0; i < 256; i++, V++) store[V][0] = (uint8_t)i, len[V] = 1;
    for (int i = 0; i < NP; i++, V++) {
        len[V] = (int)strlen(pieces[i]);
        memcpy(store[V], pieces[i], (size_t)len[V]);
        if (!len[V]) end = V;
    }
    for (int digits = 1; digits <= 3; digits++) /* 0..9, 00..99, 000..999; each bare, after a space, before a comma */
        for (int v = 0; v < (digits == 1 ? 10 : digits == 2 ? 100 : 1000); v++) {
            char d[8];
            snprintf(d, sizeof d, "%0*d", digits, v);
            len[V] = snprintf((char *)store[V], 8, "%s", d), V++;
            len[V] = snprintf((char *)store[V], 8, " %s", d), V++;
            len[V] = snprintf((char *)store[V], 8, "%s,", d), V++;
        }
    CHECK(V == NV);
    for (int i = 0; i < V; i++) bytes[i] = store[i];
    const char *const masked[] = {
        "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\",\"minimum\":0,"
        "\"maximum\":150}},\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":-120,\"exclusiveMaximum\":7}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":95,\"maximum\":1005}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"exclusiveMinimum\":-2.5,\"maximum\":31.25}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0.5}}",
        "{\"type\":\"array\",\"items\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":8}}",
        "{\"type\":\"object\",\"properties\":{\"s\":{\"type\":\"string\",\"minLength\":6}},\"required\":[\"s\"]}",
        schemas[0]};
    for (size_t i = 0; i < sizeof masked / sizeof masked[0]; i++) {
        da_json_schema *s = compile(masked[i]);
        CHECK(s);
        int bad = mask_walks(s, bytes, len, V, end, 11 + i, 12);
        da_json_schema_free(s);
        if (bad) {
            fprintf(stderr, "  schema %s\n", masked[i]);
            return 1;
        }
    }
    return 0;
}

static int test_any_object(void) {
    da_json_schema *s = NULL;
    CHECK(!da_json_schema_any_object(&s).code);
    CHECK(accepts(s, "{}") && accepts(s, "{\"a\":[1,{\"b\":null}],\"c\":\"d\",\"e\":-1.5e+3}"));
    CHECK(!accepts(s, "[1]") && !accepts(s, "\"x\"") && !accepts(s, "{\"a\":tru}") && !accepts(s, "{a:1}"));
    da_json_state st;
    da_json_start(s, &st);
    CHECK(da_json_feed_bytes(s, &st, (const uint8_t *)"{\"a\":[1", 7));
    CHECK(da_json_min_left(s, &st) == 2); /* "]}" */
    da_json_schema_free(s);
    return 0;
}

int main(void) {
    RUN(test_refuses_outside_subset);
    RUN(test_texts);
    RUN(test_any_object);
    RUN(test_random_answers_validate);
    RUN(test_mask_matches_brute_force);
    RUN(test_mask_bpe_like_vocabulary);
    TH_SUMMARY();
}
