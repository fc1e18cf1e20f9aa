/* A tokenizer inside a model file: tokenizer.json text <-> llama.cpp's
 * tokenizer.ggml.* arrays (see tokenizer_embed.h). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_embed.h"

#define MAX_IDS (1 << 24) /* the tokenizer's own bound on ids */

void da_tok_ggml_free(da_tok_ggml *g) {
    for (int i = 0; g->tokens && i < g->n_tokens; i++) free(g->tokens[i]);
    for (int i = 0; g->merges && i < g->n_merges; i++) free(g->merges[i]);
    free(g->tokens);
    free(g->types);
    free(g->merges);
    memset(g, 0, sizeof *g);
}

static int json_bool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* llama.cpp's name of a Split pattern whose ids it reproduces, or NULL. */
static const char *pre_of_pattern(const char *pattern) {
    if (!strcmp(pattern, DA_LLAMA3_PATTERN)) return "llama-bpe";
    if (!strcmp(pattern, DA_QWEN2_PATTERN)) return "qwen2";
    if (!strcmp(pattern, DA_O200K_PATTERN)) return "gpt-4o";
    return NULL;
}

/* The Split pattern and ignore_merges of a llama.cpp pre name ("gpt-2": NULL
 * pattern, GPT-2's ByteLevel); -1 for a name not rebuilt here. */
static int pattern_of_pre(const char *pre, const char **pattern, int *ignore_merges) {
    *pattern = NULL;
    *ignore_merges = 0;
    if (!strcmp(pre, "gpt-2")) return 0;
    if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3") || !strcmp(pre, "llama-v3"))
        *pattern = DA_LLAMA3_PATTERN, *ignore_merges = 1;
    else if (!strcmp(pre, "qwen2")) *pattern = DA_QWEN2_PATTERN;
    else if (!strcmp(pre, "gpt-4o") || !strcmp(pre, "llama4")) *pattern = DA_O200K_PATTERN;
    return *pattern ? 0 : -1;
}

/* llama.cpp names pre-tokenisers; GPT-2's, Llama 3's, Qwen2/3's and
 * GPT-4o's are named here (others: NULL, and the file's
 * tokenizer.huggingface.json says what they are). */
static const char *pre_name(const cJSON *root) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!pre) return "gpt-2"; /* diffattn's first files had none: GPT-2's pattern */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "ByteLevel") && json_bool(pre, "use_regex", 1) &&
        !json_bool(pre, "add_prefix_space", 0))
        return "gpt-2";
    const cJSON *steps = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "Sequence") || cJSON_GetArraySize(steps) != 2)
        return NULL;
    const cJSON *split = steps->child, *bl = split->next;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(split, "type"), *bt = cJSON_GetObjectItemCaseSensitive(bl, "type");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    /* the two spellings the encoder takes (tokenizer_json_read.c): Isolated with invert false (Llama 3, Qwen),
     * Removed with invert true (GPT-4o); with these patterns, which match every character, both cut text into the
     * same pieces */
    const int inverted = json_bool(split, "invert", 0);
    if (!cJSON_IsString(st) || strcmp(st->valuestring, "Split") || !cJSON_IsString(bt) ||
        strcmp(bt->valuestring, "ByteLevel") || json_bool(bl, "use_regex", 1) || !cJSON_IsString(re) ||
        !cJSON_IsString(beh) || strcmp(beh->valuestring, inverted ? "Removed" : "Isolated"))
        return NULL;
    return pre_of_pattern(re->valuestring);
}

const char *da_tokenizer_llama_pre(const char *json, size_t n) {
    cJSON *root = cJSON_ParseWithLength(json, n);
    const char *pre = root ? pre_name(root) : NULL; /* a string literal: it outlives root */
    cJSON_Delete(root);
    return pre;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

da_status da_tok_ggml_from_json(da_tok_ggml *g, const char *json, size_t n) {
    memset(g, 0, sizeof *g);
    g->bos = g->eos = -1;
    g->add_bos = -1;
    cJSON *root = cJSON_ParseWithLength(json, n);
    if (!root) return da_errorf("the embedded tokenizer.json is not valid JSON");
    da_status st = da_ok();
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges)) {
        cJSON_Delete(root);
        return da_errorf("the embedded tokenizer.json lacks model.vocab or model.merges");
    }
    int max_id = -1;
    for (const cJSON *e = vocab->child; e; e = e->next)
        if (cJSON_IsNumber(e) && e->valuedouble >= 0 && e->valuedouble < MAX_IDS && (int)e->valuedouble > max_id)
            max_id = (int)e->valuedouble;
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (cJSON_IsNumber(id) && id->valuedouble >= 0 && id->valuedouble < MAX_IDS && (int)id->valuedouble > max_id)
            max_id = (int)id->valuedouble;
    }
    g->n_tokens = max_id + 1;
    g->n_merges = cJSON_GetArraySize(merges);
    g->tokens = calloc((size_t)g->n_tokens + 1, sizeof *g->tokens);
    g->types = calloc((size_t)g->n_tokens + 1, sizeof *g->types);
    g->merges = calloc((size_t)g->n_merges + 1, sizeof *g->merges);
    if (!g->tokens || !g->types || !g->merges) st = da_errorf("out of memory");
    for (const cJSON *e = vocab->child; !st.code && e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= MAX_IDS) continue;
        int id = (int)e->valuedouble;
        if (g->tokens[id]) continue;
        if (!(g->tokens[id] = dup_str(e->string))) st = da_errorf("out of memory");
        g->types[id] = DA_TOKTYPE_NORMAL;
    }
    /* added tokens win over a vocabulary entry of the same id: their text is the content */
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; !st.code && e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= MAX_IDS || !cJSON_IsString(c)) continue;
        int i = (int)id->valuedouble;
        free(g->tokens[i]);
        if (!(g->tokens[i] = dup_str(c->valuestring))) st = da_errorf("out of memory");
        g->types[i] = json_bool(e, "special", 1) ? DA_TOKTYPE_CONTROL : DA_TOKTYPE_USER_DEFINED;
        if (!strcmp(c->valuestring, "<|endoftext|>")) g->bos = g->eos = i;
    }
    for (int i = 0; !st.code && i < g->n_tokens; i++) {
        if (g->tokens[i]) continue;
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%d]", i);
        if (!(g->tokens[i] = dup_str(pad))) st = da_errorf("out of memory");
        g->types[i] = DA_TOKTYPE_UNUSED;
    }
    int r = 0;
    for (const cJSON *m = merges->child; !st.code && m; m = m->next, r++) {
        if (cJSON_IsString(m)) {
            g->merges[r] = dup_str(m->valuestring);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            size_t la = strlen(m->child->valuestring), lb = strlen(m->child->next->valuestring);
            if ((g->merges[r] = malloc(la + lb + 2)))
                snprintf(g->merges[r], la + lb + 2, "%s %s", m->child->valuestring, m->child->next->valuestring);
        } else {
            st = da_errorf("the embedded tokenizer.json: merge #%d is neither \"a b\" nor [\"a\", \"b\"]", r + 1);
            break;
        }
        if (!g->merges[r]) st = da_errorf("out of memory");
    }
    g->pre = pre_name(root);
    cJSON_Delete(root);
    if (st.code) da_tok_ggml_free(g);
    return st;
}

/* text (a GPT-2 ByteLevel tokenizer.json) with the Split pattern of llama.cpp's
 * pre-tokeniser, ignore_merges, and a post_processor putting bos first; NULL
 * when out of memory. Frees text. */
static char *with_llama_rules(char *text, const char *pattern, int ignore_merges, const char *bos, int bos_id) {
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return NULL;
    cJSON *seq = cJSON_CreateObject(), *steps = cJSON_CreateArray(), *split = cJSON_CreateObject();
    cJSON *re = cJSON_CreateObject(), *bl = cJSON_CreateObject();
    int ok = seq && steps && split && re && bl && cJSON_AddStringToObject(seq, "type", "Sequence") &&
             cJSON_AddStringToObject(split, "type", "Split") && cJSON_AddStringToObject(re, "Regex", pattern) &&
             cJSON_AddItemToObject(split, "pattern", re) && (re = NULL, 1) &&
             cJSON_AddStringToObject(split, "behavior", "Isolated") && cJSON_AddBoolToObject(split, "invert", 0) &&
             cJSON_AddItemToArray(steps, split) && (split = NULL, 1) && cJSON_AddStringToObject(bl, "type", "ByteLevel") &&
             cJSON_AddBoolToObject(bl, "add_prefix_space", 0) && cJSON_AddBoolToObject(bl, "trim_offsets", 0) &&
             cJSON_AddBoolToObject(bl, "use_regex", 0) && cJSON_AddItemToArray(steps, bl) && (bl = NULL, 1) &&
             cJSON_AddItemToObject(seq, "pretokenizers", steps) && (steps = NULL, 1) &&
             cJSON_ReplaceItemInObjectCaseSensitive(root, "pre_tokenizer", seq) && (seq = NULL, 1);
    ok = ok && cJSON_AddBoolToObject(cJSON_GetObjectItemCaseSensitive(root, "model"), "ignore_merges", ignore_merges);
    if (ok && bos) { /* TemplateProcessing: bos, then sequence A */
        char spec[512];
        snprintf(spec, sizeof spec,
                 "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"bos\",\"type_id\":0}},"
                 "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"bos\":{\"id\":\"bos\","
                 "\"ids\":[%d],\"tokens\":[]}}}",
                 bos_id);
        cJSON *pp = cJSON_Parse(spec);
        ok = pp && cJSON_AddItemToObject(root, "post_processor", pp);
        if (!ok) cJSON_Delete(pp);
    }
    char *out = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(seq);
    cJSON_Delete(steps);
    cJSON_Delete(split);
    cJSON_Delete(re);
    cJSON_Delete(bl);
    cJSON_Delete(root);
    return out;
}

da_status da_tok_ggml_to_json(const da_tok_ggml *g, const char *name, char **json) {
    *json = NULL;
    const char *pattern;
    int ignore_merges;
    if (!g->pre)
        return da_errorf("%s: tokenizer.ggml.pre is missing (llama.cpp's \"default\" pre-tokeniser, which diffattn "
                         "does not reproduce) and the file has no tokenizer.huggingface.json",
                         name);
    if (pattern_of_pre(g->pre, &pattern, &ignore_merges))
        return da_errorf("%s: tokenizer.ggml.pre \"%s\" is not supported: diffattn rebuilds llama.cpp's gpt-2, "
                         "llama-bpe, qwen2 and gpt-4o pre-tokenisers exactly",
                         name, g->pre);
    if (g->add_bos == 1 && (g->bos < 0 || g->bos >= g->n_tokens))
        return da_errorf("%s: tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id %d is not a token",
                         name, g->bos);
    cJSON *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray(), *added = cJSON_CreateArray();
    int ok = vocab && merges && added;
    for (int i = 0; ok && i < g->n_tokens; i++) {
        const int t = g->types[i];
        if (t == DA_TOKTYPE_UNUSED) continue;
        if (t == DA_TOKTYPE_CONTROL || t == DA_TOKTYPE_USER_DEFINED) {
            cJSON *e = cJSON_CreateObject();
            ok = e && cJSON_AddItemToArray(added, e) && cJSON_AddNumberToObject(e, "id", i) &&
                 cJSON_AddStringToObject(e, "content", g->tokens[i]) &&
                 cJSON_AddBoolToObject(e, "special", t == DA_TOKTYPE_CONTROL);
        } else {
            ok = cJSON_AddNumberToObject(vocab, g->tokens[i], i) != NULL;
        }
    }
    for (int i = 0; ok && i < g->n_merges; i++) {
        cJSON *s = cJSON_CreateString(g->merges[i]);
        ok = s && cJSON_AddItemToArray(merges, s);
    }
    char *text = ok ? da_tok_bytelevel_json(vocab, merges, added) : NULL;
    if (!ok) {
        cJSON_Delete(vocab);
        cJSON_Delete(merges);
        cJSON_Delete(added);
    }
    if (text && (pattern || g->add_bos == 1))
        text = with_llama_rules(text, pattern ? pattern : DA_GPT2_PATTERN, ignore_merges,
                                g->add_bos == 1 ? g->tokens[g->bos] : NULL, g->bos);
    if (!text) return da_errorf("%s: out of memory rebuilding the tokenizer", name);
    *json = text;
    return da_ok();
}

da_status da_model_tokenizer(const da_model *m, da_tokenizer **out) {
    *out = NULL;
    if (!m->tokenizer_json) return da_ok();
    da_status st = da_tokenizer_from_json(out, m->tokenizer_json, strlen(m->tokenizer_json), "the model's tokenizer");
    if (st.code) return st;
    if (da_tokenizer_vocab_size(*out) != m->cfg.vocab_size) {
        st = da_errorf("the model's tokenizer has %d tokens but its vocabulary (vocab_size) %d",
                       da_tokenizer_vocab_size(*out), m->cfg.vocab_size);
        da_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}
