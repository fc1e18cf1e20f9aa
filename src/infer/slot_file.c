/* Slot files (slot_file.h): the header, the tokens, then the cache's rows in
 * the order each_piece walks them. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/model.h"
#include "infer/engine.h"
#include "infer/session.h"
#include "infer/slot_file.h"
#include "io/atomic_file.h"

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static const uint64_t K1 = 0x9E3779B97F4A7C15ull, K2 = 0xC2B2AE3D27D4EB4Full;

static uint64_t mix(uint64_t h, uint64_t w) { return rotl64(h ^ (w * K1), 31) * K2; }

void da_slot_hash_add(da_slot_hasher *x, const void *data, size_t n) {
    const unsigned char *p = data;
    size_t i = 0;
    for (; i < n && x->n % 8; i++, x->n++) { /* finish the word begun by the previous piece */
        x->tail |= (uint64_t)p[i] << (8 * (x->n % 8));
        if (x->n % 8 == 7) x->h = mix(x->h, x->tail), x->tail = 0;
    }
    for (; i + 8 <= n; i += 8, x->n += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        x->h = mix(x->h, w);
    }
    for (; i < n; i++, x->n++) x->tail |= (uint64_t)p[i] << (8 * (x->n % 8));
}

uint64_t da_slot_hash_end(const da_slot_hasher *x) {
    uint64_t h = x->n % 8 ? mix(x->h, x->tail) : x->h;
    h = mix(h, x->n);
    h ^= h >> 33; /* the finalizer of MurmurHash3: every input bit reaches every output bit */
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

uint64_t da_engine_fingerprint(const da_engine *e) {
    da_slot_hasher h = {0, 0, 0};
    for (int i = 0; i < DA_CONFIG_N_FIELDS; i++) {
        const da_field *f = &da_config_fields[i];
        if (!f->stored) continue;
        const size_t size = f->type == DA_FIELD_LONG || f->type == DA_FIELD_U64 ? 8 : 4;
        da_slot_hash_add(&h, f->key, strlen(f->key) + 1);
        da_slot_hash_add(&h, (const char *)&e->cfg + f->offset, size);
    }
    for (int i = 0; i < e->n_tensors; i++) {
        const da_qtensor *t = &e->t[i];
        const int32_t shape[3] = {t->type, t->rows, t->cols};
        da_slot_hash_add(&h, t->name, strlen(t->name) + 1);
        da_slot_hash_add(&h, shape, sizeof shape);
        if (t->data) da_slot_hash_add(&h, t->data, (size_t)t->rows * t->row_bytes);
    }
    return da_slot_hash_end(&h);
}

static uint32_t kv_type_of(const da_session *s) {
    return s->own ? DA_SLOT_KV_OWN : s->o.kv_int8 ? DA_SLOT_KV_Q8 : s->o.kv_f16 ? DA_SLOT_KV_F16 : DA_SLOT_KV_F32;
}

static const char *kv_name(uint32_t t) {
    static const char *const names[] = {"f32", "f16", "q8 (int8, a scale per block)", "the attention variant's own (f32)"};
    return t < 4 ? names[t] : "unknown";
}

/* Cache rows per layer that n positions fill. */
static uint32_t rows_for(const da_session *s, uint64_t n) {
    return (uint32_t)(s->ring && n > (uint64_t)s->slots ? (uint64_t)s->slots : n);
}

/* Calls f on each run of s's cache that holds its first n_rows rows, in the file's order: per layer, the keys
 * then the values; f32 and f16 by head block (n_rows * head_dim values each), q8 the int8 rows then their
 * scales; a variant's own cache whole. Stops at f's first non-zero answer and returns it. */
static int each_piece(const da_session *s, uint32_t n_rows, int (*f)(void *ctx, unsigned char *p, size_t n), void *ctx) {
    const size_t L = (size_t)s->cfg.n_layers, T = (size_t)s->slots, Ckv = (size_t)s->Ckv, d = (size_t)s->d;
    int r = 0;
    for (size_t l = 0; l < L && !r; l++) {
        if (s->own) {
            r = f(ctx, (unsigned char *)(s->own + l * s->own_floats), s->own_floats * sizeof(float));
            continue;
        }
        for (int which = 0; which < 2 && !r; which++) {
            if (s->o.kv_int8) {
                int8_t *q = (which ? s->v8 : s->k8) + l * T * Ckv;
                float *sc = (which ? s->vs : s->ks) + l * T * (size_t)s->nkb;
                r = f(ctx, (unsigned char *)q, (size_t)n_rows * Ckv);
                if (!r) r = f(ctx, (unsigned char *)sc, (size_t)n_rows * s->nkb * sizeof(float));
                continue;
            }
            for (size_t h = 0; h < Ckv / d && !r; h++) {
                const size_t at = ((l * (Ckv / d) + h) * T) * d;
                if (s->o.kv_f16) r = f(ctx, (unsigned char *)((which ? s->vh : s->kh) + at), (size_t)n_rows * d * 2);
                else r = f(ctx, (unsigned char *)((which ? s->vf : s->kf) + at), (size_t)n_rows * d * sizeof(float));
            }
        }
    }
    return r;
}

static int add_bytes(void *ctx, unsigned char *p, size_t n) {
    (void)p;
    *(uint64_t *)ctx += n;
    return 0;
}

static uint64_t kv_bytes_for(const da_session *s, uint32_t n_rows) {
    uint64_t n = 0;
    each_piece(s, n_rows, add_bytes, &n);
    return n;
}

da_slot_header da_slot_header_of(const da_session *s, uint64_t fingerprint) {
    da_slot_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, DA_SLOT_MAGIC, 8);
    h.version = DA_SLOT_VERSION;
    h.header_bytes = sizeof h;
    h.fingerprint = fingerprint;
    h.kv_type = kv_type_of(s);
    h.n_layers = (uint32_t)s->cfg.n_layers;
    h.kv_cols = s->own ? 0 : (uint32_t)s->Ckv;
    h.head_dim = s->own ? 0 : (uint32_t)s->d;
    h.scale_block = s->o.kv_int8 && !s->own ? (uint32_t)s->kb : 0;
    h.ring_rows = s->ring ? (uint32_t)s->slots : 0;
    h.n_tokens = (uint32_t)s->len;
    h.n_rows = s->own ? 0 : rows_for(s, (uint64_t)s->len);
    h.own_floats = s->own ? (uint64_t)s->own_floats : 0;
    h.kv_bytes = kv_bytes_for(s, h.n_rows);
    return h;
}

uint64_t da_slot_file_max_bytes(const da_session *s) {
    const uint64_t n = (uint64_t)s->max_T;
    return sizeof(da_slot_header) + 4 * n + kv_bytes_for(s, s->own ? 0 : rows_for(s, n));
}

static int hash_piece(void *ctx, unsigned char *p, size_t n) {
    da_slot_hash_add(ctx, p, n);
    return 0;
}

static int write_piece(void *ctx, unsigned char *p, size_t n) { return fwrite(p, 1, n, (FILE *)ctx) != n; }

/* The tokens as int32 (the file's type), in blocks. */
static int write_tokens(FILE *fp, const int *tokens, int n, da_slot_hasher *hash) {
    int32_t buf[1024];
    for (int i = 0; i < n; i += 1024) {
        const int k = n - i < 1024 ? n - i : 1024;
        for (int j = 0; j < k; j++) buf[j] = (int32_t)tokens[i + j];
        if (hash) da_slot_hash_add(hash, buf, (size_t)k * 4);
        if (fp && fwrite(buf, 4, (size_t)k, fp) != (size_t)k) return 1;
    }
    return 0;
}

da_status da_slot_file_write(const char *path, const da_session *s, const int *tokens, int n, uint64_t fingerprint,
                             size_t *n_bytes) {
    if (n_bytes) *n_bytes = 0;
    if (n != s->len)
        return da_errorf("%s: %d tokens given for a cache of %d positions; nothing written", path, n, s->len);
    da_slot_header h = da_slot_header_of(s, fingerprint);
    da_slot_hasher sum = {0, 0, 0};
    write_tokens(NULL, tokens, n, &sum);
    each_piece(s, h.n_rows, hash_piece, &sum);
    h.checksum = da_slot_hash_end(&sum);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    int bad = fwrite(&h, sizeof h, 1, af.fp) != 1 || write_tokens(af.fp, tokens, n, NULL) ||
              each_piece(s, h.n_rows, write_piece, af.fp);
    if (bad) return da_atomic_fail(&af, errno);
    st = da_atomic_commit(&af);
    if (!st.code && n_bytes) *n_bytes = sizeof h + 4 * (size_t)n + (size_t)h.kv_bytes;
    return st;
}

/* The first field of the layout where the file's header and s's differ, in msg; 0 when none. */
static int layout_differs(const da_slot_header *f, const da_slot_header *want, char *msg, size_t cap) {
    const struct {
        const char *name;
        uint64_t got, want;
    } fields[] = {
        {"n_layers", f->n_layers, want->n_layers},       {"kv_cols", f->kv_cols, want->kv_cols},
        {"head_dim", f->head_dim, want->head_dim},       {"scale_block", f->scale_block, want->scale_block},
        {"ring_rows", f->ring_rows, want->ring_rows},     {"own_floats", f->own_floats, want->own_floats},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].got != fields[i].want) {
            snprintf(msg, cap, "%s %" PRIu64 ", this slot's is %" PRIu64, fields[i].name, fields[i].got, fields[i].want);
            return 1;
        }
    return 0;
}

/* Checks the header f of a file of n bytes against s (the session it would go into). */
static da_status check_header(const char *name, const da_slot_header *f, uint64_t n, const da_session *s,
                              uint64_t fingerprint) {
    if (memcmp(f->magic, DA_SLOT_MAGIC, 8)) return da_errorf("%s: not a slot file (its first 8 bytes are not \"%s\")", name, DA_SLOT_MAGIC);
    if (f->version != DA_SLOT_VERSION)
        return da_errorf("%s: slot file version %u; this build reads version %d", name, f->version, DA_SLOT_VERSION);
    if (f->header_bytes != sizeof *f)
        return da_errorf("%s: header_bytes %u, expected %zu for version %d", name, f->header_bytes, sizeof *f, DA_SLOT_VERSION);
    if (f->fingerprint != fingerprint)
        return da_errorf("%s: saved from another model (fingerprint %016" PRIx64 ", this model's is %016" PRIx64
                         "); a slot restores only into the model that saved it",
                         name, f->fingerprint, fingerprint);
    const da_slot_header want = da_slot_header_of(s, fingerprint);
    if (f->kv_type != want.kv_type)
        return da_errorf("%s: holds a %s KV cache; this slot's cache is %s", name, kv_name(f->kv_type), kv_name(want.kv_type));
    char what[160];
    if (layout_differs(f, &want, what, sizeof what)) return da_errorf("%s: cache layout differs: %s", name, what);
    if (f->n_tokens > INT_MAX || (!s->ring && f->n_tokens > (uint64_t)s->max_T))
        return da_errorf("%s: holds %u positions; this slot holds at most %d (--ctx)", name, f->n_tokens, s->max_T);
    const uint32_t rows = s->own ? 0 : rows_for(s, f->n_tokens);
    if (f->n_rows != rows)
        return da_errorf("%s: n_rows %u, expected %u for %u positions", name, f->n_rows, rows, f->n_tokens);
    const uint64_t kv = kv_bytes_for(s, rows);
    if (f->kv_bytes != kv)
        return da_errorf("%s: kv_bytes %" PRIu64 ", expected %" PRIu64 " for %u cache rows", name, f->kv_bytes, kv, rows);
    if (f->reserved[0] || f->reserved[1]) return da_errorf("%s: the reserved header fields are not 0", name);
    const uint64_t size = sizeof *f + 4 * (uint64_t)f->n_tokens + kv;
    if (n < size)
        return da_errorf("%s: truncated: %" PRIu64 " bytes, the header says %" PRIu64 " (%u tokens and their K/V)", name,
                         n, size, f->n_tokens);
    if (n > size) return da_errorf("%s: %" PRIu64 " bytes past the end the header gives (%" PRIu64 ")", name, n - size, size);
    return da_ok();
}

typedef struct {
    const uint8_t *from;
} copy_ctx;

static int copy_piece(void *ctx, unsigned char *p, size_t n) {
    copy_ctx *c = ctx;
    memcpy(p, c->from, n);
    c->from += n;
    return 0;
}

da_status da_slot_file_parse(const char *name, const uint8_t *data, size_t n, da_session *s, uint64_t fingerprint,
                             int **tokens, int *n_tokens) {
    *tokens = NULL;
    *n_tokens = 0;
    da_slot_header f;
    if (n < sizeof f)
        return da_errorf("%s: truncated: %zu bytes, shorter than the %zu-byte header of a slot file", name, n, sizeof f);
    memcpy(&f, data, sizeof f);
    da_status st = check_header(name, &f, n, s, fingerprint);
    if (st.code) return st;
    const uint8_t *tok = data + sizeof f, *kv = tok + 4 * (size_t)f.n_tokens;
    da_slot_hasher x = {0, 0, 0};
    da_slot_hash_add(&x, tok, n - sizeof f);
    const uint64_t sum = da_slot_hash_end(&x);
    if (sum != f.checksum)
        return da_errorf("%s: checksum %016" PRIx64 " does not match its contents (%016" PRIx64 "); the file is damaged",
                         name, f.checksum, sum);
    int *ids = malloc((f.n_tokens ? f.n_tokens : 1) * sizeof *ids);
    if (!ids) return da_errorf("%s: out of memory for %u tokens", name, f.n_tokens);
    for (uint32_t i = 0; i < f.n_tokens; i++) {
        int32_t v;
        memcpy(&v, tok + 4 * (size_t)i, 4);
        if (v < 0 || v >= s->cfg.vocab_size) {
            free(ids);
            return da_errorf("%s: token %d at position %u is outside the vocabulary (%d tokens)", name, (int)v, i,
                             s->cfg.vocab_size);
        }
        ids[i] = v;
    }
    copy_ctx c = {kv};
    each_piece(s, f.n_rows, copy_piece, &c);
    s->len = (int)f.n_tokens;
    *tokens = ids;
    *n_tokens = (int)f.n_tokens;
    return da_ok();
}
