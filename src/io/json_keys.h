/* Duplicate keys in parsed JSON: cJSON keeps every member of an object, and
 * its lookups take the first of two with one name where Python takes the
 * last, so a reader that wants one meaning refuses them (config.json, the
 * server's requests). */
#ifndef DA_JSON_KEYS_H
#define DA_JSON_KEYS_H

#include <cjson/cJSON.h>

/* A key that appears twice among o's own members (not its children's), or
 * NULL; NULL too for an array or a value. Sorted: O(n log n). *oom is set
 * when the check could not be made. */
const char *da_json_duplicate_key(const cJSON *o, int *oom);

#endif
