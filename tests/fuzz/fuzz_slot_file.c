/* Fuzz target: the slot-file reader (da_slot_file_parse, infer/slot_file.c),
 * what POST /slots/{id}?action=restore reads. The first byte picks the session
 * the file goes into (slot_models.h: f32, f16, q8, ring, MoBA's own cache);
 * the rest is the file. A file that is taken must describe exactly the
 * session it went into; one that is refused must leave the session as it was. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/slot_models.h"
#include "infer/engine.h"
#include "infer/session.h"

static slot_models models;
static int made;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!made) {
        if (slot_models_make(&models)) abort();
        made = 1;
    }
    if (size < 1) return 0;
    const int kind = data[0] % SLOT_KINDS;
    da_session *s = models.s[kind];
    const uint64_t fp = models.fp[slot_engine_of(kind)];
    s->len = 3; /* a cache that a refused file must leave alone */
    int *tokens = NULL, n = 0;
    da_status st = da_slot_file_parse("fuzz.slot", data + 1, size - 1, s, fp, &tokens, &n);
    if (st.code) {
        if (s->len != 3 || tokens || n || !strstr(st.msg, "fuzz.slot")) abort();
        return 0;
    }
    da_slot_header file, now = da_slot_header_of(s, fp);
    memcpy(&file, data + 1, sizeof file);
    now.checksum = file.checksum;
    if (n != s->len || memcmp(&file, &now, sizeof file)) abort();
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= SLOT_VOCAB) abort();
    free(tokens);
    return 0;
}
