/* File I/O: atomic writes, the safetensors reader/writer (including every
 * malformed-input check of da_st_open) and .npy files. */
#include <errno.h>
#include <glob.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "io/atomic_file.h"
#include "io/npy.h"
#include "io/safetensors.h"

static char tmpdir[64];

/* tmpdir/name into a rotating static buffer (enough for one test's needs). */
static const char *tpath(const char *name) {
    static char bufs[4][256];
    static int k;
    char *b = bufs[k++ & 3];
    snprintf(b, sizeof bufs[0], "%s/%s", tmpdir, name);
    return b;
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = n ? fwrite(p, 1, n, fp) : 0;
    return (fclose(fp) == 0 && w == n) ? 0 : -1;
}

static int file_equals(const char *path, const char *want) {
    size_t n;
    unsigned char *p = th_read_file(path, &n);
    int ok = p && n == strlen(want) && memcmp(p, want, n) == 0;
    free(p);
    return ok;
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A safetensors file: 8-byte length, header text (hlen bytes, may contain
 * NULs), then `data` (ndata bytes; zeros when data is NULL). */
static int write_st_raw(const char *path, const char *header, size_t hlen, const void *data, size_t ndata) {
    size_t n = 8 + hlen + ndata;
    unsigned char *b = calloc(n, 1);
    put_le64(b, hlen);
    memcpy(b + 8, header, hlen);
    if (data) memcpy(b + 8 + hlen, data, ndata);
    int rc = write_bytes(path, b, n);
    free(b);
    return rc;
}

/* da_st_open on path must fail with a one-line message that starts with the
 * path and contains `word`, leaving f zeroed. */
static int expect_open_fails(const char *path, const char *word) {
    da_st_file f;
    da_status st = da_st_open(&f, path);
    if (st.code == 0) {
        fprintf(stderr, "  %s: opened, expected an error containing \"%s\"\n", path, word);
        da_st_close(&f);
        return 1;
    }
    int ok = strncmp(st.msg, path, strlen(path)) == 0 && strstr(st.msg, word) && !strchr(st.msg, '\n') &&
             f.map == NULL && f.tensors == NULL && f.meta == NULL;
    if (!ok) fprintf(stderr, "  expected \"%s\" in a one-line message starting with the path, got: %s\n", word, st.msg);
    else if (getenv("DA_TEST_VERBOSE")) fprintf(stderr, "  %s\n", st.msg);
    return !ok;
}

/* A header that must be refused, with ndata zero bytes of data. */
static int bad_header(const char *header, size_t ndata, const char *word) {
    const char *p = tpath("bad.safetensors");
    if (write_st_raw(p, header, strlen(header), NULL, ndata) != 0) return 1;
    return expect_open_fails(p, word);
}

/* ---------------------------------------------------------------- atomic */

static int test_atomic_abort_keeps_old(void) {
    const char *p = tpath("atomic.txt");
    CHECK(write_bytes(p, "old content", 11) == 0);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, p);
    CHECK(st.code == 0);
    CHECK(exists(af.tmp));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    CHECK(fputs("new content that is longer", af.fp) >= 0);
    CHECK(fflush(af.fp) == 0);
    CHECK(file_equals(p, "old content"));
    da_atomic_abort(&af);
    CHECK(file_equals(p, "old content"));
    CHECK(!exists(tmp));
    da_atomic_abort(&af); /* idempotent */
    CHECK(file_equals(p, "old content"));
    unlink(p);
    return 0;
}

static int test_atomic_commit_replaces(void) {
    const char *p = tpath("atomic2.txt");
    CHECK(write_bytes(p, "old", 3) == 0);
    CHECK(chmod(p, 0640) == 0);
    da_atomic_file af;
    CHECK(da_atomic_open(&af, p).code == 0);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    fputs("brand new", af.fp);
    da_status st = da_atomic_commit(&af);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);
    CHECK(file_equals(p, "brand new"));
    CHECK(!exists(tmp));
    struct stat sb;
    CHECK(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0640); /* permissions kept */
    da_atomic_abort(&af); /* harmless after commit */
    CHECK(file_equals(p, "brand new"));
    unlink(p);
    return 0;
}

/* Renaming over a non-empty directory, made there after the open, fails: the
 * error names the path and the temporary is gone. A directory already there
 * is refused by the open itself, naming it. */
static int test_atomic_commit_failure_removes_tmp(void) {
    const char *d = tpath("adir");
    da_atomic_file af;
    CHECK(da_atomic_open(&af, d).code == 0);
    CHECK(mkdir(d, 0755) == 0);
    char inner[300];
    snprintf(inner, sizeof inner, "%s/x", d);
    CHECK(write_bytes(inner, "x", 1) == 0);
    da_atomic_file refused;
    da_status open_st = da_atomic_open(&refused, d);
    CHECK(open_st.code != 0 && strstr(open_st.msg, d) && strstr(open_st.msg, "is a directory"));
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    fputs("data", af.fp);
    da_status st = da_atomic_commit(&af);
    CHECK(st.code != 0);
    CHECK(strncmp(st.msg, d, strlen(d)) == 0);
    CHECK(strstr(st.msg, "rename") != NULL);
    CHECK(!exists(tmp));
    CHECK(file_equals(inner, "x"));
    unlink(inner);
    rmdir(d);
    return 0;
}

static int test_atomic_open_missing_dir(void) {
    const char *p = tpath("no/such/dir/file");
    da_atomic_file af;
    da_status st = da_atomic_open(&af, p);
    CHECK(st.code != 0);
    CHECK(strstr(st.msg, p) && strstr(st.msg, strerror(ENOENT)));
    da_atomic_abort(&af); /* safe after a failed open */
    return 0;
}

/* A process killed mid-write leaves the previous file intact. */
static int test_atomic_kill_midwrite(void) {
    const char *p = tpath("killed.txt");
    CHECK(write_bytes(p, "survivor", 8) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        da_atomic_file af;
        if (da_atomic_open(&af, p).code) _exit(3);
        for (int i = 0; i < 10000; i++) fputs("partial partial partial\n", af.fp);
        fflush(af.fp);
        raise(SIGKILL);
        _exit(4);
    }
    int ws;
    CHECK(waitpid(pid, &ws, 0) == pid);
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL);
    CHECK(file_equals(p, "survivor"));
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s.tmp.%ld.*", p, (long)pid); /* the pid, then random letters */
    glob_t g;
    CHECK(glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc == 1); /* the child really got to write */
    unlink(g.gl_pathv[0]);
    globfree(&g);
    unlink(p);
    return 0;
}

/* ---------------------------------------------------------------- safetensors round trip */

static void fill(float *x, size_t n, uint32_t seed) {
    uint32_t s = seed;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = ((float)(s >> 8) / 16777216.0f - 0.5f) * 8.0f;
    }
}

static int test_st_roundtrip(void) {
    float w[12], b[5], s = 3.25f, deep[16];
    fill(w, 12, 1);
    fill(b, 5, 2);
    fill(deep, 16, 3);
    da_st_write_tensor ts[5] = {
        {"layers.0.w", 2, {3, 4}, w},
        {"b", 1, {5}, b},
        {"scalar", 0, {0}, &s},
        {"empty", 2, {0, 7}, NULL},
        {"deep", 8, {2, 1, 2, 1, 2, 1, 1, 2}, deep},
    };
    const char *mk[] = {"format", "tricky"};
    const char *mv[] = {"diffattn", "quote \" backslash \\ newline \n tab \t unicode \xc3\xbc end"};
    const char *p = tpath("rt.safetensors");
    da_status st = da_st_write(p, ts, 5, mk, mv, 2);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);

    da_st_file f;
    st = da_st_open(&f, p);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);
    CHECK(f.n_tensors == 5);
    CHECK(f.data_offset % 8 == 0);
    size_t pos = 0;
    for (int i = 0; i < 5; i++) {
        const da_st_tensor *t = &f.tensors[i]; /* header order = the order given */
        CHECK(strcmp(t->name, ts[i].name) == 0);
        CHECK(da_st_find(&f, ts[i].name) == t);
        CHECK(t->dtype == DA_ST_F32);
        CHECK(t->ndim == ts[i].ndim);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            CHECK(t->shape[d] == ts[i].shape[d]);
            numel *= (size_t)ts[i].shape[d];
        }
        CHECK(t->numel == numel);
        CHECK(t->begin == pos && t->end == pos + 4 * numel); /* contiguous, in order */
        pos = t->end;
        float out[16];
        CHECK(da_st_read_f32(&f, t, out).code == 0);
        if (numel) CHECK(memcmp(out, ts[i].data, numel * 4) == 0); /* bit-exact */
    }
    CHECK(pos == f.size - f.data_offset);
    CHECK(f.tensors[2].ndim == 0 && f.tensors[2].numel == 1);
    CHECK(da_st_find(&f, "missing") == NULL);
    CHECK(f.n_meta == 2);
    CHECK(da_st_meta_get(&f, "format") && strcmp(da_st_meta_get(&f, "format"), "diffattn") == 0);
    CHECK(da_st_meta_get(&f, "tricky") && strcmp(da_st_meta_get(&f, "tricky"), mv[1]) == 0);
    CHECK(da_st_meta_get(&f, "absent") == NULL);
    da_st_close(&f);
    CHECK(f.map == NULL && f.n_tensors == 0);
    da_st_close(&f); /* twice is harmless */
    unlink(p);
    return 0;
}

/* The bytes on disk follow the format: LE length, JSON, space padding to a
 * multiple of 8, data right after; no __metadata__ when there is none. */
static int test_st_writer_layout(void) {
    float x[3] = {1.0f, -2.0f, 0.5f};
    da_st_write_tensor t = {"x", 1, {3}, x};
    const char *p = tpath("layout.safetensors");
    CHECK(da_st_write(p, &t, 1, NULL, NULL, 0).code == 0);
    size_t n;
    unsigned char *b = th_read_file(p, &n);
    CHECK(b && n >= 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | b[i];
    CHECK((8 + hl) % 8 == 0);
    CHECK(8 + hl + 12 == n);
    CHECK(b[8] == '{');
    size_t last = 8 + hl - 1;
    while (b[last] == ' ') last--;
    CHECK(b[last] == '}');
    CHECK(8 + hl - 1 - last < 8); /* at most 7 spaces */
    char *hdr = strndup((const char *)b + 8, hl);
    CHECK(strstr(hdr, "__metadata__") == NULL);
    CHECK(strstr(hdr, "\"dtype\":\"F32\"") && strstr(hdr, "\"shape\":[3]") && strstr(hdr, "\"data_offsets\":[0,12]"));
    free(hdr);
    float y[3];
    memcpy(y, b + 8 + hl, 12);
    CHECK(y[0] == 1.0f && y[1] == -2.0f && y[2] == 0.5f);
    free(b);
    unlink(p);
    return 0;
}

/* Bad writer input is refused and the previous file is left alone. */
static int test_st_writer_refuses_bad_input(void) {
    const char *p = tpath("keep.safetensors");
    CHECK(write_bytes(p, "previous", 8) == 0);
    float x[2] = {1, 2};
    da_st_write_tensor dup[2] = {{"a", 1, {2}, x}, {"a", 1, {2}, x}};
    da_status st = da_st_write(p, dup, 2, NULL, NULL, 0);
    CHECK(st.code != 0 && strstr(st.msg, "duplicate"));
    da_st_write_tensor reserved = {"__metadata__", 1, {2}, x};
    CHECK(da_st_write(p, &reserved, 1, NULL, NULL, 0).code != 0);
    da_st_write_tensor neg = {"n", 1, {-2}, x};
    CHECK(da_st_write(p, &neg, 1, NULL, NULL, 0).code != 0);
    da_st_write_tensor nodata = {"n", 1, {2}, NULL};
    CHECK(da_st_write(p, &nodata, 1, NULL, NULL, 0).code != 0);
    const char *k[] = {"k", "k"}, *v[] = {"1", "2"};
    da_st_write_tensor ok = {"a", 1, {2}, x};
    st = da_st_write(p, &ok, 1, k, v, 2);
    CHECK(st.code != 0 && strstr(st.msg, "duplicate"));
    CHECK(file_equals(p, "previous"));
    unlink(p);
    return 0;
}

/* ---------------------------------------------------------------- dtype conversion */

static int test_st_bf16_f16(void) {
    /* BF16: 1, -2, 0.15625, +inf.  F16: 1, -2, 65504, 2^-24 (smallest subnormal),
     * 0.5, -0, +inf, NaN, 1023*2^-24 (largest subnormal), 2^-14 (smallest normal). */
    const uint16_t bf[4] = {0x3F80, 0xC000, 0x3E20, 0x7F80};
    const uint16_t hf[10] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x3800, 0x8000, 0x7C00, 0x7E00, 0x03FF, 0x0400};
    unsigned char data[28];
    for (int i = 0; i < 4; i++) data[2 * i] = bf[i] & 0xFF, data[2 * i + 1] = (unsigned char)(bf[i] >> 8);
    for (int i = 0; i < 10; i++)
        data[8 + 2 * i] = hf[i] & 0xFF, data[8 + 2 * i + 1] = (unsigned char)(hf[i] >> 8);
    /* Odd header length: the data is not aligned, which the reader must cope with. */
    const char *h = "{\"bf\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
                    "\"hf\":{\"dtype\":\"F16\",\"shape\":[2,5],\"data_offsets\":[8,28]},"
                    "\"__metadata__\":{\"a\":\"b\"}} ";
    const char *p = tpath("half.safetensors");
    CHECK(write_st_raw(p, h, strlen(h), data, sizeof data) == 0);
    da_st_file f;
    da_status st = da_st_open(&f, p);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);
    const da_st_tensor *tb = da_st_find(&f, "bf"), *th = da_st_find(&f, "hf");
    CHECK(tb && th && tb->dtype == DA_ST_BF16 && th->dtype == DA_ST_F16);
    CHECK(strcmp(da_st_dtype_name(tb->dtype), "BF16") == 0 && strcmp(da_st_dtype_name(th->dtype), "F16") == 0);
    float ob[4], oh[10];
    CHECK(da_st_read_f32(&f, tb, ob).code == 0);
    CHECK(ob[0] == 1.0f && ob[1] == -2.0f && ob[2] == 0.15625f && isinf(ob[3]) && ob[3] > 0);
    CHECK(da_st_read_f32(&f, th, oh).code == 0);
    CHECK(oh[0] == 1.0f && oh[1] == -2.0f && oh[2] == 65504.0f);
    CHECK(oh[3] == ldexpf(1.0f, -24));
    CHECK(oh[4] == 0.5f);
    CHECK(oh[5] == 0.0f && signbit(oh[5]));
    CHECK(isinf(oh[6]) && oh[6] > 0);
    CHECK(isnan(oh[7]));
    CHECK(oh[8] == 1023.0f * ldexpf(1.0f, -24));
    CHECK(oh[9] == ldexpf(1.0f, -14));
    da_st_close(&f);
    unlink(p);
    return 0;
}

static int test_st_read_f32_rejects_int(void) {
    int32_t v[2] = {1, 2};
    const char *h = "{\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const char *p = tpath("int.safetensors");
    CHECK(write_st_raw(p, h, strlen(h), v, 8) == 0);
    da_st_file f;
    CHECK(da_st_open(&f, p).code == 0);
    float out[2];
    da_status st = da_st_read_f32(&f, &f.tensors[0], out);
    CHECK(st.code != 0 && strstr(st.msg, "\"ids\"") && strstr(st.msg, "I32"));
    da_st_close(&f);
    unlink(p);
    return 0;
}

/* ---------------------------------------------------------------- valid corner cases */

static int test_st_scalar_and_empty_valid(void) {
    float v = 7.5f;
    /* A scalar, and an empty tensor whose [4, 4) range sits inside nothing. */
    const char *h = "{\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
                    "\"e\":{\"dtype\":\"F32\",\"shape\":[3,0],\"data_offsets\":[4,4]}}";
    const char *p = tpath("scalar.safetensors");
    CHECK(write_st_raw(p, h, strlen(h), &v, 4) == 0);
    da_st_file f;
    da_status st = da_st_open(&f, p);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);
    const da_st_tensor *s = da_st_find(&f, "s"), *e = da_st_find(&f, "e");
    CHECK(s && s->ndim == 0 && s->numel == 1);
    CHECK(e && e->ndim == 2 && e->numel == 0);
    float out = 0;
    CHECK(da_st_read_f32(&f, s, &out).code == 0 && out == 7.5f);
    da_st_close(&f);
    unlink(p);
    return 0;
}

/* ---------------------------------------------------------------- malformed files */

static int test_st_bad_empty_file(void) {
    const char *p = tpath("empty.safetensors");
    CHECK(write_bytes(p, "", 0) == 0);
    return expect_open_fails(p, "empty");
}

static int test_st_bad_short_file(void) {
    const char *p = tpath("short.safetensors");
    CHECK(write_bytes(p, "\x10\0\0\0\0", 5) == 0);
    return expect_open_fails(p, "shorter than");
}

static int test_st_bad_directory(void) {
    const char *d = tpath("dir.safetensors");
    CHECK(mkdir(d, 0755) == 0);
    int rc = expect_open_fails(d, "is a directory");
    rmdir(d);
    return rc;
}

static int test_st_bad_missing_file(void) { return expect_open_fails(tpath("nope.safetensors"), strerror(ENOENT)); }

static int test_st_bad_header_len_past_file(void) {
    unsigned char b[8 + 10];
    put_le64(b, 1000);
    memcpy(b + 8, "{}        ", 10);
    const char *p = tpath("hl.safetensors");
    CHECK(write_bytes(p, b, sizeof b) == 0);
    return expect_open_fails(p, "exceeds");
}

static int test_st_bad_header_len_absurd(void) {
    unsigned char b[16];
    put_le64(b, (uint64_t)1 << 40);
    memcpy(b + 8, "{}      ", 8);
    const char *p = tpath("absurd.safetensors");
    CHECK(write_bytes(p, b, sizeof b) == 0);
    return expect_open_fails(p, "absurd");
}

static int test_st_bad_header_len_huge(void) { /* 2^64 - 1: no wrap-around in the bounds check */
    unsigned char b[16];
    put_le64(b, UINT64_MAX);
    memcpy(b + 8, "{}      ", 8);
    const char *p = tpath("huge.safetensors");
    CHECK(write_bytes(p, b, sizeof b) == 0);
    return expect_open_fails(p, "header length");
}

static int test_st_bad_json(void) { return bad_header("{\"a\": {\"dtype\": ", 0, "not valid JSON"); }
static int test_st_bad_json_trailing(void) { return bad_header("{} {}", 0, "not valid JSON"); }
static int test_st_bad_zero_header(void) { return bad_header("", 0, "not valid JSON"); }
static int test_st_bad_not_object(void) { return bad_header("[1, 2, 3]", 0, "expected a JSON object"); }

static int test_st_bad_nul_in_header(void) {
    const char h[] = "{\"a\0\":{}}";
    const char *p = tpath("nul.safetensors");
    CHECK(write_st_raw(p, h, sizeof h - 1, NULL, 0) == 0);
    return expect_open_fails(p, "NUL");
}

static int test_st_bad_utf8(void) { return bad_header("{\"\xff\xfe\":{}}", 0, "UTF-8"); }

static int test_st_bad_metadata_not_object(void) {
    return bad_header("{\"__metadata__\":[\"a\"]}", 0, "\"__metadata__\" is an array");
}

static int test_st_bad_metadata_value(void) {
    return bad_header("{\"__metadata__\":{\"ok\":\"x\",\"step\":5}}", 0, "expected a string");
}

static int test_st_bad_metadata_duplicate_key(void) {
    return bad_header("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "duplicate key");
}

static int test_st_bad_metadata_twice(void) {
    return bad_header("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate");
}

static int test_st_bad_tensor_not_object(void) { return bad_header("{\"a\":[1,2]}", 0, "expected an object"); }

static int test_st_bad_missing_dtype(void) {
    return bad_header("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "no \"dtype\"");
}

static int test_st_bad_dtype_type(void) {
    return bad_header("{\"a\":{\"dtype\":32,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "\"dtype\" is a number");
}

static int test_st_bad_unknown_dtype(void) {
    return bad_header("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype \"F31\"");
}

static int test_st_bad_missing_shape(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "no \"shape\"");
}

static int test_st_bad_shape_type(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, "\"shape\" is a number");
}

static int test_st_bad_shape_negative(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,8]}}", 8,
                      "shape[1] = -1 is not a non-negative integer");
}

static int test_st_bad_shape_fraction(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
                      "shape[0] = 2.5 is not a non-negative integer");
}

static int test_st_bad_shape_string(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
                      "shape[0] is a string");
}

static int test_st_bad_too_many_dims(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
                      "9 dims");
}

static int test_st_bad_numel_overflow(void) {
    /* 2^32 * 2^32 * 16 elements: the product wraps to 0 in 64 bits. */
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,0]}}", 0,
                      "overflows");
}

static int test_st_bad_bytes_overflow(void) {
    /* 2^31 * 2^31 = 2^62 elements fit in size_t, 2^62 * 4 bytes do not. */
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2147483648,2147483648],\"data_offsets\":[0,0]}}", 0,
                      "byte size overflows");
}

static int test_st_bad_missing_offsets(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "no \"data_offsets\"");
}

static int test_st_bad_offsets_length(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,16]}}", 16,
                      "\"data_offsets\" must be [begin, end]");
}

static int test_st_bad_offsets_type(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8,
                      "\"data_offsets\" must be [begin, end]");
}

static int test_st_bad_offsets_reversed(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "begin after end");
}

static int test_st_bad_size_mismatch(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12, "needs 8");
}

static int test_st_bad_past_end(void) {
    const char *h = "{\"x\":{\"dtype\":\"F32\",\"shape\":[200],\"data_offsets\":[100,900]}}";
    const char *p = tpath("m.safetensors");
    CHECK(write_st_raw(p, h, strlen(h), NULL, 800) == 0);
    int rc = expect_open_fails(p, "tensor \"x\" data [100, 900) lies outside the data section (800 bytes)");
    return rc || expect_open_fails(p, "truncated");
}

static int test_st_bad_duplicate_name(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                      12, "duplicate tensor name \"a\"");
}

static int test_st_bad_overlap(void) {
    return bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                      "\"z\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[20,24]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                      24, "overlaps");
}

static int test_st_bad_name_too_long(void) {
    char h[512];
    char name[201];
    memset(name, 'n', 200);
    name[200] = 0;
    snprintf(h, sizeof h, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", name);
    return bad_header(h, 4, "is 200 bytes long, at most 159");
}

/* Names with control characters are printed on one line. */
static int test_st_bad_name_newline_in_message(void) {
    return bad_header("{\"a\\nb\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "\"a?b\"");
}

/* Every truncation of a valid file is refused cleanly (ASan checks the reads). */
static int test_st_every_truncation_fails(void) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    da_st_write_tensor ts[2] = {{"a", 2, {2, 2}, x}, {"b", 1, {2}, x + 4}};
    const char *k[] = {"m"}, *v[] = {"v"};
    const char *p = tpath("full.safetensors"), *q = tpath("trunc.safetensors");
    CHECK(da_st_write(p, ts, 2, k, v, 1).code == 0);
    size_t n;
    unsigned char *b = th_read_file(p, &n);
    CHECK(b);
    for (size_t len = 0; len < n; len++) {
        CHECK(write_bytes(q, b, len) == 0);
        da_st_file f;
        da_status st = da_st_open(&f, q);
        if (st.code == 0) {
            fprintf(stderr, "  truncated to %zu of %zu bytes, yet it opened\n", len, n);
            da_st_close(&f);
            free(b);
            return 1;
        }
    }
    free(b);
    unlink(p);
    unlink(q);
    return 0;
}

/* Random byte corruption: open must fail or yield tensors that read in bounds. */
static int test_st_corruption_never_crashes(void) {
    float x[6] = {1, 2, 3, 4, 5, 6};
    da_st_write_tensor ts[3] = {{"a", 2, {2, 2}, x}, {"b", 1, {1}, x + 4}, {"c", 0, {0}, x + 5}};
    const char *k[] = {"m"}, *v[] = {"v"};
    const char *p = tpath("fuzz0.safetensors"), *q = tpath("fuzz.safetensors");
    CHECK(da_st_write(p, ts, 3, k, v, 1).code == 0);
    size_t n;
    unsigned char *b = th_read_file(p, &n);
    CHECK(b);
    unsigned char *m = malloc(n);
    uint32_t s = 12345;
    int opened = 0;
    static const char alphabet[] = "{}[]\",:0123456789-.e \\FBI";
    for (int it = 0; it < 3000; it++) {
        memcpy(m, b, n);
        int flips = 1 + it % 3;
        for (int j = 0; j < flips; j++) {
            s = s * 1664525u + 1013904223u;
            size_t at = (s >> 8) % n;
            s = s * 1664525u + 1013904223u;
            m[at] = (it & 1) ? (unsigned char)alphabet[(s >> 8) % (sizeof alphabet - 1)] : (unsigned char)(s >> 24);
        }
        CHECK(write_bytes(q, m, n) == 0);
        da_st_file f;
        if (da_st_open(&f, q).code == 0) {
            opened++;
            for (int i = 0; i < f.n_tensors; i++) {
                const da_st_tensor *t = &f.tensors[i];
                CHECK(t->end <= f.size - f.data_offset && t->end - t->begin == t->numel * da_st_dtype_size(t->dtype));
                if (t->dtype == DA_ST_F32 || t->dtype == DA_ST_BF16 || t->dtype == DA_ST_F16) {
                    float *out = malloc(t->numel * sizeof(float) + 1);
                    CHECK(da_st_read_f32(&f, t, out).code == 0);
                    free(out);
                }
            }
            da_st_close(&f);
        }
    }
    CHECK(opened > 0); /* flips in the data section leave valid files */
    free(m);
    free(b);
    unlink(p);
    unlink(q);
    return 0;
}

/* ---------------------------------------------------------------- npy */

static int npy_roundtrip_one(const char *name, int ndim, const int64_t *shape, const char *shape_repr) {
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= (size_t)shape[d];
    float *x = malloc((numel ? numel : 1) * sizeof(float));
    fill(x, numel, 7);
    const char *p = tpath(name);
    da_status st = da_npy_write_f32(p, x, ndim, shape);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0);

    size_t n;
    unsigned char *b = th_read_file(p, &n);
    CHECK(b && n >= 10);
    CHECK(memcmp(b, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hl = (size_t)b[8] | (size_t)b[9] << 8;
    CHECK((10 + hl) % 64 == 0);
    CHECK(n == 10 + hl + 4 * numel);
    CHECK(b[10 + hl - 1] == '\n');
    char want[128];
    snprintf(want, sizeof want, "{'descr': '<f4', 'fortran_order': False, 'shape': %s, }", shape_repr);
    if (strncmp((const char *)b + 10, want, strlen(want)) != 0) {
        fprintf(stderr, "  header %.*s, want %s\n", (int)hl, b + 10, want);
        return 1;
    }
    free(b);

    float *y = NULL;
    int nd = -1;
    int64_t sh[8];
    st = da_npy_read_f32(p, &y, &nd, sh);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(st.code == 0 && y != NULL);
    CHECK(nd == ndim);
    for (int d = 0; d < ndim; d++) CHECK(sh[d] == shape[d]);
    if (numel) CHECK(memcmp(x, y, numel * 4) == 0);
    free(x);
    free(y);
    unlink(p);
    return 0;
}

static int test_npy_roundtrip(void) {
    int64_t s2[2] = {3, 5}, s1[1] = {7}, s0[1] = {0}, sz[2] = {0, 3}, s4[4] = {2, 3, 1, 4};
    if (npy_roundtrip_one("a2.npy", 2, s2, "(3, 5)")) return 1;
    if (npy_roundtrip_one("a1.npy", 1, s1, "(7,)")) return 1;
    if (npy_roundtrip_one("a0.npy", 0, s0, "()")) return 1;
    if (npy_roundtrip_one("az.npy", 2, sz, "(0, 3)")) return 1;
    return npy_roundtrip_one("a4.npy", 4, s4, "(2, 3, 1, 4)");
}

/* A .npy built by hand: version bytes, dict, padding to 64, ndata bytes. */
static int write_npy_raw(const char *path, int major, const char *dict, size_t ndata) {
    unsigned char b[4096] = {0};
    size_t pre = major == 2 ? 12 : 10, dl = strlen(dict);
    size_t total = pre + dl + 1;
    size_t hl = dl + 1 + (64 - total % 64) % 64;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    b[8] = hl & 0xFF;
    b[9] = (unsigned char)(hl >> 8);
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hl - dl - 1);
    b[pre + hl - 1] = '\n';
    return write_bytes(path, b, pre + hl + ndata);
}

static int npy_expect_fail(int major, const char *dict, size_t ndata, const char *word) {
    const char *p = tpath("bad.npy");
    CHECK(write_npy_raw(p, major, dict, ndata) == 0);
    float *y = (float *)1;
    int nd;
    int64_t sh[8];
    da_status st = da_npy_read_f32(p, &y, &nd, sh);
    if (st.code == 0 || !strstr(st.msg, word) || !strstr(st.msg, p) || y != NULL) {
        fprintf(stderr, "  %s: expected an error with \"%s\", got: %s\n", dict, word, st.code ? st.msg : "ok");
        if (st.code == 0) free(y);
        return 1;
    }
    return 0;
}

static int test_npy_reader_checks(void) {
    /* Control: the hand builder makes readable files (v1 and v2). */
    const char *p = tpath("good.npy");
    CHECK(write_npy_raw(p, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", 16) == 0);
    float *y;
    int nd;
    int64_t sh[8];
    CHECK(da_npy_read_f32(p, &y, &nd, sh).code == 0 && nd == 2 && sh[0] == 2 && sh[1] == 2);
    free(y);
    CHECK(write_npy_raw(p, 2, "{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f4\"}", 12) == 0);
    CHECK(da_npy_read_f32(p, &y, &nd, sh).code == 0 && nd == 1 && sh[0] == 3);
    free(y);

    const char *ok_dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
    if (npy_expect_fail(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "'<f8'")) return 1;
    if (npy_expect_fail(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "'>f4'")) return 1;
    if (npy_expect_fail(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "fortran_order"))
        return 1;
    if (npy_expect_fail(1, ok_dict, 12, "truncated")) return 1;
    if (npy_expect_fail(1, ok_dict, 20, "needs 16")) return 1;
    if (npy_expect_fail(3, ok_dict, 16, "version 3.0")) return 1;
    if (npy_expect_fail(1, "{'descr': '<f4', 'fortran_order': False}", 4, "shape")) return 1;
    if (npy_expect_fail(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, -2), }", 0, "shape")) return 1;
    if (npy_expect_fail(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
                        "more than 8"))
        return 1;
    if (npy_expect_fail(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4,
                        "repeated"))
        return 1;

    CHECK(write_bytes(p, "\x93NUMPX\x01\x00\x00\x00", 10) == 0);
    y = (float *)1;
    da_status st = da_npy_read_f32(p, &y, &nd, sh);
    CHECK(st.code != 0 && strstr(st.msg, "magic") && y == NULL);
    unsigned char big[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xFF, 0xFF, '{', '}'};
    CHECK(write_bytes(p, big, sizeof big) == 0);
    st = da_npy_read_f32(p, &y, &nd, sh);
    CHECK(st.code != 0 && strstr(st.msg, "exceeds"));
    unlink(p);
    unlink(tpath("bad.npy"));
    return 0;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/da_test_io_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_atomic_abort_keeps_old);
    RUN(test_atomic_commit_replaces);
    RUN(test_atomic_commit_failure_removes_tmp);
    RUN(test_atomic_open_missing_dir);
    RUN(test_atomic_kill_midwrite);
    RUN(test_st_roundtrip);
    RUN(test_st_writer_layout);
    RUN(test_st_writer_refuses_bad_input);
    RUN(test_st_bf16_f16);
    RUN(test_st_read_f32_rejects_int);
    RUN(test_st_scalar_and_empty_valid);
    RUN(test_st_bad_empty_file);
    RUN(test_st_bad_short_file);
    RUN(test_st_bad_directory);
    RUN(test_st_bad_missing_file);
    RUN(test_st_bad_header_len_past_file);
    RUN(test_st_bad_header_len_absurd);
    RUN(test_st_bad_header_len_huge);
    RUN(test_st_bad_json);
    RUN(test_st_bad_json_trailing);
    RUN(test_st_bad_zero_header);
    RUN(test_st_bad_not_object);
    RUN(test_st_bad_nul_in_header);
    RUN(test_st_bad_utf8);
    RUN(test_st_bad_metadata_not_object);
    RUN(test_st_bad_metadata_value);
    RUN(test_st_bad_metadata_duplicate_key);
    RUN(test_st_bad_metadata_twice);
    RUN(test_st_bad_tensor_not_object);
    RUN(test_st_bad_missing_dtype);
    RUN(test_st_bad_dtype_type);
    RUN(test_st_bad_unknown_dtype);
    RUN(test_st_bad_missing_shape);
    RUN(test_st_bad_shape_type);
    RUN(test_st_bad_shape_negative);
    RUN(test_st_bad_shape_fraction);
    RUN(test_st_bad_shape_string);
    RUN(test_st_bad_too_many_dims);
    RUN(test_st_bad_numel_overflow);
    RUN(test_st_bad_bytes_overflow);
    RUN(test_st_bad_missing_offsets);
    RUN(test_st_bad_offsets_length);
    RUN(test_st_bad_offsets_type);
    RUN(test_st_bad_offsets_reversed);
    RUN(test_st_bad_size_mismatch);
    RUN(test_st_bad_past_end);
    RUN(test_st_bad_duplicate_name);
    RUN(test_st_bad_overlap);
    RUN(test_st_bad_name_too_long);
    RUN(test_st_bad_name_newline_in_message);
    RUN(test_st_every_truncation_fails);
    RUN(test_st_corruption_never_crashes);
    RUN(test_npy_roundtrip);
    RUN(test_npy_reader_checks);

    /* Best-effort cleanup of whatever a failed test left behind. */
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    TH_SUMMARY();
}
