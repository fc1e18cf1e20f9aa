/* Fuzz target: the slot-file reader (da_slot_file_parse, infer/slot_file.c),
 * what POST /slots/{id}?action=restore reads. The first byte picks the session
 * the file goes into (its low 3 bits: slot_models.h's f32, f16, q8, ring,
 * MoBA's own cache) and, with bit 3, has the header's checksum set to the
 * file's, so that mutated files reach the checks after it; the rest is the
 * file. A file that is taken must describe exactly the
 * session it went into; one that is refused must leave the session as it was. */
#include <stddef.h>
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
    const int kind = (data[0] & 7) % SLOT_KINDS;
    da_session *s = models.s[kind];
    const uint64_t fp = models.fp[slot_engine_of(kind)];
    const size_t n_file = size - 1;
    uint8_t *file_bytes = malloc(n_file ? n_file : 1);
    if (!file_bytes) return 0;
    memcpy(file_bytes, data + 1, n_file);
    if ((data[0] & 8) && n_file >= sizeof(da_slot_header)) {
        da_slot_hasher x = {0, 0, 0};
        da_slot_hash_add(&x, file_bytes + sizeof(da_slot_header), n_file - sizeof(da_slot_header));
        const uint64_t sum = da_slot_hash_end(&x);
        memcpy(file_bytes + offsetof(da_slot_header, checksum), &sum, sizeof sum);
    }
    s->len = 3; /* a cache that a refused file must leave alone */
    int *tokens = NULL, n = 0;
    da_status st = da_slot_file_parse("fuzz.slot", file_bytes, n_file, s, fp, &tokens, &n);
    da_slot_header file, now = da_slot_header_of(s, fp);
    memset(&file, 0, sizeof file);
    if (n_file >= sizeof file) memcpy(&file, file_bytes, sizeof file);
    free(file_bytes);
    if (st.code) {
        if (s->len != 3 || tokens || n || !strstr(st.msg, "fuzz.slot")) abort();
        return 0;
    }
    now.checksum = file.checksum;
    if (n != s->len || memcmp(&file, &now, sizeof file)) abort();
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= SLOT_VOCAB) abort();
    free(tokens);
    return 0;
}
