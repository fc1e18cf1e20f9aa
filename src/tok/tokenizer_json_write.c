/* A byte-level BPE tokenizer.json printed from its parts (tokenizer.h). */
#include <cjson/cJSON.h>

#include "tok/tokenizer.h"

char *da_tok_bytelevel_json(cJSON *vocab, cJSON *merges, cJSON *added) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *pre = cJSON_CreateObject();
    int ok = root && model && pre && vocab && merges && added;
    ok = ok && cJSON_AddStringToObject(root, "version", "1.0") && cJSON_AddItemToObject(root, "added_tokens", added);
    if (ok) added = NULL;
    ok = ok && cJSON_AddNullToObject(root, "normalizer") && cJSON_AddStringToObject(pre, "type", "ByteLevel") &&
         cJSON_AddBoolToObject(pre, "add_prefix_space", 0) && cJSON_AddBoolToObject(pre, "use_regex", 1) &&
         cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    if (ok) pre = NULL;
    ok = ok && cJSON_AddStringToObject(model, "type", "BPE") && cJSON_AddItemToObject(model, "vocab", vocab);
    if (ok) vocab = NULL;
    ok = ok && cJSON_AddItemToObject(model, "merges", merges);
    if (ok) merges = NULL;
    ok = ok && cJSON_AddItemToObject(root, "model", model);
    if (ok) model = NULL;
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    cJSON_Delete(model);
    cJSON_Delete(pre);
    cJSON_Delete(vocab);
    cJSON_Delete(merges);
    cJSON_Delete(added);
    return text;
}
