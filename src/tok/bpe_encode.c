/* Encoding and decoding: special tokens cut out first, the text between them
 * NFC-normalised when the tokenizer says so, split by the pre-tokeniser's
 * regex, and each piece merged by BPE (a scan, or a heap for long pieces). */
#define _GNU_SOURCE /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/tokenizer_internal.h"
#include "tok/unicode.h"

static int push(int **ids, size_t *n, size_t *cap, int v) {
    if (*n == *cap) {
        size_t nc = *cap ? 2 * *cap : 1024;
        int *p = realloc(*ids, nc * sizeof(int));
        if (!p) return -1;
        *ids = p;
        *cap = nc;
    }
    (*ids)[(*n)++] = v;
    return 0;
}

/* BPE over one pre-token: repeatedly merge the adjacent pair of lowest rank
 * (leftmost on ties), as tiktoken does. sym, rank: scratch of n entries. */
static int bpe_piece(const da_tokenizer *t, const uint8_t *p, size_t n, int *sym, int *rank, int *merged_at,
                     int **ids, size_t *n_ids, size_t *cap) {
    if (n == 1) return push(ids, n_ids, cap, t->byte_id[p[0]]);
    size_t m = n;
    for (size_t i = 0; i < n; i++) sym[i] = t->byte_id[p[i]];
    for (size_t i = 0; i + 1 < m; i++) rank[i] = da_pair_map_get(&t->merges, sym[i], sym[i + 1], &merged_at[i]);
    for (;;) {
        int best = -1;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < m; i++)
            if (rank[i] >= 0 && (best < 0 || rank[i] < best)) best = rank[i], bi = i;
        if (best < 0) break;
        sym[bi] = merged_at[bi];
        memmove(sym + bi + 1, sym + bi + 2, (m - bi - 2) * sizeof(int));
        const size_t pairs_after = m >= bi + 3 ? m - bi - 3 : 0; /* pairs right of the merged one */
        memmove(rank + bi + 1, rank + bi + 2, pairs_after * sizeof(int));
        memmove(merged_at + bi + 1, merged_at + bi + 2, pairs_after * sizeof(int));
        m--;
        if (bi > 0) rank[bi - 1] = da_pair_map_get(&t->merges, sym[bi - 1], sym[bi], &merged_at[bi - 1]);
        if (bi + 1 < m) rank[bi] = da_pair_map_get(&t->merges, sym[bi], sym[bi + 1], &merged_at[bi]);
    }
    for (size_t i = 0; i < m; i++)
        if (push(ids, n_ids, cap, sym[i])) return -1;
    return 0;
}

/* The same merges in O(n log n), for long pieces, where the scan above is
 * quadratic: 100 KB of one letter took 12 s, 10 MB would take hours. The
 * symbols form a linked list; a min-heap holds (rank, left position) of
 * every pair made, stale entries included, and an entry is used only when
 * the pair now at its position still has its rank. Every current pair has
 * an entry, so the first valid one popped is the lowest rank, leftmost on
 * ties: the order of the scan, hence the same ids. */
typedef struct {
    int rank;
    int pos;
} heap_ent;

static int heap_less(heap_ent a, heap_ent b) { return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos); }

static void heap_push(heap_ent *h, size_t *n, heap_ent e) {
    size_t i = (*n)++;
    while (i > 0 && heap_less(e, h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, size_t *n) {
    heap_ent top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(h[c + 1], h[c])) c++;
        if (!heap_less(h[c], last)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static int bpe_piece_heap(const da_tokenizer *t, const uint8_t *p, size_t n, int **ids, size_t *n_ids,
                          size_t *cap) {
    /* sym, next, prev: n each; the heap: at most n - 1 first pairs and 2 per merge */
    int *sym = malloc(3 * n * sizeof(int));
    heap_ent *h = malloc(3 * n * sizeof(heap_ent));
    if (!sym || !h) {
        free(sym);
        free(h);
        return -1;
    }
    int *next = sym + n, *prev = sym + 2 * n;
    size_t hn = 0;
    int merged = 0;
    for (size_t i = 0; i < n; i++) {
        sym[i] = t->byte_id[p[i]];
        next[i] = i + 1 < n ? (int)i + 1 : -1;
        prev[i] = (int)i - 1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        int r = da_pair_map_get(&t->merges, sym[i], sym[i + 1], &merged);
        if (r >= 0) heap_push(h, &hn, (heap_ent){r, (int)i});
    }
    while (hn) {
        heap_ent e = heap_pop(h, &hn);
        int L = e.pos, R = next[L];
        if (sym[L] < 0 || R < 0 || da_pair_map_get(&t->merges, sym[L], sym[R], &merged) != e.rank) continue; /* stale */
        sym[L] = merged;
        sym[R] = -1;
        next[L] = next[R];
        if (next[R] >= 0) prev[next[R]] = L;
        int r;
        if (prev[L] >= 0 && (r = da_pair_map_get(&t->merges, sym[prev[L]], sym[L], &merged)) >= 0)
            heap_push(h, &hn, (heap_ent){r, prev[L]});
        if (next[L] >= 0 && (r = da_pair_map_get(&t->merges, sym[L], sym[next[L]], &merged)) >= 0)
            heap_push(h, &hn, (heap_ent){r, L});
    }
    int rc = 0;
    for (int i = 0; i >= 0 && !rc; i = next[i]) rc = push(ids, n_ids, cap, sym[i]);
    free(sym);
    free(h);
    return rc;
}

/* One pre-token's ids. scratch: 3 * scratch_n ints for the scan. */
static da_status encode_piece(const da_tokenizer *t, const uint8_t *p, size_t n, int **ids, size_t *n_ids,
                              size_t *cap, int *scratch, size_t scratch_n) {
    int whole, rc;
    if (t->ignore_merges && (whole = da_tok_bytes_id(t, p, n)) >= 0) rc = push(ids, n_ids, cap, whole);
    else if (n >= t->heap_from) rc = bpe_piece_heap(t, p, n, ids, n_ids, cap);
    else if (n > scratch_n) {
        int *big = malloc(3 * n * sizeof(int));
        rc = big ? bpe_piece(t, p, n, big, big + n, big + 2 * n, ids, n_ids, cap) : -1;
        free(big);
    } else {
        rc = bpe_piece(t, p, n, scratch, scratch + scratch_n, scratch + 2 * scratch_n, ids, n_ids, cap);
    }
    return rc ? da_errorf("out of memory") : da_ok();
}

/* Text between two matches of the pattern, g[0..n). Hugging Face's Split
 * makes each such gap a pre-token of its own (behavior Isolated) or drops it
 * (invert true, behavior Removed). It never sees invalid UTF-8, which PCRE2
 * skips: those bytes become single-byte tokens, so that any bytes encode
 * losslessly. The patterns of GPT-2, Llama 3, Qwen and GPT-4o match every
 * character, so only invalid bytes fall between their matches. */
static da_status encode_gap(const da_tokenizer *t, const uint8_t *g, size_t n, int **ids, size_t *n_ids, size_t *cap,
                            int *scratch, size_t scratch_n) {
    for (size_t i = 0; i < n;) {
        size_t j = i, w;
        while (j < n && (w = da_utf8_char_len(g + j, n - j))) j += w;
        if (j > i && !t->drop_gaps) {
            da_status st = encode_piece(t, g + i, j - i, ids, n_ids, cap, scratch, scratch_n);
            if (st.code) return st;
        }
        if (j < n && push(ids, n_ids, cap, t->byte_id[g[j++]])) return da_errorf("out of memory");
        i = j;
    }
    return da_ok();
}

/* Ordinary text (no special tokens): regex pieces, BPE each, and the gaps
 * between them (encode_gap). An empty match is no pre-token but ends a gap,
 * as in Hugging Face's Split. */
static da_status encode_ordinary(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                                 size_t *cap, pcre2_match_data *md, pcre2_match_context *mc, int *scratch,
                                 size_t scratch_n) {
    size_t pos = 0, from = 0; /* where the gap starts; where the search starts */
    while (pos < n) {
        uint32_t limit;
        size_t searched = n, window;
        int rc = da_tok_match_bounded(t, text, n, from, md, mc, &searched, &limit, &window);
        size_t s = n, e = n;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            s = ov[0];
            e = ov[1];
        } else if (rc == PCRE2_ERROR_NOMATCH && searched < n) { /* no match starts before searched: still a gap */
            from = searched;
            continue;
        } else if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) {
            char what[160];
            if (window)
                snprintf(what, sizeof what, "it scanned %zu bytes ahead for a shorter match (at most 8 bytes "
                         "scanned a byte matched)", window);
            else
                snprintf(what, sizeof what, "it passed PCRE2's %s limit of %u (%u steps a byte matched)",
                         rc == PCRE2_ERROR_MATCHLIMIT ? "match" : "depth",
                         rc == PCRE2_ERROR_MATCHLIMIT ? limit : MATCH_DEPTH_LIMIT, MATCH_STEPS_PER_BYTE);
            return da_errorf("the pre-tokeniser pattern \"%s\" does too much work at byte %zu: %s, so splitting "
                             "would take time growing faster than the text; not supported",
                             t->pattern, from, what);
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR why[120];
            pcre2_get_error_message(rc, why, sizeof why);
            return da_errorf("the pre-tokeniser pattern \"%s\" failed at byte %zu (PCRE2 error %d: %s)", t->pattern,
                             from, rc, (const char *)why);
        }
        da_status st = encode_gap(t, text + pos, s - pos, ids, n_ids, cap, scratch, scratch_n);
        if (!st.code && e > s) st = encode_piece(t, text + s, e - s, ids, n_ids, cap, scratch, scratch_n);
        if (st.code) return st;
        if (s == n) break;
        size_t w = e > s ? 0 : da_utf8_char_len(text + s, n - s);
        pos = e;
        from = e > s ? e : s + (w ? w : 1);
    }
    return da_ok();
}

/* Ordinary text, NFC-normalised first when the tokenizer says so. */
static da_status encode_normalized(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                                   size_t *cap, pcre2_match_data *md, pcre2_match_context *mc, int *scratch,
                                   size_t scratch_n) {
    uint8_t *norm = NULL;
    size_t nn = 0;
    int rc = t->nfc ? da_nfc_normalize_runs(text, n, &norm, &nn) : 1;
    if (rc < 0) return da_errorf("out of memory");
    if (rc == 1) return encode_ordinary(t, text, n, ids, n_ids, cap, md, mc, scratch, scratch_n);
    da_status st = encode_ordinary(t, norm, nn, ids, n_ids, cap, md, mc, scratch, scratch_n);
    free(norm);
    return st;
}

da_status da_tokenizer_encode(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids, size_t *n_ids,
                              size_t *cap) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    pcre2_match_context *mc = pcre2_match_context_create(NULL); /* the call's own limits (da_tok_match_bounded) */
    enum { SCRATCH = 256 };
    int scratch[3 * SCRATCH];
    if (!md || !mc) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        return da_errorf("out of memory");
    }
    /* each added token's next occurrence at or after pos (n: none), searched
     * again only once pos passes it: one scan of the text per token, however
     * many there are (Llama 3 declares 256) */
    size_t *hit_at = malloc((size_t)(t->n_special ? t->n_special : 1) * sizeof *hit_at);
    if (!hit_at) {
        pcre2_match_data_free(md);
        pcre2_match_context_free(mc);
        return da_errorf("out of memory");
    }
    for (int i = 0; i < t->n_special; i++) hit_at[i] = SIZE_MAX;
    da_status st = da_ok();
    size_t pos = 0;
    while (pos < n && !st.code) {
        /* the next added token, the longest of those starting there (Hugging
         * Face's leftmost-longest match) */
        size_t next = n;
        int sid = -1;
        for (int i = 0; i < t->n_special; i++) {
            int id = t->special_id[i];
            if (hit_at[i] == SIZE_MAX || (hit_at[i] < pos && hit_at[i] != n)) {
                const uint8_t *hit = memmem(text + pos, n - pos, t->tok[id], t->tok_len[id]);
                hit_at[i] = hit ? (size_t)(hit - text) : n;
            }
            if (hit_at[i] < next || (hit_at[i] == next && next < n && t->tok_len[id] > t->tok_len[sid]))
                next = hit_at[i], sid = id;
        }
        st = encode_normalized(t, text + pos, next - pos, ids, n_ids, cap, md, mc, scratch, SCRATCH);
        if (!st.code && sid >= 0) {
            if (push(ids, n_ids, cap, sid)) st = da_errorf("out of memory");
            next += t->tok_len[sid];
        }
        pos = next;
    }
    free(hit_at);
    pcre2_match_data_free(md);
    pcre2_match_context_free(mc);
    return st;
}

da_status da_tokenizer_encode_add_special(const da_tokenizer *t, const uint8_t *text, size_t n, int **ids,
                                          size_t *n_ids, size_t *cap) {
    for (int i = 0; i < t->n_pre; i++)
        if (push(ids, n_ids, cap, t->pre[i])) return da_errorf("out of memory");
    da_status st = da_tokenizer_encode(t, text, n, ids, n_ids, cap);
    for (int i = 0; !st.code && i < t->n_post; i++)
        if (push(ids, n_ids, cap, t->post[i])) st = da_errorf("out of memory");
    return st;
}

da_status da_tokenizer_decode(const da_tokenizer *t, const int *ids, size_t n, uint8_t **out, size_t *n_out,
                              size_t *cap) {
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->vocab_size || !t->tok[id])
            return da_errorf("id #%zu = %d is not in the vocabulary (0..%d)", i + 1, id, t->vocab_size - 1);
        size_t len = t->tok_len[id];
        if (*n_out + len > *cap) {
            size_t nc = *cap ? *cap : 4096;
            while (nc < *n_out + len) nc *= 2;
            uint8_t *p = realloc(*out, nc);
            if (!p) return da_errorf("out of memory");
            *out = p;
            *cap = nc;
        }
        memcpy(*out + *n_out, t->tok[id], len);
        *n_out += len;
    }
    return da_ok();
}
