/* llama.cpp as the reference of diffattn's GGUF tests and benchmarks: a small
 * program over llama.cpp's C API (include/llama.h of the release node-llama-cpp
 * ships, linked against its prebuilt libllama and ggml; the CPU backends are
 * loaded with ggml_backend_load_all_from_path from LLAMACPP_LIB_DIR).
 *
 *   llama_driver logits MODEL IDS_FILE OUT.npy [--threads N] [--kv f32|f16]
 *       float32 [T, vocab] logits of every position of one sequence, all T
 *       tokens decoded in one batch (IDS_FILE: whitespace-separated ids, as
 *       diffattn's logits reads). The KV cache is f32 unless --kv f16.
 *   llama_driver tokenize MODEL TEXT_FILE [--no-add-special-tokens]
 *       the ids of the file's bytes, whitespace-separated on one line, as
 *       diffattn encode prints them: the tokens the vocabulary adds (BOS when
 *       tokenizer.ggml.add_bos_token) unless --no-add-special-tokens; special
 *       tokens written in the text are recognised either way.
 *   llama_driver quantize IN.gguf OUT.gguf TYPE [--threads N]
 *       llama_model_quantize: TYPE is Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K_S,
 *       Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, F16, BF16 or F32.
 *   llama_driver bench MODEL [--prompt N] [--gen N] [--threads T] [--reps R] [--kv f16|f32]
 *       as diffattn bench generate times its engine: a prompt of N tokens
 *       (the bytes of a fixed sentence, modulo the vocabulary) in one batch,
 *       then gen greedy batch-1 decoding steps; the best of R runs. The KV
 *       cache is llama.cpp's default, f16, unless --kv f32. One JSON line.
 *   llama_driver info MODEL
 *       the architecture, vocabulary, context, parameters and file size, one JSON line.
 *   llama_driver compare A.npy B.npy
 *       two float32 [T, vocab] logit arrays (A the reference): max |A - B| / max |A|,
 *       the mean and largest KL(softmax A || softmax B) over positions, and the
 *       fraction of positions whose argmax agrees; one JSON line. No llama.cpp call.
 *
 * Exit status 0 on success, 1 on any error (with a message on stderr). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"

#ifndef LLAMACPP_LIB_DIR
#define LLAMACPP_LIB_DIR "."
#endif

static int verbose;
static char last_error[512]; /* llama.cpp's last message that says "error", for the failure's message */

static void log_cb(enum ggml_log_level level, const char *text, void *ud) {
    (void)ud;
    static int last_shown;
    if (level != GGML_LOG_LEVEL_CONT) last_shown = verbose || level >= GGML_LOG_LEVEL_ERROR;
    if (last_shown) fputs(text, stderr);
    if (strstr(text, "error")) {
        snprintf(last_error, sizeof last_error, "%s", text);
        last_error[strcspn(last_error, "\n")] = 0;
    }
}

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "llama_driver: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void backends_init(void) {
    verbose = getenv("LLAMA_DRIVER_VERBOSE") != NULL;
    llama_log_set(log_cb, NULL);
    const char *dir = getenv("LLAMACPP_LIB_DIR");
    ggml_backend_load_all_from_path(dir ? dir : LLAMACPP_LIB_DIR);
    llama_backend_init();
}

/* The value after flag name among argv[from..argc), or def. */
static const char *opt(int argc, char **argv, int from, const char *name, const char *def) {
    for (int i = from; i + 1 < argc; i++)
        if (!strcmp(argv[i], name)) return argv[i + 1];
    return def;
}

static int has_flag(int argc, char **argv, int from, const char *name) {
    for (int i = from; i < argc; i++)
        if (!strcmp(argv[i], name)) return 1;
    return 0;
}

static int read_file(const char *path, char **data, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return fail("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0)
        if ((len += got) == cap) {
            char *nb = realloc(buf, (cap *= 2) + 1);
            if (!nb) free(buf);
            buf = nb;
        }
    fclose(fp);
    if (!buf) return fail("%s: out of memory", path);
    buf[len] = 0;
    *data = buf;
    *n = len;
    return 0;
}

static int read_ids(const char *path, llama_token **ids, int *n) {
    char *text;
    size_t len;
    if (read_file(path, &text, &len)) return 1;
    int cap = 1024, k = 0;
    llama_token *v = malloc((size_t)cap * sizeof *v);
    char *p = text, *end;
    for (;;) {
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p) break;
        if (errno || x < 0 || x > INT32_MAX) {
            free(text);
            free(v);
            return fail("%s: an id is out of range near \"%.20s\"", path, p);
        }
        if (k == cap) v = realloc(v, (size_t)(cap *= 2) * sizeof *v);
        v[k++] = (llama_token)x;
        p = end;
    }
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    int bad = *p != 0;
    free(text);
    if (bad || k == 0) {
        free(v);
        return fail("%s: expected whitespace-separated decimal ids%s", path, k ? " only" : "");
    }
    *ids = v;
    *n = k;
    return 0;
}

static struct llama_model *load_model(const char *path, int vocab_only) {
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    mp.vocab_only = vocab_only;
    struct llama_model *m = llama_model_load_from_file(path, mp);
    if (!m) fail("%s: llama.cpp cannot load this model: %s (LLAMA_DRIVER_VERBOSE=1 shows its log)", path, last_error);
    return m;
}

static struct llama_context *make_context(struct llama_model *m, int n_ctx, int n_batch, int threads,
                                          enum ggml_type kv) {
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n_ctx;
    cp.n_batch = cp.n_ubatch = (uint32_t)n_batch;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = threads;
    cp.type_k = cp.type_v = kv;
    if (kv == GGML_TYPE_F32) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; /* the exact path */
    cp.no_perf = 1;
    struct llama_context *c = llama_init_from_model(m, cp);
    if (!c) fail("llama.cpp cannot make a context of %d tokens", n_ctx);
    return c;
}

static int write_npy_f32(const char *path, const float *x, int rows, int cols) {
    char hdr[128];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    FILE *fp = fopen(path, "wb");
    if (!fp) return fail("%s: cannot create: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    pre[8] = (unsigned char)((n + pad + 1) & 0xff);
    pre[9] = (unsigned char)((n + pad + 1) >> 8);
    fwrite(pre, 1, 10, fp);
    fwrite(hdr, 1, (size_t)n, fp);
    for (int i = 0; i < pad; i++) fputc(' ', fp);
    fputc('\n', fp);
    fwrite(x, sizeof(float), (size_t)rows * (size_t)cols, fp);
    if (fclose(fp)) return fail("%s: write error: %s", path, strerror(errno));
    return 0;
}

static enum ggml_type kv_type(const char *s) { return s && !strcmp(s, "f16") ? GGML_TYPE_F16 : GGML_TYPE_F32; }

static int cmd_logits(int argc, char **argv) {
    if (argc < 5) return fail("usage: llama_driver logits MODEL IDS_FILE OUT.npy [--threads N] [--kv f32|f16]");
    const int threads = atoi(opt(argc, argv, 5, "--threads", "2"));
    llama_token *ids = NULL;
    int T = 0;
    if (read_ids(argv[3], &ids, &T)) return 1;
    backends_init();
    struct llama_model *m = load_model(argv[2], 0);
    if (!m) return 1;
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(m));
    for (int i = 0; i < T; i++)
        if (ids[i] >= V) {
            return fail("%s: id %d is outside the model's vocabulary (%d tokens)", argv[3], ids[i], V);
        }
    struct llama_context *c = make_context(m, T, T, threads, kv_type(opt(argc, argv, 5, "--kv", "f32")));
    if (!c) return 1;
    struct llama_batch b = llama_batch_init(T, 0, 1);
    for (int i = 0; i < T; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = T;
    if (llama_decode(c, b)) return fail("%s: llama_decode failed", argv[2]);
    float *out = malloc((size_t)T * (size_t)V * sizeof(float));
    for (int i = 0; i < T; i++) {
        const float *row = llama_get_logits_ith(c, i);
        if (!row) return fail("%s: no logits for a position", argv[2]);
        memcpy(out + (size_t)i * V, row, (size_t)V * sizeof(float));
    }
    int rc = write_npy_f32(argv[4], out, T, V);
    free(out);
    free(ids);
    llama_batch_free(b);
    llama_free(c);
    llama_model_free(m);
    return rc;
}

static int cmd_tokenize(int argc, char **argv) {
    if (argc < 4) return fail("usage: llama_driver tokenize MODEL TEXT_FILE [--no-add-special-tokens]");
    char *text;
    size_t len;
    if (read_file(argv[3], &text, &len)) return 1;
    if (len > INT32_MAX / 2) return fail("%s: too large", argv[3]);
    backends_init();
    struct llama_model *m = load_model(argv[2], 1);
    if (!m) return 1;
    const struct llama_vocab *v = llama_model_get_vocab(m);
    const int add_special = !has_flag(argc, argv, 4, "--no-add-special-tokens");
    int cap = (int)len + 16;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    int n = llama_tokenize(v, text, (int32_t)len, ids, cap, add_special, 1);
    if (n < 0) return fail("%s: llama_tokenize failed", argv[3]);
    for (int i = 0; i < n; i++) printf(i + 1 < n ? "%d " : "%d", ids[i]);
    putchar('\n');
    free(ids);
    free(text);
    llama_model_free(m);
    return fflush(stdout) ? fail("write error on standard output") : 0;
}

static const struct {
    const char *name;
    enum llama_ftype ftype;
} FTYPES[] = {
    {"F32", LLAMA_FTYPE_ALL_F32},         {"F16", LLAMA_FTYPE_MOSTLY_F16},       {"BF16", LLAMA_FTYPE_MOSTLY_BF16},
    {"Q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},     {"Q4_1", LLAMA_FTYPE_MOSTLY_Q4_1},     {"Q5_0", LLAMA_FTYPE_MOSTLY_Q5_0},
    {"Q5_1", LLAMA_FTYPE_MOSTLY_Q5_1},     {"Q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},     {"Q4_K_S", LLAMA_FTYPE_MOSTLY_Q4_K_S},
    {"Q4_K_M", LLAMA_FTYPE_MOSTLY_Q4_K_M}, {"Q5_K_S", LLAMA_FTYPE_MOSTLY_Q5_K_S}, {"Q5_K_M", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    {"Q6_K", LLAMA_FTYPE_MOSTLY_Q6_K},
};

static int cmd_quantize(int argc, char **argv) {
    if (argc < 5) return fail("usage: llama_driver quantize IN.gguf OUT.gguf TYPE [--threads N]");
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    int found = 0;
    for (size_t i = 0; i < sizeof FTYPES / sizeof FTYPES[0]; i++)
        if (!strcasecmp(argv[4], FTYPES[i].name)) qp.ftype = FTYPES[i].ftype, found = 1;
    if (!found) return fail("quantize: type \"%s\" is not one of F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K_S "
                            "Q4_K_M Q5_K_S Q5_K_M Q6_K", argv[4]);
    qp.nthread = atoi(opt(argc, argv, 5, "--threads", "2"));
    backends_init();
    if (llama_model_quantize(argv[2], argv[3], &qp)) return fail("quantize %s -> %s failed", argv[2], argv[3]);
    return 0;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static long file_size(const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fclose(fp);
    return n;
}

/* One timed run on an empty cache: the prompt in one batch, then gen greedy steps. */
static int bench_once(struct llama_context *c, const llama_token *prompt, int P, int G, int V, double *pp,
                      double *dd) {
    llama_memory_clear(llama_get_memory(c), 1);
    struct llama_batch b = llama_batch_init(P, 0, 1);
    for (int i = 0; i < P; i++) {
        b.token[i] = prompt[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = i == P - 1;
    }
    b.n_tokens = P;
    const double t0 = now_s();
    int err = llama_decode(c, b);
    const double t1 = now_s();
    llama_batch_free(b);
    if (err) return fail("bench: llama_decode of the prompt failed");
    llama_token tk = argmax(llama_get_logits_ith(c, -1), V);
    for (int i = 0; i < G; i++) {
        if (llama_decode(c, llama_batch_get_one(&tk, 1))) return fail("bench: llama_decode of a step failed");
        tk = argmax(llama_get_logits_ith(c, -1), V);
    }
    const double t2 = now_s();
    *pp = P / (t1 - t0);
    *dd = G / (t2 - t1);
    return 0;
}

static int cmd_bench(int argc, char **argv) {
    if (argc < 3) return fail("usage: llama_driver bench MODEL [--prompt N] [--gen N] [--threads T] [--reps R] [--kv f16|f32]");
    const int P = atoi(opt(argc, argv, 3, "--prompt", "128")), G = atoi(opt(argc, argv, 3, "--gen", "128"));
    const int threads = atoi(opt(argc, argv, 3, "--threads", "2")), reps = atoi(opt(argc, argv, 3, "--reps", "3"));
    const char *kv = opt(argc, argv, 3, "--kv", "f16");
    if (P < 1 || G < 1 || threads < 1 || reps < 1) return fail("bench: --prompt, --gen, --threads and --reps must be positive");
    backends_init();
    struct llama_model *m = load_model(argv[2], 0);
    if (!m) return 1;
    const int V = llama_vocab_n_tokens(llama_model_get_vocab(m));
    struct llama_context *c = make_context(m, P + G, P, threads, kv_type(kv));
    if (!c) return 1;
    llama_token *prompt = malloc((size_t)P * sizeof *prompt);
    const char *text = "The quick brown fox jumps over the lazy dog. "; /* diffattn bench generate's prompt */
    for (int i = 0; i < P; i++) prompt[i] = (unsigned char)text[i % strlen(text)] % V;
    double best_pp = 0, best_dd = 0, pp = 0, dd = 0;
    for (int r = 0; r < reps; r++) {
        if (bench_once(c, prompt, P, G, V, &pp, &dd)) return 1;
        if (pp > best_pp) best_pp = pp;
        if (dd > best_dd) best_dd = dd;
    }
    char ftype[128];
    if (llama_model_meta_val_str(m, "general.file_type", ftype, sizeof ftype) < 0) snprintf(ftype, sizeof ftype, "?");
    printf("{\"engine\":\"llama.cpp\",\"model\":\"%s\",\"file_type\":\"%s\",\"kv\":\"%s\",\"prompt_tokens\":%d,"
           "\"decode_tokens\":%d,\"prompt_tok_per_s\":%.2f,\"decode_tok_per_s\":%.2f,\"threads\":%d,\"reps\":%d,"
           "\"file_bytes\":%ld}\n",
           argv[2], ftype, kv_type(kv) == GGML_TYPE_F16 ? "f16" : "f32", P, G, best_pp, best_dd, threads, reps,
           file_size(argv[2]));
    free(prompt);
    llama_free(c);
    llama_model_free(m);
    return 0;
}

static int cmd_info(int argc, char **argv) {
    if (argc < 3) return fail("usage: llama_driver info MODEL");
    backends_init();
    struct llama_model *m = load_model(argv[2], 0);
    if (!m) return 1;
    char arch[64], desc[256];
    if (llama_model_meta_val_str(m, "general.architecture", arch, sizeof arch) < 0) snprintf(arch, sizeof arch, "?");
    llama_model_desc(m, desc, sizeof desc);
    const struct llama_vocab *v = llama_model_get_vocab(m);
    printf("{\"architecture\":\"%s\",\"desc\":\"%s\",\"n_vocab\":%d,\"n_ctx_train\":%d,\"n_embd\":%d,\"n_layer\":%d,"
           "\"n_head\":%d,\"n_head_kv\":%d,\"n_params\":%llu,\"size\":%llu,\"bos\":%d,\"eos\":%d,\"add_bos\":%s,"
           "\"vocab_type\":%d}\n",
           arch, desc, llama_vocab_n_tokens(v), llama_model_n_ctx_train(m), llama_model_n_embd(m),
           llama_model_n_layer(m), llama_model_n_head(m), llama_model_n_head_kv(m),
           (unsigned long long)llama_model_n_params(m), (unsigned long long)llama_model_size(m), llama_vocab_bos(v),
           llama_vocab_eos(v), llama_vocab_get_add_bos(v) ? "true" : "false", (int)llama_vocab_type(v));
    llama_model_free(m);
    return 0;
}


/* A float32 C-order 2-D .npy (version 1 or 2), as numpy writes it. */
static int read_npy_f32(const char *path, float **x, int *rows, int *cols) {
    char *b;
    size_t n;
    if (read_file(path, &b, &n)) return 1;
    size_t hl = 0, off = 0;
    if (n >= 10 && !memcmp(b, "\x93NUMPY", 6)) {
        if (b[6] == 1) hl = (unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8, off = 10;
        else if (n >= 12) hl = (unsigned char)b[8] | (size_t)(unsigned char)b[9] << 8 | (size_t)(unsigned char)b[10] << 16, off = 12;
    }
    const char *shape = off && off + hl <= n ? strstr(b + off, "'shape': (") : NULL;
    long r = 0, c = 0;
    if (!shape || !strstr(b + off, "'<f4'") || strstr(b + off, "'fortran_order': True") ||
        sscanf(shape + 10, "%ld, %ld", &r, &c) != 2 || r <= 0 || c <= 0 || (size_t)r * (size_t)c * 4 != n - off - hl) {
        free(b);
        return fail("%s: not a float32 2-D .npy", path);
    }
    *x = malloc((size_t)r * (size_t)c * sizeof(float));
    memcpy(*x, b + off + hl, (size_t)r * (size_t)c * sizeof(float));
    free(b);
    *rows = (int)r;
    *cols = (int)c;
    return 0;
}

static int cmd_compare(int argc, char **argv) {
    if (argc < 4) return fail("usage: llama_driver compare A.npy B.npy");
    float *a, *b;
    int ra, ca, rb, cb;
    if (read_npy_f32(argv[2], &a, &ra, &ca) || read_npy_f32(argv[3], &b, &rb, &cb)) return 1;
    if (ra != rb || ca != cb) return fail("compare: shapes [%d, %d] and [%d, %d] differ", ra, ca, rb, cb);
    double max_abs = 0, max_err = 0, kl_sum = 0, kl_max = 0;
    int same = 0;
    for (int t = 0; t < ra; t++) {
        const float *x = a + (size_t)t * ca, *y = b + (size_t)t * ca;
        double mx = x[0], my = y[0];
        for (int v = 0; v < ca; v++) {
            if (fabs(x[v]) > max_abs) max_abs = fabs(x[v]);
            if (fabs((double)x[v] - y[v]) > max_err) max_err = fabs((double)x[v] - y[v]);
            if (x[v] > mx) mx = x[v];
            if (y[v] > my) my = y[v];
        }
        double zx = 0, zy = 0;
        for (int v = 0; v < ca; v++) zx += exp(x[v] - mx), zy += exp(y[v] - my);
        double kl = 0;
        for (int v = 0; v < ca; v++) {
            const double lp = x[v] - mx - log(zx), lq = y[v] - my - log(zy);
            kl += exp(lp) * (lp - lq);
        }
        kl_sum += kl;
        if (kl > kl_max) kl_max = kl;
        same += argmax(x, ca) == argmax(y, ca);
    }
    printf("{\"positions\":%d,\"vocab\":%d,\"max_abs_logit\":%.6g,\"max_rel_err\":%.6g,\"kl_mean\":%.6g,\"kl_max\":%.6g,"
           "\"top1\":%.6f}\n",
           ra, ca, max_abs, max_abs > 0 ? max_err / max_abs : max_err, kl_sum / ra, kl_max, (double)same / ra);
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv) {
    const char *cmd = argc > 1 ? argv[1] : "";
    if (!strcmp(cmd, "logits")) return cmd_logits(argc, argv);
    if (!strcmp(cmd, "tokenize")) return cmd_tokenize(argc, argv);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc, argv);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc, argv);
    if (!strcmp(cmd, "info")) return cmd_info(argc, argv);
    if (!strcmp(cmd, "compare")) return cmd_compare(argc, argv);
    return fail("usage: llama_driver logits|tokenize|quantize|bench|info|compare ... (see the comment at the top of "
                "tools/llamacpp/llama_driver.c)");
}
