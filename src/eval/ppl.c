/* Quantized-vs-base perplexity and KL divergence (see ppl.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eval/ppl.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "infer/engine.h"

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
    FILE *fp = fopen(path, "rb");
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
    da_session *qs = NULL, *bs = NULL;
    int *tok = malloc((size_t)n_ctx * sizeof(int));
    double *lp = malloc(2 * (size_t)V * sizeof(double)), *lq = lp ? lp + V : NULL;
    da_status st = tok && lp ? da_ok() : da_errorf("out of memory");
    da_session_opts qo = c->run, bo = da_session_opts_default();
    qo.max_T = bo.max_T = n_ctx;
    bo.act = DA_ACTQ_F32;
    if (!st.code) st = da_session_create(&qs, q, &qo);
    if (!st.code) st = da_session_create(&bs, base, &bo);
    double nll = 0, base_nll = 0, kld = 0;
    long same = 0, scored = 0;
    const int first = n_ctx / 2, rows = n_ctx - 1 - first;
    ppl_cache_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "DAPL", 4);
    h.n_ctx = n_ctx;
    h.vocab = V;
    h.rows = rows;
    h.chunks = chunks;
    h.base_bytes = c->base_file_bytes;
    const size_t n_cache = (size_t)chunks * rows * V;
    float *cache = c->base_cache && !st.code ? malloc(n_cache * sizeof(float)) : NULL;
    const int cached = cache && !cache_read(c->base_cache, &h, cache, n_cache);
    for (long ch = 0; ch < chunks && !st.code; ch++) {
        val_tokens(data, (size_t)ch * n_ctx, n_ctx, tok);
        const float *ql;
        da_session_reset(qs);
        if ((st = da_session_feed(qs, tok, n_ctx, 1, &ql)).code) break;
        float *crow = cache ? cache + (size_t)ch * rows * V : NULL;
        const float *bl;
        if (cached) {
            bl = crow - (size_t)first * V; /* row j of the chunk is crow[j - first] */
        } else {
            da_session_reset(bs);
            if ((st = da_session_feed(bs, tok, n_ctx, 1, &bl)).code) break;
            if (crow) memcpy(crow, bl + (size_t)first * V, (size_t)rows * V * sizeof(float));
        }
        const size_t n_scored = (size_t)rows * V, bad_q = da_first_nonfinite(ql + (size_t)first * V, n_scored),
                     bad_b = da_first_nonfinite(bl + (size_t)first * V, n_scored);
        if (bad_q < n_scored || bad_b < n_scored) {
            st = da_errorf("eval ppl: chunk %ld, position %zu: the %s model's logits are not finite", ch,
                           first + (bad_q < n_scored ? bad_q : bad_b) / (size_t)V, bad_q < n_scored ? "quantized" : "base");
            break;
        }
        for (int j = first; j < n_ctx - 1; j++) {
            const float *pb = bl + (size_t)j * V, *pq = ql + (size_t)j * V;
            log_softmax(lp, pb, V);
            log_softmax(lq, pq, V);
            const int next = tok[j + 1];
            base_nll -= lp[next];
            nll -= lq[next];
            double k = 0.0;
            for (int i = 0; i < V; i++) k += exp(lp[i]) * (lp[i] - lq[i]);
            kld += k;
            same += argmax(pb, V) == argmax(pq, V);
            scored++;
        }
    }
    if (!st.code && cache && !cached) cache_write(c->base_cache, &h, cache, n_cache);
    free(cache);
    if (!st.code) {
        r->chunks = chunks;
        r->scored = scored;
        r->ppl = exp(nll / scored);
        r->base_ppl = exp(base_nll / scored);
        r->delta_ppl_pct = 100.0 * (r->ppl / r->base_ppl - 1.0);
        r->kld = kld / scored;
        r->same_top1 = (double)same / scored;
        r->act = da_session_act(qs);
    }
    da_session_free(bs);
    da_session_free(qs);
    free(tok);
    free(lp);
    return st;
}
