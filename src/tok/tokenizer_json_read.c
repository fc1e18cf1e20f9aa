/* Hugging Face tokenizer.json files whose model is byte-level BPE: the
 * pre-tokeniser, normalizer, decoder, added tokens and post-processor each
 * read into the tokenizer, or refused when its ids or text would differ
 * from Hugging Face's. */
#define _GNU_SOURCE /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer.h"
#include "tok/tokenizer_internal.h"

static int json_true(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* o's "type" string; "(none)" when absent, "(not a string)" when another JSON value. */
static const char *json_type(const cJSON *o) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(v) ? v->valuestring : v ? "(not a string)" : "(none)";
}

/* A ByteLevel pre-tokeniser step: it maps bytes to GPT-2's alphabet (which
 * this tokenizer does implicitly) and, with use_regex, splits with GPT-2's
 * pattern. *uses_regex gets use_regex (default true). */
static da_status byte_level_step(const char *path, const char *field, const cJSON *p, int *uses_regex) {
    if (json_true(p, "add_prefix_space", 0))
        return da_errorf("%s: %s.add_prefix_space = true is not supported", path, field);
    *uses_regex = json_true(p, "use_regex", 1);
    return da_ok();
}

/* The pre-tokeniser as one regex (*pattern points into root, or is
 * DA_GPT2_PATTERN): ByteLevel (use_regex true), or Sequence [Split (Regex;
 * behavior Isolated with invert false, as Llama 3 and Qwen write it, or
 * Removed with invert true, as GPT-4o does), ByteLevel (use_regex false)].
 * *drop_gaps gets 1 for the second kind of Split, which keeps only the text
 * the regex matches. Anything else is refused: its ids would differ. */
static da_status parse_pre_tokenizer(const char *path, const cJSON *root, const char **pattern, int *drop_gaps) {
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    int uses_regex;
    da_status st;
    if (!pre) { /* diffattn's own hand-written files before pre_tokenizer was read */
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (!cJSON_IsObject(pre))
        return da_errorf("%s: pre_tokenizer is null; only byte-level pre-tokenisers (ByteLevel, or Sequence of "
                         "Split and ByteLevel) are supported",
                         path);
    const char *type = json_type(pre);
    if (!strcmp(type, "ByteLevel")) {
        if ((st = byte_level_step(path, "pre_tokenizer", pre, &uses_regex)).code) return st;
        if (!uses_regex) return da_errorf("%s: pre_tokenizer ByteLevel with use_regex = false alone is not supported", path);
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (strcmp(type, "Sequence"))
        return da_errorf("%s: pre_tokenizer.type \"%s\" is not supported (ByteLevel, or Sequence of Split and ByteLevel)",
                         path, type);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    const cJSON *split = NULL, *bl = NULL;
    int i = 0;
    for (const cJSON *p = cJSON_IsArray(list) ? list->child : NULL; p; p = p->next, i++) {
        const char *pt = json_type(p);
        if (!strcmp(pt, "Split") && !split && !bl) split = p;
        else if (!strcmp(pt, "ByteLevel") && !bl) bl = p;
        else
            return da_errorf("%s: pre_tokenizer.pretokenizers[%d].type \"%s\" is not supported here (expected Split "
                             "then ByteLevel)",
                             path, i, pt);
    }
    if (!bl) return da_errorf("%s: pre_tokenizer.pretokenizers lacks a ByteLevel step (not a byte-level BPE?)", path);
    if ((st = byte_level_step(path, "pre_tokenizer.pretokenizers[ByteLevel]", bl, &uses_regex)).code) return st;
    if (!split) {
        if (!uses_regex) return da_errorf("%s: pre_tokenizer has no Split and ByteLevel.use_regex = false", path);
        *pattern = DA_GPT2_PATTERN;
        return da_ok();
    }
    if (uses_regex)
        return da_errorf("%s: pre_tokenizer splits twice (Split, then ByteLevel with use_regex = true): not supported",
                         path);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(split, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(split, "behavior");
    if (!cJSON_IsString(re))
        return da_errorf("%s: pre_tokenizer Split.pattern must be {\"Regex\": ...} (a String pattern is not supported)",
                         path);
    const char *b = cJSON_IsString(beh) ? beh->valuestring : "(none)";
    *drop_gaps = json_true(split, "invert", 0);
    if (strcmp(b, *drop_gaps ? "Removed" : "Isolated"))
        return da_errorf("%s: pre_tokenizer Split.behavior \"%s\" is not supported with invert = %s (Isolated with "
                         "invert false, or Removed with invert true)",
                         path, b, *drop_gaps ? "true" : "false");
    *pattern = re->valuestring;
    return da_ok();
}

/* decoder: ByteLevel (what decoding does: the byte alphabet back to bytes),
 * none, or a Sequence of ByteLevel steps; Metaspace, Replace and the others
 * change the text and are refused. truncation and padding change the ids of
 * an encoding: they must be null. */
static da_status check_decoder_and_lengths(const char *path, const cJSON *root) {
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (dec && !cJSON_IsNull(dec)) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(dec, "decoders");
        int i = 0;
        for (const cJSON *d = strcmp(json_type(dec), "Sequence") ? dec : cJSON_IsArray(list) ? list->child : NULL; d;
             d = d == dec ? NULL : d->next, i++)
            if (strcmp(json_type(d), "ByteLevel")) {
                char field[48] = "decoder";
                if (d != dec) snprintf(field, sizeof field, "decoder.decoders[%d]", i);
                return da_errorf("%s: %s.type \"%.40s\" is not supported (a byte-level BPE decodes with ByteLevel); "
                                 "its text would differ from Hugging Face's",
                                 path, field, json_type(d));
            }
    }
    static const char *const lengths[] = {"truncation", "padding"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, lengths[k]);
        if (v && !cJSON_IsNull(v))
            return da_errorf("%s: %s is set; diffattn encodes whole texts without %s: set it to null", path,
                             lengths[k], k ? "padding" : "cutting them");
    }
    return da_ok();
}

/* normalizer: none or NFC; the model's options that change ids. */
static da_status parse_options(da_tokenizer *t, const char *path, const cJSON *root, const cJSON *model) {
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        if (strcmp(json_type(norm), "NFC"))
            return da_errorf("%s: normalizer.type \"%s\" is not supported (none or NFC)", path, json_type(norm));
        t->nfc = 1;
    }
    if (json_true(model, "byte_fallback", 0)) return da_errorf("%s: model.byte_fallback = true is not supported", path);
    static const char *const empty_or_null[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, empty_or_null[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
            return da_errorf("%s: model.%s must be empty or null", path, empty_or_null[i]);
    }
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (drop && !cJSON_IsNull(drop) && !(cJSON_IsNumber(drop) && drop->valuedouble == 0))
        return da_errorf("%s: model.dropout must be null", path);
    t->ignore_merges = json_true(model, "ignore_merges", 0);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        static const char *const flags[] = {"lstrip", "rstrip", "single_word"};
        for (int i = 0; i < 3; i++)
            if (json_true(e, flags[i], 0))
                return da_errorf("%s: added_tokens entry %d has %s = true, which is not supported", path,
                                 cJSON_GetObjectItemCaseSensitive(e, "id")
                                     ? cJSON_GetObjectItemCaseSensitive(e, "id")->valueint
                                     : -1,
                                 flags[i]);
    }
    return da_ok();
}

/* Added tokens with special = false (Qwen's <think>, <tool_call>, ...) are
 * still cut out of the text before pre-tokenisation, as Hugging Face does;
 * they join the matched list (and get their text when the vocabulary lacks
 * them). */
static da_status add_non_special(da_tokenizer *t, const char *path, const cJSON *added) {
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id"), *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(e, "special");
        if (!sp || cJSON_IsTrue(sp) || !cJSON_IsNumber(id) || !cJSON_IsString(c)) continue;
        int i = id->valueint;
        if (i < 0 || i >= t->vocab_size)
            return da_errorf("%s: added_tokens id %d is outside the vocabulary (0..%d)", path, i, t->vocab_size - 1);
        if (!c->valuestring[0]) return da_errorf("%s: added_tokens id %d has an empty content", path, i);
        if (!t->tok[i]) {
            t->tok[i] = (uint8_t *)strdup(c->valuestring);
            if (!t->tok[i]) return da_errorf("%s: out of memory", path);
            t->tok_len[i] = (uint32_t)strlen(c->valuestring);
        } else if (t->tok_len[i] != strlen(c->valuestring) || memcmp(t->tok[i], c->valuestring, t->tok_len[i])) {
            return da_errorf("%s: added token %d \"%.40s\" differs from the vocabulary's token of that id", path, i,
                             c->valuestring);
        }
        int known = 0;
        for (int s = 0; s < t->n_special; s++) known |= t->special_id[s] == i;
        if (known) continue;
        if (t->n_special == MAX_SPECIAL) return da_errorf("%s: more than %d added tokens", path, MAX_SPECIAL);
        t->special_id[t->n_special++] = i;
    }
    return da_ok();
}

/* The id of a token of the vocabulary that a post_processor adds, or -1. */
static int vocab_id(const da_tokenizer *t, const cJSON *id) {
    return da_tok_is_token_id(id) && (int)id->valuedouble < t->vocab_size && t->tok[(int)id->valuedouble]
               ? (int)id->valuedouble
               : -1;
}

/* One post-processor wraps what the earlier ones made: before[] goes in
 * front of the ids so far, after[] behind them. */
static da_status wrap_ids(da_tokenizer *t, const char *path, const char *field, const int *before, int nb,
                          const int *after, int na) {
    if (t->n_pre + nb > MAX_ADDED_AROUND || t->n_post + na > MAX_ADDED_AROUND)
        return da_errorf("%s: %s adds more than %d tokens before or after the text", path, field, MAX_ADDED_AROUND);
    memmove(t->pre + nb, t->pre, (size_t)t->n_pre * sizeof(int));
    memcpy(t->pre, before, (size_t)nb * sizeof(int));
    t->n_pre += nb;
    memcpy(t->post + t->n_post, after, (size_t)na * sizeof(int));
    t->n_post += na;
    return da_ok();
}

/* TemplateProcessing: the single-sequence template; the ids of its special
 * tokens (special_tokens[name].ids) before and after sequence A. */
static da_status parse_template(da_tokenizer *t, const char *path, const char *field, const cJSON *pp) {
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    if (!cJSON_IsArray(single)) return da_errorf("%s: %s.single must be an array", path, field);
    int ids[2][MAX_ADDED_AROUND], n[2] = {0, 0}, seen_a = 0;
    for (const cJSON *it = single->child; it; it = it->next) {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(sp ? sp : seq, "id");
        if (!cJSON_IsString(name))
            return da_errorf("%s: %s.single holds an item that is neither {\"SpecialToken\": {\"id\": ...}} nor "
                             "{\"Sequence\": {\"id\": \"A\"}}",
                             path, field);
        if (seq) {
            if (strcmp(name->valuestring, "A") || seen_a)
                return da_errorf("%s: %s.single must hold sequence \"A\" once (found \"%s\")", path, field,
                                 name->valuestring);
            seen_a = 1;
            continue;
        }
        const cJSON *tok = cJSON_GetObjectItemCaseSensitive(specials, name->valuestring);
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(tok, "ids");
        if (!cJSON_IsArray(list))
            return da_errorf("%s: %s.special_tokens lacks \"%.40s\" or its ids", path, field, name->valuestring);
        for (const cJSON *id = list->child; id; id = id->next) {
            if (n[seen_a] == MAX_ADDED_AROUND)
                return da_errorf("%s: %s adds more than %d tokens before or after the text", path, field,
                                 MAX_ADDED_AROUND);
            if ((ids[seen_a][n[seen_a]++] = vocab_id(t, id)) < 0)
                return da_errorf("%s: %s.special_tokens \"%.40s\" holds an id outside the vocabulary", path, field,
                                 name->valuestring);
        }
    }
    if (!seen_a) return da_errorf("%s: %s.single lacks sequence \"A\"", path, field);
    return wrap_ids(t, path, field, ids[0], n[0], ids[1], n[1]);
}

/* post_processor: none, ByteLevel (offsets only: no ids), TemplateProcessing,
 * BertProcessing / RobertaProcessing (cls before, sep after), or a Sequence of
 * these, each wrapping what the ones before it made. Others are refused. */
static da_status parse_post_processor(da_tokenizer *t, const char *path, const char *field, const cJSON *pp,
                                      int depth) {
    if (!pp || cJSON_IsNull(pp)) return da_ok();
    const char *type = json_type(pp);
    if (!strcmp(type, "ByteLevel")) return da_ok();
    if (!strcmp(type, "TemplateProcessing")) return parse_template(t, path, field, pp);
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls");
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        int c = cJSON_GetArraySize(cls) == 2 ? vocab_id(t, cJSON_GetArrayItem(cls, 1)) : -1;
        int e = cJSON_GetArraySize(sep) == 2 ? vocab_id(t, cJSON_GetArrayItem(sep, 1)) : -1;
        if (c < 0 || e < 0) return da_errorf("%s: %s.cls and .sep must be [token, id of the vocabulary]", path, field);
        return wrap_ids(t, path, field, &c, 1, &e, 1);
    }
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(pp, "processors");
    if (strcmp(type, "Sequence") || !cJSON_IsArray(list) || depth > 4)
        return da_errorf("%s: %s.type \"%s\" is not supported (ByteLevel, TemplateProcessing, BertProcessing, "
                         "RobertaProcessing, or a Sequence of these)",
                         path, field, type);
    int i = 0;
    for (const cJSON *p = list->child; p; p = p->next, i++) {
        char sub[128];
        snprintf(sub, sizeof sub, "%s.processors[%d]", field, i);
        da_status st = parse_post_processor(t, path, sub, p, depth + 1);
        if (st.code) return st;
    }
    return da_ok();
}

/* Hugging Face tokenizer.json whose model is byte-level BPE. */
da_status da_tok_read_hf(da_tokenizer *t, const char *path) {
    char *js = NULL;
    size_t n;
    /* the text: t->json when da_tokenizer_from_json gave it, else the file's (kept) */
    da_status st = t->json ? da_ok() : da_tok_read_file(path, &js, &n);
    if (st.code) return st;
    if (!t->json) t->json = js, t->json_len = n;
    cJSON *root = cJSON_ParseWithLength(t->json, t->json_len);
    if (!root) return da_errorf("%s: not valid JSON", path);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(model) || !cJSON_IsString(type) || strcmp(type->valuestring, "BPE"))
        st = da_errorf("%s: model.type is %s; only byte-level BPE tokenizers are supported", path,
                       cJSON_IsString(type) ? type->valuestring : "missing");
    else if (!cJSON_IsObject(vocab) || !cJSON_IsArray(merges))
        st = da_errorf("%s: model.vocab must be an object and model.merges an array", path);
    else if (added && !cJSON_IsArray(added))
        st = da_errorf("%s: added_tokens must be an array", path);
    const char *pattern = NULL;
    if (!st.code) st = parse_pre_tokenizer(path, root, &pattern, &t->drop_gaps);
    if (!st.code) st = parse_options(t, path, root, model);
    if (!st.code) st = check_decoder_and_lengths(path, root);
    if (!st.code) st = da_tok_build_vocab(t, path, vocab, added);
    if (!st.code) st = add_non_special(t, path, added);
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (!st.code) st = parse_post_processor(t, path, "post_processor", post, 0);
    if (!st.code && da_pair_map_init(&t->merges, (size_t)cJSON_GetArraySize(merges))) st = da_errorf("%s: out of memory", path);
    int rank = 0;
    for (const cJSON *m = merges ? merges->child : NULL; m && !st.code; m = m->next, rank++) {
        if (cJSON_IsString(m)) {
            st = da_tok_add_merge(t, path, m->valuestring, strlen(m->valuestring), rank);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            char buf[1024];
            int len = snprintf(buf, sizeof buf, "%s %s", m->child->valuestring, m->child->next->valuestring);
            st = len < (int)sizeof buf ? da_tok_add_merge(t, path, buf, (size_t)len, rank)
                                       : da_errorf("%s: merge #%d is too long", path, rank + 1);
        } else {
            st = da_errorf("%s: merge #%d is neither \"a b\" nor [\"a\", \"b\"]", path, rank + 1);
        }
    }
    if (!st.code) st = da_tok_compile_regex(t, pattern); /* pattern points into root */
    cJSON_Delete(root);
    return st;
}
