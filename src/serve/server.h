/* diffattn serve's shared state: the HTTP threads (http.c) make jobs, the
 * scheduler (sched.c) runs them on the slots, both under one mutex. */
#ifndef DA_SERVE_SERVER_H
#define DA_SERVE_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "diffattn/generate.h"
#include "serve/serve_opts.h"
#include "diffattn/tokenizer.h"
#include "infer/json_schema.h"
#include "serve/chat.h"
#include "serve/request.h"

/* One sequence to generate: a prompt's ids and what came of them. The HTTP
 * thread that made it and the scheduler each hold a reference. */
typedef struct srv_job {
    /* set before queueing, read-only after */
    int *ids, n_ids;
    int max_new, ignore_eos;
    float temperature, top_p;
    uint64_t seed;
    int top_n;        /* alternatives per position; -1: no log-probabilities */
    int prompt_lp;    /* 1: the prompt's log-probabilities too (echo with logprobs) */
    int cache_prompt; /* 1: may start from a slot's cached tokens (llama-server's cache_prompt, default true) */
    char *stop[SRV_MAX_STOP];
    size_t stop_len[SRV_MAX_STOP];
    da_json_schema *schema;       /* NULL: free text; else the answer is JSON fitting it (its own copy) */
    int n_stop;
    /* written by the scheduler under the server's lock */
    int *out, n_out, cap_out;     /* generated ids (the stopping token excluded) */
    float *lp;                    /* (n_ids + max_new) log-probability of each token given those before it */
    int *top_id;                  /* ((n_ids + max_new) * top_n) the best alternatives, most likely first */
    float *top_lp;
    char *text;                   /* the generated text, cut at a stop string */
    size_t n_text, cap_text, n_safe; /* n_safe: bytes that may be streamed (no stop string or character cut) */
    int done, finish_length;      /* finish_length: 1 "length", 0 "stop" */
    da_json_state json;           /* with a schema: the matcher's state after the generated text (scheduler's) */
    da_status err;
    int cancelled;                /* the client went away: the slot drops it */
    int started;                  /* a slot took it from the queue */
    int refused;                  /* still queued when the server began to stop: never run (503) */
    int refs;
    int passed_over;              /* times a job behind it in the queue took a slot first (bounded: never starved) */
    struct srv_job *next;         /* in the queue */
    double t_queued;
} srv_job;

typedef struct {
    da_session *s;
    srv_job *job;
    int fed;      /* prompt tokens in the cache */
    int last;     /* the token to feed next (decoding) */
    da_rng rng;
    /* the prompt cache: the tokens whose keys and values the session holds, kept after a job ends, so
     * that the next job with the same start feeds only the rest */
    int *cached, n_cached, cap_cached;
    unsigned long used; /* when it last took a job (S->slot_clock): among equals, the least recent is taken */
    int held;           /* a slot operation (slots.c) has it: no job may take it */
    double hold_until;  /* srv_now() until which only a job continuing its cache may take it (cache_hold_ms) */
    int hold_for;       /* tokens such a job shares with the cache: its last job's prompt (a reply may come
                           back tokenized otherwise than it was generated) */
} srv_slot;

typedef struct {
    da_serve_opts o;
    char model_id[256];
    /* loaded once, read-only after `ready` */
    da_engine *e;
    da_tokenizer *tok_owned;
    const da_tokenizer *tok;
    srv_template tmpl;
    char bos[64];
    int eos[8], n_eos; /* the end-of-turn tokens the tokenizer has, of load_chat's list */
    int V, ctx;
    uint64_t fingerprint; /* the model's, in slot files (da_engine_fingerprint); with --slot-save-path */
    int ids_only; /* no tokenizer for a vocabulary that is not bytes: prompts must be token ids */
    srv_slot *slots;
    da_session *work;
    float *logits, *scratch, *lsm; /* (parallel, V), (2V), (V) */
    /* structured output, made at the first request that asks for it (the scheduler's alone) */
    da_token_mask *mask;           /* the vocabulary's bytes */
    uint8_t *allowed;              /* (V) the tokens the schema allows next */
    float *masked;                 /* (V) logits with the others at -inf */
    uint8_t *text;                 /* one sampled token's bytes (text_cap of them): no allocation a token */
    size_t text_cap;
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, out_cv;
    srv_job *queue_head, *queue_tail;
    int queued, busy, draining, streams;
    int answers; /* answers owed: requests queued and not yet answered, plus responses MHD has not finished sending */
    _Atomic int ready; /* the model is loaded (read by the HTTP threads without mu) */
    /* metrics, under mu */
    long requests[6]; /* 2xx, 400, 401, 404, 413, other */
    long tokens_in, tokens_out, decode_steps;
    long tokens_cached; /* prompt tokens taken from a slot's cache instead of fed */
    long jobs_ahead;    /* jobs started before an earlier queued one, for their cached start */
    unsigned long slot_clock;
    double decode_tokens_per_s, t_start;
    struct MHD_Daemon *mhd;
    struct srv_conns *conns; /* request deadlines (conns.c) */
} srv;

double srv_now(void);
void srv_job_release(srv *S, srv_job *j); /* under mu */
/* Log-softmax of logits (V) into lsm; the top n ids (most likely first) into top. */
void srv_log_softmax(const float *logits, int V, float *lsm);
void srv_top(const float *lsm, int V, int n, int *ids, float *lps);

/* sched.c: the loop of da_serve, until draining and idle. */
void srv_schedule(srv *S);
/* http.c */
da_status srv_http_start(srv *S);
/* No listening socket, no log: connections are given with MHD_add_connection (the HTTP fuzz target). */
da_status srv_http_start_unbound(srv *S);
void srv_http_stop(srv *S);
/* page.c: the chat page */
extern const char srv_chat_page[];

#endif
