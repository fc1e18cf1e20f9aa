/* The scheduler: jobs from the queue into free slots; then, round after
 * round, one chunk of one slot's prompt and one batched decoding step of
 * every slot that is generating. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/finite.h"
#include "serve/server.h"

double srv_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void srv_job_release(srv *S, srv_job *j) {
    (void)S;
    if (--j->refs > 0) return;
    free(j->ids);
    for (int i = 0; i < j->n_stop; i++) free(j->stop[i]);
    free(j->out);
    free(j->lp);
    free(j->top_id);
    free(j->top_lp);
    free(j->text);
    da_json_schema_free(j->schema);
    free(j);
}

void srv_log_softmax(const float *logits, int V, float *lsm) {
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    for (int i = 0; i < V; i++) lsm[i] = (float)((double)logits[i] - lse);
}

void srv_top(const float *lsm, int V, int n, int *ids, float *lps) {
    int k = 0;
    for (int i = 0; i < V; i++) {
        if (k == n && (n == 0 || lsm[i] <= lps[n - 1])) continue;
        int at = k < n ? k++ : n - 1; /* insertion: the list stays sorted, lower ids first among ties */
        while (at > 0 && lps[at - 1] < lsm[i]) {
            ids[at] = ids[at - 1], lps[at] = lps[at - 1];
            at--;
        }
        ids[at] = i, lps[at] = lsm[i];
    }
}

/* Bytes at the end of t[0..n) that begin a UTF-8 character not yet complete. */
static size_t utf8_partial(const char *t, size_t n) {
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const unsigned char c = (unsigned char)t[n - back];
        if ((c & 0xC0) == 0x80) continue; /* a continuation byte */
        const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

static int append_text(srv_job *j, const uint8_t *b, size_t n) {
    if (j->n_text + n + 1 > j->cap_text) {
        size_t cap = (j->n_text + n + 1) * 2;
        char *p = realloc(j->text, cap);
        if (!p) return -1;
        j->text = p, j->cap_text = cap;
    }
    memcpy(j->text + j->n_text, b, n);
    j->n_text += n;
    j->text[j->n_text] = 0;
    return 0;
}

/* Ends the job at a stop string that the new bytes (from `from`) complete; sets what may be streamed. */
static void cut_at_stop(srv_job *j, size_t from) {
    size_t longest = 0;
    for (int s = 0; s < j->n_stop; s++) {
        const size_t k = j->stop_len[s];
        longest = k > longest ? k : longest;
        const size_t start = from >= k - 1 ? from - (k - 1) : 0;
        for (size_t i = start; i + k <= j->n_text; i++)
            if (!memcmp(j->text + i, j->stop[s], k)) {
                j->n_text = i;
                j->text[i] = 0;
                j->done = 1;
                j->finish_length = 0;
                break;
            }
    }
    size_t safe = j->n_text;
    if (!j->done) {
        safe = longest > 1 && safe >= longest - 1 ? safe - (longest - 1) : longest > 1 ? 0 : safe;
        safe -= utf8_partial(j->text, safe);
    }
    if (safe > j->n_safe) j->n_safe = safe;
}

/* What the slot's session holds after j: its prompt, then what it generated, as far as the cache goes (nothing
 * after an error, when the cache may hold a chunk half fed). */
static void keep_cache(srv_slot *sl, const srv_job *j) {
    int n = j->err.code ? 0 : da_session_len(sl->s);
    if (n > j->n_ids + j->n_out) n = 0; /* never: the cache holds only what was fed */
    if (n > sl->cap_cached) {
        int *p = realloc(sl->cached, (size_t)n * sizeof *p);
        if (!p) n = 0;
        else sl->cached = p, sl->cap_cached = n;
    }
    const int from_prompt = n < j->n_ids ? n : j->n_ids;
    if (n) memcpy(sl->cached, j->ids, (size_t)from_prompt * sizeof *j->ids);
    if (n > from_prompt) memcpy(sl->cached + from_prompt, j->out, (size_t)(n - from_prompt) * sizeof *j->out);
    sl->n_cached = n;
}

/* Ends the job: the slot is free for the next. Under mu. */
static void finish_slot(srv *S, srv_slot *sl) {
    srv_job *j = sl->job;
    keep_cache(sl, j);
    /* with others waiting, the request that continues this one (a chat's next turn, sent when this answer
     * arrives) would find the slot taken and its cache gone; it gets a moment to come */
    sl->hold_until = S->queued && sl->n_cached && j->cache_prompt ? srv_now() + S->o.cache_hold_ms * 1e-3 : 0;
    sl->hold_for = j->n_ids < sl->n_cached ? j->n_ids : sl->n_cached;
    j->done = 1;
    j->n_safe = j->n_text;
    sl->job = NULL;
    S->busy--;
    srv_job_release(S, j);
    pthread_cond_broadcast(&S->out_cv);
}

static int is_eos(const srv *S, int tok) {
    for (int i = 0; i < S->n_eos; i++)
        if (S->eos[i] == tok) return 1;
    return 0;
}

/* The token mask over the vocabulary's bytes, made once: a byte model's tokens 0..255 are bytes, a tokenizer's
 * its decoded bytes; special tokens (but the end tokens) are never allowed. */
static const char *make_mask(srv *S) {
    uint8_t **bytes = calloc((size_t)S->V, sizeof *bytes);
    int *len = calloc((size_t)S->V, sizeof *len);
    const char *why = bytes && len ? NULL : "out of memory";
    for (int i = 0; i < S->V && !why; i++) {
        size_t n = 0, cap = 0;
        if (S->tok) {
            if (da_tokenizer_decode(S->tok, &i, 1, &bytes[i], &n, &cap).code || !bytes[i]) n = 0;
            char *text = n ? malloc(n + 1) : NULL;
            if (text) {
                memcpy(text, bytes[i], n);
                text[n] = 0;
                if (da_tokenizer_special_id(S->tok, text) == i) n = 0;
                free(text);
            }
        } else if (i < 256 && (bytes[i] = malloc(1))) {
            bytes[i][0] = (uint8_t)i, n = 1;
        }
        len[i] = (int)n;
    }
    if (!why && da_token_mask_build(&S->mask, (const uint8_t *const *)bytes, len, S->V, S->eos, S->n_eos).code)
        why = "out of memory";
    for (int i = 0; bytes && i < S->V; i++) free(bytes[i]);
    free(bytes);
    free(len);
    if (!why && (!(S->allowed = malloc((size_t)S->V)) || !(S->masked = malloc((size_t)S->V * sizeof(float)))))
        why = "out of memory";
    return why;
}

/* logits with every token the schema does not allow next at -inf (in S->masked); NULL (and *why) when none is
 * allowed. The budget: the answer must be whole within the tokens left. */
static const float *constrained_logits(srv *S, srv_job *j, const float *logits, const char **why) {
    if (!S->mask && (*why = make_mask(S))) return NULL;
    const int left = j->max_new - j->n_out;
    int n = da_token_mask_allowed(S->mask, j->schema, &j->json, left, S->allowed);
    if (j->ignore_eos && n > 1) /* an end token only where nothing else fits */
        for (int i = 0; i < S->n_eos; i++) n -= S->allowed[S->eos[i]], S->allowed[S->eos[i]] = 0;
    if (n <= 0) {
        *why = "no token of the vocabulary continues the answer within the schema";
        return NULL;
    }
    for (int i = 0; i < S->V; i++) S->masked[i] = S->allowed[i] ? logits[i] : -INFINITY;
    return S->masked;
}

/* The next token of sl's job from logits (V): its log-probabilities when
 * asked, the sample, and the text it adds. */
static void take_token(srv *S, srv_slot *sl, const float *logits) {
    srv_job *j = sl->job;
    const size_t bad = da_first_nonfinite(logits, (size_t)S->V);
    const int pos = j->n_ids + j->n_out;
    if (bad < (size_t)S->V) {
        pthread_mutex_lock(&S->mu);
        j->err = da_errorf("the model's logits hold %g at token %zu; nothing to sample from", (double)logits[bad], bad);
        finish_slot(S, sl);
        pthread_mutex_unlock(&S->mu);
        return;
    }
    const char *why = NULL;
    const float *pick_from = j->schema ? constrained_logits(S, j, logits, &why) : logits;
    if (!pick_from) {
        pthread_mutex_lock(&S->mu);
        j->err = da_errorf("structured output: %s", why);
        finish_slot(S, sl);
        pthread_mutex_unlock(&S->mu);
        return;
    }
    const int tok = da_sample_token(pick_from, S->V, j->temperature, j->top_p, &sl->rng, S->scratch);
    if (tok < 0 || tok >= S->V) { /* this job alone fails: the batch's other slots go on */
        pthread_mutex_lock(&S->mu);
        j->err = da_errorf("sampling gave token %d, outside the vocabulary of %d (temperature %g, top_p %g)", tok, S->V,
                           (double)j->temperature, (double)j->top_p);
        finish_slot(S, sl);
        pthread_mutex_unlock(&S->mu);
        return;
    }
    if (j->top_n >= 0) {
        srv_log_softmax(logits, S->V, S->lsm);
        j->lp[pos] = S->lsm[tok];
        srv_top(S->lsm, S->V, j->top_n, j->top_id + (size_t)pos * j->top_n, j->top_lp + (size_t)pos * j->top_n);
    }
    size_t nb = 0;
    if (S->tok) {
        if (da_tokenizer_decode(S->tok, &tok, 1, &S->text, &nb, &S->text_cap).code) nb = 0;
    } else if (tok < 256) {
        if (!S->text_cap && (S->text = malloc(16))) S->text_cap = 16;
        nb = S->text_cap ? (S->text[0] = (uint8_t)tok, 1) : 0;
    }
    const uint8_t *bytes = S->text;
    /* the mask allowed only tokens that keep the text a prefix of a valid answer; once it is whole and nothing
     * can extend it, the answer ends here */
    const int json_closed = j->schema && !is_eos(S, tok) && da_json_feed_bytes(j->schema, &j->json, bytes, nb) &&
                            da_json_closed(j->schema, &j->json);
    pthread_mutex_lock(&S->mu);
    S->tokens_out++;
    if (is_eos(S, tok) && (!j->ignore_eos || j->schema)) {
        j->finish_length = 0;
        finish_slot(S, sl);
    } else {
        const size_t from = j->n_text;
        j->out[j->n_out++] = tok;
        if (append_text(j, bytes, nb)) j->err = da_errorf("out of memory");
        cut_at_stop(j, from);
        if (json_closed) j->done = 1;
        j->finish_length = !j->done;
        if (j->done || j->n_out >= j->max_new || j->err.code) finish_slot(S, sl);
        /* Only a stream waits on each token; a waiter woken for nothing takes a core from the decoding threads
         * and stalls their next barrier. A stream counted after this checks n_safe before it waits. */
        else if (S->streams > 0) pthread_cond_broadcast(&S->out_cv);
    }
    pthread_mutex_unlock(&S->mu);
    sl->last = tok;
}

/* Prompt log-probabilities of positions 1.. from the rows of a chunk fed at fed0. */
static void prompt_logprobs(srv *S, srv_job *j, int fed0, int n, const float *logits) {
    for (int r = 0; r < n; r++) {
        const int p = fed0 + r + 1; /* the token row r predicts */
        if (p >= j->n_ids) break;
        srv_log_softmax(logits + (size_t)r * S->V, S->V, S->lsm);
        j->lp[p] = S->lsm[j->ids[p]];
        srv_top(S->lsm, S->V, j->top_n, j->top_id + (size_t)p * j->top_n, j->top_lp + (size_t)p * j->top_n);
    }
}

/* One chunk of sl's prompt; after the last, the first token. */
static void prefill(srv *S, srv_slot *sl) {
    srv_job *j = sl->job;
    const int fed0 = sl->fed, n = j->n_ids - fed0 < S->o.prefill_chunk ? j->n_ids - fed0 : S->o.prefill_chunk;
    const float *logits = NULL;
    da_status st = da_session_feed(sl->s, j->ids + fed0, n, j->prompt_lp, &logits);
    if (!st.code && j->prompt_lp) prompt_logprobs(S, j, fed0, n, logits);
    sl->fed += n;
    if (st.code || (sl->fed == j->n_ids && j->max_new == 0)) {
        pthread_mutex_lock(&S->mu);
        S->tokens_in += n;
        if (st.code) j->err = st;
        j->finish_length = 1;
        finish_slot(S, sl);
        pthread_mutex_unlock(&S->mu);
        return;
    }
    pthread_mutex_lock(&S->mu);
    S->tokens_in += n;
    pthread_mutex_unlock(&S->mu);
    if (sl->fed == j->n_ids) take_token(S, sl, j->prompt_lp ? logits + (size_t)(n - 1) * S->V : logits);
}

/* One decoding step of every slot past its prompt: one batched pass. */
static void decode(srv *S) {
    da_session *ss[64];
    srv_slot *which[64];
    int toks[64], n = 0;
    for (int i = 0; i < S->o.parallel; i++) {
        srv_slot *sl = &S->slots[i];
        if (sl->job && sl->fed == sl->job->n_ids && sl->job->n_out > 0) {
            ss[n] = sl->s, toks[n] = sl->last, which[n++] = sl;
        }
    }
    if (!n) return;
    const double t0 = srv_now();
    da_status st = da_session_decode_batch(S->work, ss, n, toks, S->logits);
    const double dt = srv_now() - t0;
    pthread_mutex_lock(&S->mu);
    S->decode_steps++;
    S->decode_tokens_per_s = dt > 0 ? n / dt : 0;
    if (st.code)
        for (int i = 0; i < n; i++) {
            which[i]->job->err = st;
            finish_slot(S, which[i]);
        }
    pthread_mutex_unlock(&S->mu);
    if (st.code) return;
    for (int i = 0; i < n; i++) take_token(S, which[i], S->logits + (size_t)i * S->V);
}

/* Under mu: takes the jobs off the queue that will never run: all of them once the server is stopping
 * (refused: their requests get 503 at once), else those whose client hung up. */
static void sweep_queue(srv *S) {
    srv_job **link = &S->queue_head, *last = NULL;
    int dropped = 0;
    while (*link) {
        srv_job *j = *link;
        if (!S->draining && !j->cancelled) {
            last = j;
            link = &j->next;
            continue;
        }
        *link = j->next;
        S->queued--;
        j->refused = S->draining && !j->cancelled;
        j->done = 1;
        srv_job_release(S, j);
        dropped = 1;
    }
    S->queue_tail = last;
    if (dropped) pthread_cond_broadcast(&S->out_cv);
}

/* The tokens a and b share from their start. */
static int common_prefix(const int *a, int na, const int *b, int nb) {
    int n = 0;
    while (n < na && n < nb && a[n] == b[n]) n++;
    return n;
}

/* The queue's head may be passed over by a later job with a longer cached start this many times per slot; after
 * that it takes the first free slot, held or not: no request waits forever. */
#define PASS_OVER_PER_SLOT 2
/* A later job passes the head only when its cached start is this many tokens longer than the head's: a few
 * tokens are not worth the head's wait. */
#define MIN_GAIN 16
/* Queued jobs looked at past the head, each against every free slot. */
#define SCAN 64

/* The tokens of j's prompt that sl's cache holds (none without cache_prompt). */
static int shared(const srv_slot *sl, const srv_job *j) {
    return j->cache_prompt ? common_prefix(sl->cached, sl->n_cached, j->ids, j->n_ids) : 0;
}

/* The longest start a queued job other than j shares with sl's cache: what taking sl for j costs the others. */
static int claim(const srv *S, const srv_slot *sl, const srv_job *j) {
    int most = 0, k = 0;
    for (const srv_job *q = S->queue_head; q && k <= SCAN; q = q->next, k++) {
        const int n = q == j ? 0 : shared(sl, q);
        most = n > most ? n : most;
    }
    return most;
}

/* Whether j may take sl now: free and not held by a slot operation; while it keeps its cache for the request
 * that continues its last one (hold_until), only that request may, or a head whose turn is owed (force). */
static int may_take(const srv_slot *sl, int n_shared, double now, int force) {
    if (sl->job || sl->held) return 0;
    return force || sl->hold_until <= now || (sl->hold_for > 0 && n_shared >= sl->hold_for);
}

/* The free slot for j, or NULL: the one whose cache shares the longest start with j's prompt; among ties (with
 * by_claim) the one whose cache fewer queued jobs need, then the least recently used (the cache least likely to
 * be asked for again). *n: the tokens shared. */
static srv_slot *best_slot(const srv *S, const srv_job *j, double now, int force, int by_claim, int *n) {
    srv_slot *best = NULL;
    int best_n = -1, best_claim = 0;
    for (int i = 0; i < S->o.parallel; i++) {
        srv_slot *sl = &S->slots[i];
        const int k = shared(sl, j);
        if (!may_take(sl, k, now, force)) continue;
        const int c = by_claim ? claim(S, sl, j) : 0;
        if (k > best_n || (k == best_n && (c < best_claim || (c == best_claim && sl->used < best->used))))
            best = sl, best_n = k, best_claim = c;
    }
    *n = best_n;
    return best;
}

/* The next job to start and its slot (NULL: none now). The head of the queue, unless a later job shares a start
 * longer by MIN_GAIN with a free slot's cache and the head has not been passed over its share of times. */
static srv_slot *choose(srv *S, srv_job **job) {
    const double now = srv_now();
    srv_job *head = S->queue_head;
    const int force = head->passed_over >= PASS_OVER_PER_SLOT * S->o.parallel;
    int head_n, n;
    srv_slot *pick = best_slot(S, head, now, force, 1, &head_n);
    *job = head;
    if (force) return pick;
    int best_n = pick ? head_n + MIN_GAIN - 1 : MIN_GAIN - 1, k = 0;
    for (srv_job *q = head->next; q && k < SCAN; q = q->next, k++) {
        srv_slot *sl = best_slot(S, q, now, 0, 0, &n);
        if (sl && n > best_n) pick = sl, best_n = n, *job = q;
    }
    return pick;
}

/* Under mu: takes j off the queue; the jobs before it were passed over. */
static void dequeue(srv *S, srv_job *j) {
    srv_job **link = &S->queue_head, *prev = NULL;
    while (*link != j) {
        (*link)->passed_over++;
        prev = *link;
        link = &(*link)->next;
    }
    *link = j->next;
    if (S->queue_tail == j) S->queue_tail = prev;
    S->queued--;
    if (prev) S->jobs_ahead++;
}

/* Keeps the cached start that j shares (all but its last token, whose logits give the first sample), or
 * empties the cache. Under mu. */
static void start_from_cache(srv *S, srv_slot *sl, const srv_job *j) {
    int keep = shared(sl, j);
    if (keep > j->n_ids - 1) keep = j->n_ids - 1;
    if (keep <= 0 || !da_session_truncate(sl->s, keep)) keep = 0, da_session_reset(sl->s);
    sl->fed = keep;
    sl->n_cached = keep;
    S->tokens_cached += keep;
}

/* Under mu: drops cancelled jobs, fills free slots from the queue. */
static void assign(srv *S) {
    sweep_queue(S);
    for (int i = 0; i < S->o.parallel; i++)
        if (S->slots[i].job && S->slots[i].job->cancelled) finish_slot(S, &S->slots[i]);
    srv_slot *sl;
    srv_job *j;
    while (S->queue_head && (sl = choose(S, &j))) {
        dequeue(S, j);
        sl->job = j;
        sl->hold_until = 0;
        j->started = 1;
        start_from_cache(S, sl, j);
        sl->used = ++S->slot_clock;
        da_rng_seed(&sl->rng, j->seed);
        S->busy++;
        pthread_cond_broadcast(&S->out_cv); /* a stream waits for its job to start before it answers */
    }
}

/* Seconds the idle scheduler may sleep: 0.1, or less when queued jobs wait for a held slot to expire. */
static double idle_wait(const srv *S) {
    double wait = 0.1;
    if (!S->queue_head) return wait;
    const double now = srv_now();
    for (int i = 0; i < S->o.parallel; i++) {
        const double left = S->slots[i].hold_until - now;
        if (!S->slots[i].job && left > 0 && left < wait) wait = left;
    }
    return wait > 1e-3 ? wait : 1e-3;
}

void srv_schedule(srv *S) {
    pthread_mutex_lock(&S->mu);
    for (;;) {
        if (S->o.stop && *S->o.stop && !S->draining) {
            S->draining = 1;
            fprintf(stderr, "serve: stopping: %d running, %d queued; the queued and new requests get 503\n", S->busy,
                    S->queued);
        }
        assign(S);
        if (!S->busy) {
            if (S->draining) break;
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_nsec += (long)(idle_wait(S) * 1e9);
            if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&S->work_cv, &S->mu, &t);
            continue;
        }
        pthread_mutex_unlock(&S->mu);
        /* one prompt chunk (the slots take turns by index), then everyone's next token */
        for (int i = 0; i < S->o.parallel; i++)
            if (S->slots[i].job && S->slots[i].fed < S->slots[i].job->n_ids) {
                prefill(S, &S->slots[i]);
                break;
            }
        decode(S);
        pthread_mutex_lock(&S->mu);
    }
    pthread_mutex_unlock(&S->mu);
}
