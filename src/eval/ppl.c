/* Quantized-vs-base perplexity and KL divergence (see ppl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/ppl.h"
#include "io/atomic_file.h"
#include "infer/engine.h"
#include "ops/finite.h"
#include "train/window_loss.h"
#include "diffattn/formats.h"

/* tokens: (n) = validation tokens [start, start + n), across spans. */
static void val_tokens(const da_text_data *d, size_t start, int n, int *tokens) {
    size_t skip = start;
    int got = 0;
    for (int s = d->n_train_spans; s < d->n_train_spans + d->n_val_spans && got < n; s++) {
        const da_token_span *sp = &d->spans[s];
        if (skip >= sp->n) {
            skip -= sp->n;
            continue;
        }
        for (size_t i = skip; i < sp->n && got < n; i++) tokens[got++] = (int)sp->tok[i];
        skip = 0;
    }
}

/* log-softmax of x: (V) into out. */
static void log_softmax(double *out, const float *x, int V) {
    float mx = x[0];
    for (int i = 1; i < V; i++) mx = x[i] > mx ? x[i] : mx;
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp((double)x[i] - mx);
    const double lse = mx + log(sum);
    for (int i = 0; i < V; i++) out[i] = (double)x[i] - lse;
}

static int argmax(const float *x, int V) {
    int b = 0;
    for (int i = 1; i < V; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The cache: header {"DAPL", n_ctx, chunks, V, rows per chunk, base bytes}, then the rows. */
typedef struct {
    char magic[4];
    int32_t n_ctx, vocab, rows;
    int64_t chunks, base_bytes;
} ppl_cache_header;
_Static_assert(sizeof(ppl_cache_header) == 32, "ppl_cache_header layout changed");

static int cache_read(const char *path, const ppl_cache_header *want, float *rows, size_t n) {
    FILE *fp = da_fopen_regular(path, NULL);
    if (!fp) return -1;
    ppl_cache_header h;
    int ok = fread(&h, sizeof h, 1, fp) == 1 && !memcmp(&h, want, sizeof h) && fread(rows, sizeof(float), n, fp) == n;
    fclose(fp);
    return ok ? 0 : -1;
}

static void cache_write(const char *path, const ppl_cache_header *h, const float *rows, size_t n) {
    da_atomic_file af;
    if (da_atomic_open(&af, path).code) return; /* a cache that cannot be written only costs time */
    if (fwrite(h, sizeof *h, 1, af.fp) == 1 && fwrite(rows, sizeof(float), n, af.fp) == n) (void)da_atomic_commit(&af);
    else da_atomic_abort(&af);
}

/* The chunks of the validation split as windows: chunk w's tokens, each position of its second half scored on
 * the next token (the first half is context), the last position not. */
typedef struct {
    const da_text_data *data;
    int first;
} ppl_chunks;

static void chunk_fill(void *ctx, long w, long n, int T, int *tokens, int *targets) {
    (void)n;
    const ppl_chunks *c = ctx;
    val_tokens(c->data, (size_t)w * T, T, tokens);
    for (int j = 0; j < T; j++) targets[j] = j >= c->first && j < T - 1 ? tokens[j + 1] : -1;
}

/* The quantized model against the base one, chunk by chunk: the quantized model's loss is the window loss; the
 * base model's, the KL divergence and the top-1 agreement accumulate here. */
typedef struct {
    da_session *qs, *bs;
    int V, first, cached;
    float *cache;
    double *lp, *lq;
    double base_nll, kld;
    long same, scored;
} ppl_scorer;

static da_status ppl_score(void *ctx, long ch, const int *tok, const int *targets, int b, int n_ctx, double *nll,
                           double *sum, double *count) {
    (void)b;
    ppl_scorer *p = ctx;
    const int V = p->V, first = p->first, rows = n_ctx - 1 - first;
    const float *ql, *bl;
    da_status st;
    da_session_reset(p->qs);
    if ((st = da_session_feed(p->qs, tok, n_ctx, 1, &ql)).code) return st;
    float *crow = p->cache ? p->cache + (size_t)ch * rows * V : NULL;
    if (p->cached) {
        bl = crow - (size_t)first * V; /* row j of the chunk is crow[j - first] */
    } else {
        da_session_reset(p->bs);
        if ((st = da_session_feed(p->bs, tok, n_ctx, 1, &bl)).code) return st;
        if (crow) memcpy(crow, bl + (size_t)first * V, (size_t)rows * V * sizeof(float));
    }
    const size_t n_scored = (size_t)rows * V, bad_q = da_first_nonfinite(ql + (size_t)first * V, n_scored),
                 bad_b = da_first_nonfinite(bl + (size_t)first * V, n_scored);
    if (bad_q < n_scored || bad_b < n_scored)
        return da_errorf("eval ppl: chunk %ld, position %zu: the %s model's logits are not finite", ch,
                         first + (bad_q < n_scored ? bad_q : bad_b) / (size_t)V, bad_q < n_scored ? "quantized" : "base");
    for (int j = 0; j < n_ctx; j++) nll[j] = 0.0;
    for (int j = first; j < n_ctx - 1; j++) {
        const float *pb = bl + (size_t)j * V, *pq = ql + (size_t)j * V;
        log_softmax(p->lp, pb, V);
        log_softmax(p->lq, pq, V);
        const int next = targets[j];
        p->base_nll -= p->lp[next];
        *sum -= p->lq[next];
        nll[j] = -p->lq[next];
        double k = 0.0;
        for (int i = 0; i < V; i++) k += exp(p->lp[i]) * (p->lp[i] - p->lq[i]);
        p->kld += k;
        p->same += argmax(pb, V) == argmax(pq, V);
        p->scored++;
        *count += 1;
    }
    return da_ok();
}

da_status da_eval_ppl(const da_engine *q, const da_engine *base, const da_text_data *data, const da_ppl_config *c,
                      da_ppl_result *r) {
    memset(r, 0, sizeof *r);
    const da_config *qc = &q->cfg, *bc = &base->cfg;
    if (qc->vocab_size != bc->vocab_size || qc->arch != bc->arch || qc->dim != bc->dim || qc->n_layers != bc->n_layers)
        return da_errorf("--model (%s, dim %d, %d layers, vocab %d) and --base (%s, dim %d, %d layers, vocab %d) are "
                         "not the same model; pass the safetensors the GGUF was quantized from",
                         da_arch_name(qc->arch), qc->dim, qc->n_layers, qc->vocab_size, da_arch_name(bc->arch),
                         bc->dim, bc->n_layers, bc->vocab_size);
    const int n_ctx = c->n_ctx ? c->n_ctx : qc->max_seq_len, V = qc->vocab_size;
    if (n_ctx < 4 || n_ctx > qc->max_seq_len || n_ctx > bc->max_seq_len)
        return da_errorf("--ctx %d is out of range (4..max_seq_len=%d)", n_ctx, qc->max_seq_len);
    if (data->vocab_size > V)
        return da_errorf("the data's vocabulary (%d) is larger than the model's (%d)", data->vocab_size, V);
    long chunks = (long)(data->n_val / (size_t)n_ctx);
    if (c->max_chunks > 0 && chunks > c->max_chunks) chunks = c->max_chunks;
    if (chunks < 1)
        return da_errorf("the validation split holds %zu tokens, fewer than one chunk of %d", data->n_val, n_ctx);
    ppl_scorer p = {.V = V, .first = n_ctx / 2};
    p.lp = malloc(2 * (size_t)V * sizeof(double));
    p.lq = p.lp ? p.lp + V : NULL;
    da_status st = p.lp ? da_ok() : da_errorf("out of memory");
    da_session_opts qo = c->run, bo = da_session_opts_default();
    qo.max_T = bo.max_T = n_ctx;
    bo.act = DA_ACTQ_F32;
    if (!st.code) st = da_session_create(&p.qs, q, &qo);
    if (!st.code) st = da_session_create(&p.bs, base, &bo);
    const int rows = n_ctx - 1 - p.first;
    ppl_cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "DAPL", 4);
    h.n_ctx = n_ctx;
    h.vocab = V;
    h.rows = rows;
    h.chunks = chunks;
    h.base_bytes = c->base_file_bytes;
    const size_t n_cache = (size_t)chunks * rows * V;
    p.cache = c->base_cache && !st.code ? malloc(n_cache * sizeof(float)) : NULL;
    p.cached = p.cache && !cache_read(c->base_cache, &h, p.cache, n_cache);
    ppl_chunks set_ctx = {data, p.first};
    const da_window_set set = {&set_ctx, chunk_fill};
    const da_window_scorer sc = {&p, ppl_score};
    double loss = 0.0;
    if (!st.code) st = da_window_loss(&set, chunks, n_ctx, 1, &sc, NULL, &loss);
    if (!st.code && p.cache && !p.cached) cache_write(c->base_cache, &h, p.cache, n_cache);
    free(p.cache);
    if (!st.code) {
        r->chunks = chunks;
        r->scored = p.scored;
        r->ppl = exp(loss);
        r->base_ppl = exp(p.base_nll / p.scored);
        r->delta_ppl_pct = 100.0 * (r->ppl / r->base_ppl - 1.0);
        r->kld = p.kld / p.scored;
        r->same_top1 = (double)p.same / p.scored;
        r->act = da_session_act(p.qs);
    }
    da_session_free(p.bs);
    da_session_free(p.qs);
    free(p.lp);
    return st;
}
