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

/* llama.cpp names pre-tokenisers; only GPT-2's is named here (others: NULL,
 * and the file's tokenizer.huggingface.json says what they are). */
static const char *pre_name(const cJSON *root) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (!pre) return "gpt-2"; /* diffattn's first files had none: GPT-2's pattern */
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "ByteLevel") && json_bool(pre, "use_regex", 1) &&
        !json_bool(pre, "add_prefix_space", 0))
        return "gpt-2";
    return NULL;
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

da_status da_tok_ggml_to_json(const da_tok_ggml *g, const char *name, char **json) {
    *json = NULL;
    if (g->pre && strcmp(g->pre, "gpt-2"))
        return da_errorf("%s: tokenizer.ggml.pre is \"%s\" and the file has no tokenizer.huggingface.json: only "
                         "GPT-2's pre-tokeniser (\"gpt-2\") can be rebuilt from the token list",
                         name, g->pre);
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
