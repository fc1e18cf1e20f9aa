/* diffattn serve: an OpenAI-compatible HTTP server over the inference engine
 * (docs/serving.md). --parallel slots each hold one sequence's KV cache; every
 * decoding step advances all busy slots in one batched pass
 * (da_session_decode_batch) and new prompts are fed in chunks between steps.
 *
 *     da_serve_opts o = da_serve_opts_default();
 *     o.model_path = "m.gguf"; o.stop = flag_a_signal_handler_sets;
 *     da_status st = da_serve(&o);   // returns once *o.stop is set and running requests are done
 *
 * Implemented in src/serve/serve.c. */
#ifndef DIFFATTN_SERVE_H
#define DIFFATTN_SERVE_H

#include "diffattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const char *model_path;     /* any model `sample` takes */
    const char *tokenizer_path; /* NULL: as `sample` chooses (da_engine_choose_tokenizer) */
    const char *host;           /* address to bind: "127.0.0.1" by default */
    int port;                   /* 8080 */
    int parallel;               /* slots: sequences decoded together (1..64) */
    int ctx;                    /* positions per slot; 0: the model's max_seq_len */
    const char *api_key;        /* NULL: none; else every endpoint but / and /health needs "Authorization: Bearer K" */
    long max_body;              /* request bodies over this many bytes get 413 */
    int timeout_s;              /* an idle connection is closed after this many seconds */
    int request_timeout_s;      /* a connection that has not sent a whole request this many seconds after
                                   its accept (or its previous answer) is closed */
    int prefill_chunk;          /* prompt tokens fed to one slot between two decoding steps */
    const char *kv;             /* every slot's KV cache: "f32" (NULL), "f16" or "int8", as sample's --kv */
    int cache_hold_ms;          /* while requests queue, a slot that just finished keeps its cache this long for
                                   the request that continues it (a chat's next turn); 0: never held */
    volatile int *stop;         /* when *stop becomes non-zero (a signal handler may set it): refuse new
                                   requests, finish the running ones, return. NULL: run until an error */
    int quiet;                  /* 1: no request log on stderr */
    const char *slot_save_path; /* NULL: no /slots actions (501); else the folder slot files are saved in and
                                   restored from (made if missing) */
} da_serve_opts;

da_serve_opts da_serve_opts_default(void);

/* Binds, answers /health with 503 while the model loads, then serves until
 * *o->stop. Errors (a port in use, a model that does not load) name the cause. */
da_status da_serve(const da_serve_opts *o);

#ifdef __cplusplus
}
#endif
#endif
