/* Text -> token shards, streaming: documents are read in chunks cut at line
 * ends, a batch of chunks is encoded in parallel, and the ids are appended in
 * order to the current shard. Shards are written under temporary names and
 * renamed only when the whole input is done, so an error or a kill never
 * leaves a half-written data set behind. */
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "io/file_list.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/text_data.h"
#include "io/atomic_file.h"
#include "diffattn/formats.h"

void da_prepare_config_default(da_prepare_config *pc) {
    pc->val_fraction = 0.01f;
    pc->shard_tokens = 100L * 1000 * 1000;
    pc->chunk_bytes = 4 << 20;
    pc->quiet = 0;
}

/* ------------------------------------------------------------ shard writer */

typedef struct {
    const char *dir, *kind;
    int index;          /* shards finished */
    FILE *fp;           /* the open temporary shard */
    uint64_t n;         /* tokens in it */
    uint32_t vocab;
    long long total;
} shard_writer;

/* A shard is written as .<kind>_NNNNNN.bin.tmp.<pid> and renamed when the
 * whole split is done; the pid lets a later run remove what a killed one left. */
static void shard_name(char *buf, size_t n, const shard_writer *w, int index, int tmp) {
    if (tmp) snprintf(buf, n, "%s/.%s_%06d.bin.tmp.%ld", w->dir, w->kind, index, (long)getpid());
    else snprintf(buf, n, "%s/%s_%06d.bin", w->dir, w->kind, index);
}

static da_status write_error(const shard_writer *w, int e) {
    char p[4096];
    shard_name(p, sizeof p, w, w->index, 1);
    return da_errorf("%s: write failed: %s%s; no shard was published", p, strerror(e),
                     e == ENOSPC || e == EFBIG || e == EDQUOT ? " (disk full, quota or file size limit)" : "");
}

static da_status shard_finish(shard_writer *w) {
    if (!w->fp) return da_ok();
    da_shard_header h = {DA_SHARD_MAGIC, DA_SHARD_VERSION, w->vocab, 0, w->n};
    int bad = ferror(w->fp) || fseek(w->fp, 0, SEEK_SET) || fwrite(&h, sizeof h, 1, w->fp) != 1 || fflush(w->fp) ||
              fsync(fileno(w->fp));
    int e = errno;
    bad |= fclose(w->fp) != 0;
    if (bad && !e) e = errno ? errno : EIO;
    w->fp = NULL;
    da_status st = bad ? write_error(w, e) : da_ok();
    w->index++;
    return st;
}

static da_status shard_append(shard_writer *w, const int *ids, size_t n, long max_tokens) {
    while (n > 0) {
        if (!w->fp) {
            char p[4096];
            shard_name(p, sizeof p, w, w->index, 1);
            w->fp = da_create_new_file(p); /* never through a name planted in the folder */
            if (!w->fp) return da_errorf("%s: cannot create a new file: %s", p, strerror(errno));
            da_shard_header h = {0};
            fwrite(&h, sizeof h, 1, w->fp);
            w->n = 0;
        }
        size_t take = n;
        if (w->n + take > (uint64_t)max_tokens) take = (size_t)((uint64_t)max_tokens - w->n);
        _Static_assert(sizeof(int) == sizeof(uint32_t), "ids are written as they lie in memory");
        if (fwrite(ids, 4, take, w->fp) != take) return write_error(w, errno);
        w->n += take;
        w->total += (long long)take;
        ids += take;
        n -= take;
        if (w->n >= (uint64_t)max_tokens) {
            da_status st = shard_finish(w);
            if (st.code) return st;
        }
    }
    return da_ok();
}

/* Temporary shards become the real ones, or are removed. */
static da_status shard_publish(shard_writer *w, int keep) {
    for (int i = 0; i < w->index; i++) {
        char tmp[4096], fin[4096];
        shard_name(tmp, sizeof tmp, w, i, 1);
        shard_name(fin, sizeof fin, w, i, 0);
        if (!keep) unlink(tmp);
        else if (rename(tmp, fin)) return da_errorf("%s: cannot rename: %s", fin, strerror(errno));
    }
    return da_ok();
}

/* ------------------------------------------------------------ chunks */

typedef struct {
    uint8_t *text;
    size_t n, cap;
    int val;      /* goes to the validation split */
    int eot;      /* append end-of-text after it (a document ends here) */
    int *ids;
    size_t n_ids, ids_cap;
    da_status st;
} chunk;

static void progress(const da_prepare_config *pc, double done, double total, double t0, int final) {
    if (pc->quiet) return;
    double el = da_now_s() - t0, rate = done / (el > 1e-9 ? el : 1e-9);
    double eta = rate > 0 ? (total - done) / rate : 0;
    fprintf(stderr, "\rprepare: %.1f / %.1f MB  %.1f MB/s  ETA %.0fs   %s", done / 1e6, total / 1e6, rate / 1e6, eta,
            final ? "\n" : "");
    fflush(stderr);
}

/* The tokenizer's files, copied into the shard folder (the folder form that
 * da_tokenizer_load reads). */
static da_status copy_tokenizer_files(const char *tok_path, const char *out_dir) {
    struct stat sb;
    char src[4096], dst[4096];
    if (stat(tok_path, &sb)) return da_errorf("%s: %s", tok_path, strerror(errno));
    const char *names[3] = {"tokenizer.json", "encoder.json", "vocab.bpe"};
    if (S_ISDIR(sb.st_mode)) {
        for (int i = 0; i < 3; i++) {
            snprintf(src, sizeof src, "%s/%s", tok_path, names[i]);
            if (stat(src, &sb)) continue;
            snprintf(dst, sizeof dst, "%s/%s", out_dir, names[i]);
            da_status st = da_copy_file(src, dst);
            if (st.code) return st;
            if (i == 0) break; /* a tokenizer.json is the whole tokenizer */
        }
        return da_ok();
    }
    const char *base = strrchr(tok_path, '/');
    base = base ? base + 1 : tok_path;
    if (!strcmp(base, "encoder.json")) {
        snprintf(dst, sizeof dst, "%s/encoder.json", out_dir);
        da_status st = da_copy_file(tok_path, dst);
        if (st.code) return st;
        snprintf(src, sizeof src, "%.*svocab.bpe", (int)(base - tok_path), tok_path);
        snprintf(dst, sizeof dst, "%s/vocab.bpe", out_dir);
        return da_copy_file(src, dst);
    }
    snprintf(dst, sizeof dst, "%s/tokenizer.json", out_dir);
    return da_copy_file(tok_path, dst);
}

/* Where the input stands: the file being read, the bytes carried over from
 * the last cut, and the byte offset of the train/validation split. */
typedef struct {
    const file_list *fl;
    int fi;          /* the next file (fp: the current one, or NULL) */
    FILE *fp;
    uint8_t *carry;  /* (carry_cap) bytes after the last cut */
    size_t n_carry, carry_cap;
    double offset;   /* input bytes consumed */
    double val_start; /* the first validation byte */
    int eot;         /* <|endoftext|>'s id, or -1 */
    size_t chunk_bytes;
    const da_tokenizer *tok; /* where to cut: da_tokenizer_safe_cut */
} reader;

/* Up to `batch` chunks of text, each cut where encoding may split it and
 * never across the train/validation boundary; *nb: how many. */
static da_status fill_batch(reader *r, chunk *ch, int batch, int *nb, da_prepare_stats *stats) {
    while (*nb < batch) {
        if (!r->fp) {
            if (r->fi == r->fl->n) break;
            if (r->fl->size[r->fi] == 0) {
                stats->empty_files++;
                r->fi++;
                continue;
            }
            da_status open_st;
            r->fp = da_fopen_regular(r->fl->path[r->fi], &open_st);
            if (!r->fp) return open_st;
            stats->files++;
        }
        chunk *c = &ch[*nb];
        /* fresh bytes to read: a chunk, or as much as is carried when no
         * safe cut was found, so that a text without one grows the chunk
         * geometrically */
        size_t want = r->chunk_bytes > r->n_carry ? r->chunk_bytes : r->n_carry;
        /* never let a chunk cross the train/val boundary */
        int is_val = r->offset >= r->val_start;
        if (!is_val && r->offset + (double)r->n_carry + (double)want > r->val_start)
            want = (size_t)(r->val_start - r->offset) - r->n_carry;
        if (c->cap < r->n_carry + want) {
            uint8_t *nt = realloc(c->text, r->n_carry + want);
            if (!nt) return da_errorf("out of memory");
            c->text = nt;
            c->cap = r->n_carry + want;
        }
        memcpy(c->text, r->carry, r->n_carry);
        size_t got = fread(c->text + r->n_carry, 1, want, r->fp);
        if (ferror(r->fp)) return da_errorf("%s: read error", r->fl->path[r->fi]);
        size_t n = r->n_carry + got;
        int doc_end = got < want && feof(r->fp);
        int at_split = !is_val && r->offset + (double)n >= r->val_start;
        /* 0 when the text so far has no safe cut: all of it is carried */
        size_t cut = doc_end || at_split ? n : da_tokenizer_safe_cut(r->tok, c->text, n);
        r->n_carry = n - cut;
        if (r->n_carry > r->carry_cap) {
            uint8_t *nc = realloc(r->carry, r->n_carry);
            if (!nc) return da_errorf("out of memory");
            r->carry = nc;
            r->carry_cap = r->n_carry;
        }
        memcpy(r->carry, c->text + cut, r->n_carry);
        c->n = cut;
        c->val = is_val;
        c->eot = doc_end && r->eot >= 0 && r->fi + 1 < r->fl->n;
        r->offset += (double)cut;
        if (doc_end) {
            fclose(r->fp);
            r->fp = NULL;
            r->fi++;
        }
        if (c->n > 0 || c->eot) (*nb)++;
    }
    return da_ok();
}

/* Encodes the chunks in parallel, each ending a document with <|endoftext|>. */
static void encode_batch(const da_tokenizer *tok, chunk *ch, int nb, int eot) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int i = 0; i < nb; i++) {
        ch[i].n_ids = 0;
        ch[i].st = ch[i].n ? da_tokenizer_encode(tok, ch[i].text, ch[i].n, &ch[i].ids, &ch[i].n_ids, &ch[i].ids_cap)
                           : da_ok();
        if (!ch[i].st.code && ch[i].eot) {
            int e = eot;
            size_t one = 1;
            if (ch[i].n_ids == ch[i].ids_cap) {
                int *p = realloc(ch[i].ids, (ch[i].ids_cap + 1) * sizeof(int));
                if (!p) ch[i].st = da_errorf("out of memory");
                else ch[i].ids = p, ch[i].ids_cap++;
            }
            if (!ch[i].st.code) ch[i].ids[ch[i].n_ids] = e, ch[i].n_ids += one;
        }
    }
}

da_status da_prepare(const char *tokenizer_path, const char *const *inputs, int n_inputs, const char *out_dir,
                     const da_prepare_config *pc, da_prepare_stats *stats) {
    memset(stats, 0, sizeof *stats);
    da_write_faults_as_errors();
    if (!(pc->val_fraction > 0 && pc->val_fraction < 1))
        return da_errorf("val_fraction: %g must lie in (0, 1)", (double)pc->val_fraction);
    if (pc->shard_tokens < 1024) return da_errorf("shard_tokens: %ld must be at least 1024", pc->shard_tokens);
    if (n_inputs < 1) return da_errorf("no input: give at least one file or folder");
    da_tokenizer *tok;
    da_status st = da_tokenizer_load(&tok, tokenizer_path);
    if (st.code) return st;
    file_list fl = {0};
    for (int i = 0; i < n_inputs && !st.code; i++) st = da_file_list_add(&fl, inputs[i]);
    double total = 0;
    for (int i = 0; i < fl.n; i++) total += (double)fl.size[i];
    if (!st.code && total == 0)
        st = da_errorf("no text: the %d input file(s) are all empty", fl.n);
    if (!st.code) st = da_make_dirs(out_dir);
    if (!st.code && da_data_is_shards(out_dir))
        st = da_errorf("%s: already holds shards; choose an empty folder", out_dir);
    if (!st.code) {
        da_remove_dead_temporaries(out_dir, ".train_", 0);
        da_remove_dead_temporaries(out_dir, ".val_", 0);
    }

    const int threads = omp_get_max_threads(), batch = 2 * threads;
    const int eot = da_tokenizer_special_id(tok, "<|endoftext|>");
    const double val_start = total - (double)(size_t)(total * pc->val_fraction); /* first val byte */
    shard_writer tw = {out_dir, "train", 0, NULL, 0, (uint32_t)da_tokenizer_vocab_size(tok), 0};
    shard_writer vw = {out_dir, "val", 0, NULL, 0, (uint32_t)da_tokenizer_vocab_size(tok), 0};
    chunk *ch = calloc((size_t)batch, sizeof(chunk));
    if (!st.code && !ch) st = da_errorf("out of memory");
    const double t0 = da_now_s();
    reader rd = {&fl,      0,         NULL, malloc((size_t)pc->chunk_bytes), 0, (size_t)pc->chunk_bytes, 0,
                 val_start, eot, (size_t)pc->chunk_bytes, tok};
    if (!rd.carry && !st.code) st = da_errorf("out of memory");
    double last_progress = 0;
    while (!st.code) {
        /* fill a batch of chunks, then encode them on every core */
        int nb = 0;
        st = fill_batch(&rd, ch, batch, &nb, stats);
        if (st.code || nb == 0) break;
        encode_batch(tok, ch, nb, rd.eot);
        for (int i = 0; i < nb && !st.code; i++) {
            st = ch[i].st;
            if (!st.code) st = shard_append(ch[i].val ? &vw : &tw, ch[i].ids, ch[i].n_ids, pc->shard_tokens);
        }
        if (da_now_s() - last_progress > 0.5) {
            progress(pc, rd.offset, total, t0, 0);
            last_progress = da_now_s();
        }
    }
    if (rd.fp) fclose(rd.fp);
    if (!st.code) st = shard_finish(&tw);
    if (!st.code) st = shard_finish(&vw);
    if (!st.code && (tw.total == 0 || vw.total == 0))
        st = da_errorf("the %s split is empty (%.0f bytes of input); use more text or another val_fraction",
                       tw.total == 0 ? "train" : "validation", total);
    if (!st.code) st = copy_tokenizer_files(tokenizer_path, out_dir);
    if (!st.code) st = shard_publish(&tw, 1);
    if (!st.code) st = shard_publish(&vw, 1);
    if (st.code) {
        if (tw.fp) fclose(tw.fp), tw.fp = NULL, tw.index++;
        if (vw.fp) fclose(vw.fp), vw.fp = NULL, vw.index++;
        shard_publish(&tw, 0);
        shard_publish(&vw, 0);
    } else {
        progress(pc, total, total, t0, 1);
    }
    stats->bytes = total;
    stats->seconds = da_now_s() - t0;
    stats->train_tokens = tw.total;
    stats->val_tokens = vw.total;
    stats->train_shards = tw.index;
    stats->val_shards = vw.index;
    for (int i = 0; i < batch && ch; i++) {
        free(ch[i].text);
        free(ch[i].ids);
    }
    free(ch);
    free(rd.carry);
    da_file_list_free(&fl);
    da_tokenizer_free(tok);
    return st;
}
