/* The result JSON writer (see json_out.h). */
#include <math.h>
#include <stdio.h>

#include "io/json_out.h"

void da_json_fixed(cJSON *o, const char *key, double v, int decimals) {
    if (!isfinite(v)) {
        cJSON_AddNullToObject(o, key);
        return;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", decimals, v);
    cJSON_AddRawToObject(o, key, buf);
}

void da_json_int(cJSON *o, const char *key, long long v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld", v);
    cJSON_AddRawToObject(o, key, buf);
}

void da_json_str(cJSON *o, const char *key, const char *s) {
    cJSON_AddStringToObject(o, key, s ? s : "");
}

void da_json_bool(cJSON *o, const char *key, int v) {
    cJSON_AddBoolToObject(o, key, v);
}

cJSON *da_json_push(cJSON *arr) {
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

char *da_json_finish(cJSON *root) {
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}
