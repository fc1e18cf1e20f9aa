/* Training data from text or token shards. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/file_list.h"
#include "data/shard.h"
#include "data/text_data.h"
#include "diffattn/tokenizer.h"
#include "diffattn/formats.h"

/* The raw bytes of a text corpus while it is read. */
typedef struct {
    uint8_t *bytes;
    size_t n;
    int n_files;
} byte_buf;

static da_status append_file(byte_buf *d, size_t *cap, const char *path) {
    da_status open_st;
    FILE *fp = da_fopen_regular(path, &open_st);
    if (!fp) return open_st;
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, fp)) > 0) {
        if (d->n + got > *cap) {
            size_t nc = *cap ? *cap * 2 : 1 << 20;
            while (nc < d->n + got) nc *= 2;
            uint8_t *nb = realloc(d->bytes, nc);
            if (!nb) {
                fclose(fp);
                return da_errorf("%s: out of memory reading the corpus (%zu bytes so far)", path, d->n);
            }
            d->bytes = nb;
            *cap = nc;
        }
        memcpy(d->bytes + d->n, buf, got);
        d->n += got;
    }
    int err = ferror(fp);
    fclose(fp);
    if (err) return da_errorf("%s: read error", path);
    d->n_files++;
    return da_ok();
}

static da_status too_little(const char *path, size_t have, const char *unit, int seq_len, const char *which) {
    return da_errorf("%s: the %s split holds %zu %s, too few for windows of %d tokens (need at least %d; use more "
                     "data or a smaller --seq)",
                     path, which, have, unit, seq_len, seq_len + 1);
}

static da_status load_text(da_text_data *d, const char *path, float val_fraction, int seq_len) {
    if (!(val_fraction > 0 && val_fraction < 1))
        return da_errorf("--val-fraction %g must be in (0, 1)", (double)val_fraction);
    struct stat sb;
    if (stat(path, &sb)) return da_errorf("%s: %s", path, strerror(errno));
    byte_buf b = {0};
    size_t cap = 0;
    file_list fl = {0};
    da_status st = da_file_list_add(&fl, path); /* a file, or every regular file below a folder, sorted */
    for (int i = 0; i < fl.n && !st.code; i++) st = append_file(&b, &cap, fl.path[i]);
    da_file_list_free(&fl);
    if (!st.code && b.n == 0)
        st = da_errorf("%s: no text (%s)", path,
                       S_ISDIR(sb.st_mode) ? "the folder has no non-empty regular files" : "the file is empty");
    size_t n_val = (size_t)((double)b.n * val_fraction), need = (size_t)seq_len + 1;
    if (!st.code && (b.n - n_val < need || n_val < need)) {
        size_t total = (size_t)((double)need / (val_fraction < 0.5 ? val_fraction : 1 - val_fraction)) + 1;
        st = da_errorf("%s: %zu bytes of text is too little for windows of %d tokens with validation fraction %g "
                       "(need at least %zu bytes; use more text or a smaller --seq)",
                       path, b.n, seq_len, (double)val_fraction, total);
    }
    if (!st.code) {
        d->owned = malloc(b.n * sizeof(uint32_t));
        d->spans = calloc(2, sizeof(da_token_span));
        if (!d->owned || !d->spans) st = da_errorf("%s: out of memory", path);
    }
    if (st.code) {
        free(b.bytes);
        return st;
    }
    for (size_t i = 0; i < b.n; i++) d->owned[i] = b.bytes[i];
    free(b.bytes);
    d->n_train = b.n - n_val;
    d->n_val = n_val;
    d->spans[0] = (da_token_span){d->owned, d->n_train};
    d->spans[1] = (da_token_span){d->owned + d->n_train, n_val};
    d->n_train_spans = d->n_val_spans = 1;
    d->vocab_size = 256;
    d->n_files = b.n_files;
    return da_ok();
}

int da_data_is_shards(const char *path) {
    char p[4096];
    struct stat sb;
    snprintf(p, sizeof p, "%s/train_000000.bin", path);
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int da_data_vocab_size(const char *path) {
    if (!da_data_is_shards(path)) return 256;
    char p[4096];
    snprintf(p, sizeof p, "%s/train_000000.bin", path);
    FILE *fp = da_fopen_regular(p, NULL);
    da_shard_header h;
    int ok = fp && fread(&h, sizeof h, 1, fp) == 1 && h.magic == DA_SHARD_MAGIC && h.vocab_size > 0 &&
             h.vocab_size <= (1u << 24);
    if (fp) fclose(fp);
    return ok ? (int)h.vocab_size : 256;
}

/* Maps one shard and checks its header against its size and vocabulary. */
static da_status map_shard(da_text_data *d, const char *path, da_token_span *span) {
    da_status open_st;
    int fd = da_open_regular(path, &open_st);
    if (fd < 0) return open_st;
    struct stat sb;
    if (fstat(fd, &sb) || sb.st_size < (off_t)sizeof(da_shard_header)) {
        close(fd);
        return da_errorf("%s: shorter than a shard header (%d bytes); the file is truncated or not a shard", path,
                         (int)sizeof(da_shard_header));
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return da_errorf("%s: cannot map: %s", path, strerror(errno));
    d->maps[d->n_maps] = m;
    d->map_sizes[d->n_maps++] = (size_t)sb.st_size;
    da_shard_header h;
    memcpy(&h, m, sizeof h);
    if (h.magic != DA_SHARD_MAGIC) return da_errorf("%s: wrong magic (not a diffattn token shard)", path);
    if (h.version != DA_SHARD_VERSION)
        return da_errorf("%s: shard version %u is not supported (this build reads %u)", path, h.version, DA_SHARD_VERSION);
    if (h.vocab_size == 0 || h.vocab_size > (1u << 24)) return da_errorf("%s: impossible vocab_size %u", path, h.vocab_size);
    if (h.n_tokens > ((uint64_t)sb.st_size - sizeof h) / 4 || sizeof h + 4 * h.n_tokens != (uint64_t)sb.st_size)
        return da_errorf("%s: the header counts %llu tokens but the file holds %llu; the shard is truncated or corrupt",
                         path, (unsigned long long)h.n_tokens, (unsigned long long)(((uint64_t)sb.st_size - sizeof h) / 4));
    if (d->vocab_size && (int)h.vocab_size != d->vocab_size)
        return da_errorf("%s: vocab_size %u differs from the other shards' %d", path, h.vocab_size, d->vocab_size);
    d->vocab_size = (int)h.vocab_size;
    const uint32_t *tok = (const uint32_t *)((const uint8_t *)m + sizeof h);
    for (uint64_t i = 0; i < h.n_tokens; i++)
        if (tok[i] >= h.vocab_size)
            return da_errorf("%s: token #%llu = %u is outside the vocabulary (%u)", path, (unsigned long long)i, tok[i],
                             h.vocab_size);
    *span = (da_token_span){tok, (size_t)h.n_tokens};
    return da_ok();
}

static da_status load_shards(da_text_data *d, const char *dir, int seq_len) {
    int counts[2] = {0, 0};
    const char *kinds[2] = {"train", "val"};
    char p[4096];
    struct stat sb;
    for (int k = 0; k < 2; k++)
        for (;; counts[k]++) {
            snprintf(p, sizeof p, "%s/%s_%06d.bin", dir, kinds[k], counts[k]);
            if (stat(p, &sb)) break;
        }
    if (counts[1] == 0) return da_errorf("%s: has train shards but no val_000000.bin", dir);
    int total = counts[0] + counts[1];
    d->spans = calloc((size_t)total, sizeof(da_token_span));
    d->maps = calloc((size_t)total, sizeof(void *));
    d->map_sizes = calloc((size_t)total, sizeof(size_t));
    if (!d->spans || !d->maps || !d->map_sizes) return da_errorf("%s: out of memory", dir);
    d->from_shards = 1;
    int s = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < counts[k]; i++, s++) {
            snprintf(p, sizeof p, "%s/%s_%06d.bin", dir, kinds[k], i);
            da_status st = map_shard(d, p, &d->spans[s]);
            if (st.code) return st;
            if (k == 0) d->n_train += d->spans[s].n;
            else d->n_val += d->spans[s].n;
        }
    d->n_train_spans = counts[0];
    d->n_val_spans = counts[1];
    d->n_files = total;
    if (d->n_train < (size_t)seq_len + 1) return too_little(dir, d->n_train, "tokens", seq_len, "train");
    if (d->n_val < (size_t)seq_len + 1) return too_little(dir, d->n_val, "tokens", seq_len, "validation");
    return da_ok();
}

static da_status encode_part(const da_tokenizer *tok, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                             size_t *cap) {
    return n ? da_tokenizer_encode(tok, text, n, ids, n_ids, cap) : da_ok();
}

/* Text through a tokenizer, split as `diffattn prepare` splits it: the last
 * val_fraction of the bytes is the validation split, each file is encoded on
 * its own, and <|endoftext|> (when the tokenizer has it) follows every file
 * but the last, in the split where the file ends. So these are the ids of
 * prepare's shards of the same text. */
static da_status load_text_tok(da_text_data *d, const char *path, float val_fraction, int seq_len,
                               const da_tokenizer *tok) {
    if (!(val_fraction > 0 && val_fraction < 1))
        return da_errorf("--val-fraction %g must be in (0, 1)", (double)val_fraction);
    byte_buf b = {0};
    size_t cap = 0;
    file_list fl = {0};
    da_status st = da_file_list_add(&fl, path);
    size_t *ends = st.code ? NULL : malloc(((size_t)fl.n + 1) * sizeof *ends);
    if (!st.code && !ends) st = da_errorf("%s: out of memory", path);
    for (int i = 0; i < fl.n && !st.code; i++) {
        st = append_file(&b, &cap, fl.path[i]);
        ends[i] = b.n;
    }
    if (!st.code && b.n == 0) st = da_errorf("%s: no text", path);
    const size_t val_start = b.n - (size_t)((double)b.n * val_fraction);
    const int eot = da_tokenizer_special_id(tok, "<|endoftext|>");
    int *ids[2] = {NULL, NULL};
    size_t n_ids[2] = {0, 0}, caps[2] = {0, 0};
    for (int i = 0; i < fl.n && !st.code; i++) {
        const size_t a = i ? ends[i - 1] : 0, e = ends[i];
        if (a == e) continue; /* prepare skips empty files */
        const size_t cut = e < val_start ? e : a > val_start ? a : val_start;
        st = encode_part(tok, b.bytes + a, cut - a, &ids[0], &n_ids[0], &caps[0]);
        if (!st.code) st = encode_part(tok, b.bytes + cut, e - cut, &ids[1], &n_ids[1], &caps[1]);
        const int k = e <= val_start ? 0 : 1;
        if (!st.code && eot >= 0 && i + 1 < fl.n) {
            if (n_ids[k] == caps[k]) {
                int *p = realloc(ids[k], (caps[k] + 1024) * sizeof(int));
                if (!p) {
                    st = da_errorf("out of memory");
                    break;
                }
                ids[k] = p;
                caps[k] += 1024;
            }
            ids[k][n_ids[k]++] = eot;
        }
    }
    da_file_list_free(&fl);
    free(ends);
    free(b.bytes);
    if (!st.code && n_ids[0] < (size_t)seq_len + 1) st = too_little(path, n_ids[0], "tokens", seq_len, "train");
    if (!st.code && n_ids[1] < (size_t)seq_len + 1) st = too_little(path, n_ids[1], "tokens", seq_len, "validation");
    if (!st.code) {
        d->owned = malloc((n_ids[0] + n_ids[1]) * sizeof(uint32_t));
        d->spans = calloc(2, sizeof(da_token_span));
        if (!d->owned || !d->spans) st = da_errorf("%s: out of memory", path);
    }
    if (!st.code) {
        for (size_t i = 0; i < n_ids[0]; i++) d->owned[i] = (uint32_t)ids[0][i];
        for (size_t i = 0; i < n_ids[1]; i++) d->owned[n_ids[0] + i] = (uint32_t)ids[1][i];
        d->n_train = n_ids[0];
        d->n_val = n_ids[1];
        d->spans[0] = (da_token_span){d->owned, d->n_train};
        d->spans[1] = (da_token_span){d->owned + d->n_train, d->n_val};
        d->n_train_spans = d->n_val_spans = 1;
        d->vocab_size = da_tokenizer_vocab_size(tok);
        d->n_files = b.n_files;
        d->tokenized = 1;
    }
    free(ids[0]);
    free(ids[1]);
    return st;
}

da_status da_text_data_load_tok(da_text_data *d, const char *path, float val_fraction, int seq_len,
                                const da_tokenizer *tok) {
    if (!tok || da_data_is_shards(path)) return da_text_data_load(d, path, val_fraction, seq_len);
    memset(d, 0, sizeof *d);
    da_status st = load_text_tok(d, path, val_fraction, seq_len, tok);
    if (st.code) da_text_data_free(d);
    return st;
}

da_status da_text_data_check_vocab(const da_text_data *d, const char *path, int model_vocab) {
    if (d->vocab_size == model_vocab) return da_ok();
    if (d->from_shards)
        return da_errorf("%s: the shards' vocabulary has %d tokens but the model's %d (shards of another tokenizer?)",
                         path, d->vocab_size, model_vocab);
    if (d->tokenized)
        return da_errorf("%s: the tokenizer has %d tokens but the model's vocabulary %d", path, d->vocab_size,
                         model_vocab);
    return da_errorf("%s: text read as bytes has a vocabulary of 256 but the model's has %d tokens, and the model "
                     "carries no tokenizer: give the tokenizer, or token shards from `diffattn prepare`",
                     path, model_vocab);
}

da_status da_data_tokenizer(const char *path, da_tokenizer **out) {
    *out = NULL;
    if (!da_data_is_shards(path)) return da_ok();
    char p[4200];
    struct stat sb;
    snprintf(p, sizeof p, "%s/tokenizer.json", path);
    int has = !stat(p, &sb);
    snprintf(p, sizeof p, "%s/encoder.json", path);
    has |= !stat(p, &sb);
    return has ? da_tokenizer_load(out, path) : da_ok();
}

da_status da_text_data_load(da_text_data *d, const char *path, float val_fraction, int seq_len) {
    memset(d, 0, sizeof *d);
    da_status st = da_data_is_shards(path) ? load_shards(d, path, seq_len) : load_text(d, path, val_fraction, seq_len);
    if (st.code) da_text_data_free(d);
    return st;
}

void da_text_data_free(da_text_data *d) {
    for (int i = 0; i < d->n_maps; i++) munmap(d->maps[i], d->map_sizes[i]);
    free(d->maps);
    free(d->map_sizes);
    free(d->spans);
    free(d->owned);
    memset(d, 0, sizeof *d);
}

/* Tokens [off, off + T] of a split, read across shard boundaries: shards
 * are a storage detail, so a split reads as one contiguous stream. */
static void fill_window(const da_token_span *spans, int n_spans, size_t off, int T, int *tokens, int *targets) {
    int k = 0;
    while (k < n_spans && off >= spans[k].n) off -= spans[k++].n;
    for (int t = 0; t <= T; t++) {
        while (off >= spans[k].n) off = 0, k++;
        int v = (int)spans[k].tok[off++];
        if (t < T) tokens[t] = v;
        if (t > 0) targets[t - 1] = v;
    }
}

void da_text_data_sample(const da_text_data *d, da_rng *rng, int B, int T, int *tokens, int *targets) {
    const uint64_t starts = d->n_train - (size_t)T; /* windows start at 0 .. n_train - T - 1 */
    for (int b = 0; b < B; b++)
        fill_window(d->spans, d->n_train_spans, da_rng_next(rng) % starts, T, tokens + (size_t)b * T,
                    targets + (size_t)b * T);
}

void da_text_data_sample_strided(const da_text_data *d, da_rng *rng, int n, int phase, int stride, int T,
                                 int *tokens, int *targets) {
    const uint64_t starts = d->n_train - (size_t)T; /* as da_text_data_sample: the same draws, in the same order */
    int k = 0;
    for (int j = 0; j < n; j++) {
        uint64_t off = da_rng_next(rng) % starts;
        if (j % stride != phase) continue;
        fill_window(d->spans, d->n_train_spans, off, T, tokens + (size_t)k * T, targets + (size_t)k * T);
        k++;
    }
}

void da_text_data_train_window(const da_text_data *d, size_t off, int T, int *tokens, int *targets) {
    fill_window(d->spans, d->n_train_spans, off, T, tokens, targets);
}

void da_text_data_val_window(const da_text_data *d, long i, long n_windows, int T, int *tokens, int *targets) {
    /* evenly spaced over the validation split's window starts */
    const size_t last = d->n_val - (size_t)T - 1;
    size_t off = n_windows > 1 ? (size_t)((double)last * (double)i / (double)(n_windows - 1)) : 0;
    fill_window(d->spans + d->n_train_spans, d->n_val_spans, off, T, tokens, targets);
}
