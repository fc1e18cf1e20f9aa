/* The one writer of result JSON: cJSON objects whose numbers keep the
 * decimals each field asks for, so --json lines and result files read the
 * same run to run. A failed allocation leaves a field out; da_json_finish
 * then still returns text or NULL. */
#ifndef DA_JSON_OUT_H
#define DA_JSON_OUT_H

#include <cjson/cJSON.h>

/* key: v with `decimals` digits after the point; null when v is not finite. */
void da_json_fixed(cJSON *o, const char *key, double v, int decimals);
void da_json_int(cJSON *o, const char *key, long long v);
void da_json_str(cJSON *o, const char *key, const char *s);
void da_json_bool(cJSON *o, const char *key, int v);
/* A new object appended to the array arr (NULL when out of memory). */
cJSON *da_json_push(cJSON *arr);
/* root as one line of text (malloc'd; the caller frees), root deleted. NULL when out of memory. */
char *da_json_finish(cJSON *root);

#endif
