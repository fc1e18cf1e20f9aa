/* Slot files (infer/slot_file.c): a session's cache written and read back
 * into another session continues with the same logits, bit for bit, for each
 * kind of cache (f32, f16, q8, an f32 ring, MoBA's own); a file is refused,
 * naming itself and what differs, when it comes from another model, holds
 * another KV type, is truncated, longer, of another version or damaged, and
 * the refusal leaves the session as it was; a write to a full device fails.
 *
 *     test_slot_file                    # the tests
 *     test_slot_file --seeds DIR        # writes the fuzz seeds (tests/fuzz/corpus/slot_file) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz/slot_models.h"
#include "harness.h"

static slot_models sm;
static char dir[64];

/* Feeds n tokens (from seed) to a fresh session of kind k; writes the file; its bytes in *data. */
static int save_kind(int k, int n, int seed, const char *name, unsigned char **data, size_t *size) {
    da_session *s = sm.s[k];
    da_session_reset(s);
    int toks[SLOT_MAX_T * 2];
    for (int i = 0; i < n; i++) toks[i] = (seed * 7 + i * 13) % SLOT_VOCAB;
    for (int i = 0; i < n; i += SLOT_BATCH) {
        const float *lg = NULL;
        const int m = n - i < SLOT_BATCH ? n - i : SLOT_BATCH;
        CHECK(!da_session_feed(s, toks + i, m, 0, &lg).code);
    }
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t written = 0;
    da_status st = da_slot_file_write(path, s, toks, n, sm.fp[slot_engine_of(k)], &written);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code);
    *data = th_read_file(path, size);
    CHECK(*data && *size == written);
    return 0;
}

/* Each kind: 10 tokens saved (a ring of 7 rows wraps), parsed into a second session of the same kind, then one
 * more token fed to both: the logits agree bit for bit. */
static int test_round_trip(void) {
    for (int k = 0; k < SLOT_KINDS; k++) {
        unsigned char *data = NULL;
        size_t n = 0;
        CHECK(!save_kind(k, 10, k, "rt.slot", &data, &n));
        da_session_opts o = da_session_opts_default();
        o.max_T = SLOT_MAX_T, o.max_batch = SLOT_BATCH, o.kv_f16 = k == SLOT_F16, o.kv_int8 = k == SLOT_Q8;
        da_session *b = NULL;
        CHECK(!da_session_create(&b, sm.e[slot_engine_of(k)], &o).code);
        int *toks = NULL, nt = 0;
        da_status st = da_slot_file_parse("rt.slot", data, n, b, sm.fp[slot_engine_of(k)], &toks, &nt);
        if (st.code) fprintf(stderr, "  kind %d: %s\n", k, st.msg);
        CHECK(!st.code && nt == 10 && da_session_len(b) == 10 && toks[3] == (k * 7 + 39) % SLOT_VOCAB);
        const int next = 5;
        const float *la = NULL, *lb = NULL;
        CHECK(!da_session_feed(sm.s[k], &next, 1, 0, &la).code && !da_session_feed(b, &next, 1, 0, &lb).code);
        if (memcmp(la, lb, SLOT_VOCAB * sizeof(float))) {
            fprintf(stderr, "  kind %d: logits differ after the restore (%g vs %g at 0)\n", k, (double)la[0], (double)lb[0]);
            return 1;
        }
        free(toks);
        free(data);
        da_session_free(b);
    }
    return 0;
}

/* da_slot_file_parse into kind k must fail with each of the texts in msg, and leave the session's length. */
static int refused(int k, const unsigned char *data, size_t n, uint64_t fp, const char *a, const char *b) {
    da_session *s = sm.s[k];
    da_session_reset(s);
    int *toks = NULL, nt = 0;
    da_status st = da_slot_file_parse("x.slot", data, n, s, fp, &toks, &nt);
    if (!st.code || !strstr(st.msg, "x.slot") || !strstr(st.msg, a) || (b && !strstr(st.msg, b))) {
        fprintf(stderr, "  expected an error with \"%s\"%s%s, got: %s\n", a, b ? " and " : "", b ? b : "",
                st.code ? st.msg : "success");
        return 1;
    }
    CHECK(da_session_len(s) == 0 && !toks && nt == 0);
    return 0;
}

static int test_refusals(void) {
    unsigned char *f32 = NULL, *q8 = NULL;
    size_t n = 0, nq = 0;
    CHECK(!save_kind(SLOT_F32, 9, 1, "a.slot", &f32, &n));
    CHECK(!save_kind(SLOT_Q8, 9, 1, "q.slot", &q8, &nq));
    const uint64_t fp = sm.fp[0];
    CHECK(!refused(SLOT_F32, f32, n, fp ^ 1, "another model", "fingerprint"));
    CHECK(!refused(SLOT_RING, f32, n, sm.fp[1], "another model", NULL)); /* another config, other weights */
    CHECK(!refused(SLOT_F16, f32, n, fp, "holds a f32 KV cache", "this slot's cache is f16"));
    CHECK(!refused(SLOT_F32, q8, nq, fp, "holds a q8", "this slot's cache is f32"));
    CHECK(!refused(SLOT_F32, f32, n - 1, fp, "truncated", NULL));
    CHECK(!refused(SLOT_F32, f32, 50, fp, "truncated", "header"));
    unsigned char *longer = malloc(n + 1);
    CHECK(longer);
    memcpy(longer, f32, n);
    longer[n] = 0;
    CHECK(!refused(SLOT_F32, longer, n + 1, fp, "1 bytes past the end", NULL));
    longer[8] = 2; /* version */
    CHECK(!refused(SLOT_F32, longer, n, fp, "version 2", "reads version 1"));
    memcpy(longer, f32, n);
    longer[0] = 'X';
    CHECK(!refused(SLOT_F32, longer, n, fp, "not a slot file", NULL));
    memcpy(longer, f32, n);
    longer[n - 3] ^= 0x10;
    CHECK(!refused(SLOT_F32, longer, n, fp, "checksum", "damaged"));
    memcpy(longer, f32, n);
    longer[sizeof(da_slot_header) + 4 * 9 + 1] ^= 1;
    CHECK(!refused(SLOT_F32, longer, n, fp, "checksum", NULL));
    free(longer);
    free(f32);
    free(q8);
    return 0;
}

/* A write to a full device fails and says so. */
static int test_full_device(void) {
    if (access("/dev/full", W_OK)) return 0;
    da_session_reset(sm.s[SLOT_F32]);
    da_status st = da_slot_file_write("/dev/full", sm.s[SLOT_F32], NULL, 0, sm.fp[0], NULL);
    CHECK(st.code && strstr(st.msg, "/dev/full"));
    return 0;
}

/* Seeds for fuzz_slot_file: a kind byte, then a file of that kind at 0, 3 and 12 positions; at 3 also with the
 * byte's checksum bit (8) set. */
static int write_seeds(const char *out) {
    for (int k = 0; k < SLOT_KINDS; k++)
        for (int len = 0; len <= 12; len += len ? 9 : 3) {
            unsigned char *data = NULL;
            size_t n = 0;
            if (save_kind(k, len, k + len, "seed.slot", &data, &n)) return 1;
            for (int fix = 0; fix <= (len == 3) * 8; fix += 8) {
                char path[512];
                snprintf(path, sizeof path, "%s/kind%d_len%d%s", out, k, len, fix ? "_sum" : "");
                FILE *fp = fopen(path, "wb");
                const unsigned char kb = (unsigned char)(k | fix);
                CHECK(fp && fwrite(&kb, 1, 1, fp) == 1 && fwrite(data, 1, n, fp) == n && !fclose(fp));
            }
            free(data);
        }
    return 0;
}

int main(int argc, char **argv) {
    snprintf(dir, sizeof dir, "/tmp/da_slot.XXXXXX");
    if (!mkdtemp(dir) || slot_models_make(&sm)) return 1;
    int rc = 0;
    if (argc == 3 && !strcmp(argv[1], "--seeds")) {
        rc = write_seeds(argv[2]);
    } else {
        RUN(test_round_trip);
        RUN(test_refusals);
        RUN(test_full_device);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    slot_models_free(&sm);
    if (argc == 3) return rc;
    TH_SUMMARY();
}
