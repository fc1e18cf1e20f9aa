/* diffattn serve: flags to da_serve_opts, then the library's server. */
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>

#include "args.h"
#include "commands.h"
#include "serve/serve_opts.h"

int cmd_serve(int argc, char **argv) {
    da_serve_opts o = da_serve_opts_default();
    const char *model = NULL, *host = o.host, *api_key = NULL, *tok_path = NULL, *slot_path = NULL, *kv = "f32";
    int port = o.port, parallel = o.parallel, ctx = 0, timeout = o.timeout_s, chunk = o.prefill_chunk;
    int request_timeout = o.request_timeout_s, cache_hold = o.cache_hold_ms;
    long max_body = o.max_body;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (any that sample takes: .safetensors, .gguf, a Hugging Face folder)", 0},
        {"host", OPT_STR, &host, "address to bind (0.0.0.0: every interface)", 0},
        {"port", OPT_INT, &port, "TCP port", 0},
        {"parallel", OPT_INT, &parallel, "slots: requests decoded together in one batched pass (1..64)", 0},
        {"ctx", OPT_INT, &ctx, "positions per slot (0: the model's max_seq_len)", 0},
        {"api-key", OPT_STR, &api_key, "require \"Authorization: Bearer KEY\" on every endpoint but / and /health", 0},
        {"max-body", OPT_LONG, &max_body, "largest request body in bytes (larger: 413)", 0},
        {"timeout", OPT_INT, &timeout, "seconds after which an idle connection is closed", 0},
        {"request-timeout", OPT_INT, &request_timeout,
         "seconds a connection has to send a whole request, from its accept or its previous answer", 0},
        {"prefill-chunk", OPT_INT, &chunk, "prompt tokens fed between two decoding steps", 0},
        {"cache-hold", OPT_INT, &cache_hold,
         "ms a finished slot keeps its cache for the request that continues it while others queue (0: none)", 0},
        {"kv", OPT_STR, &kv, "every slot's KV cache: f32, f16 or int8 (a scale per position, head and 32-block)", 0},
        {"tokenizer", OPT_STR, &tok_path, "tokenizer.json (default: as sample chooses)", 0},
        {"slot-save-path", OPT_STR, &slot_path,
         "folder for POST /slots/{id}?action=save|restore (made if missing; without it those answer 501)", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("serve",
                       "An OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions, /v1/models, "
                       "/tokenize, /detokenize, /health, /metrics, /slots and a chat page at / (docs/serving.md). "
                       "SIGTERM or Ctrl-C finishes the running requests, refuses new ones and exits.",
                       argc, argv, opts, 14, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    o.model_path = model, o.host = host, o.port = port, o.parallel = parallel, o.ctx = ctx, o.api_key = api_key;
    o.max_body = max_body, o.timeout_s = timeout, o.prefill_chunk = chunk, o.tokenizer_path = tok_path;
    o.request_timeout_s = request_timeout, o.slot_save_path = slot_path, o.cache_hold_ms = cache_hold;
    o.kv = kv;
    o.stop = cli_catch_stop_signals();
    /* each connection holds a descriptor: the soft limit (often 1,024) up to the hard one */
    struct rlimit nofile;
    if (!getrlimit(RLIMIT_NOFILE, &nofile) && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    signal(SIGPIPE, SIG_IGN); /* a client that hangs up is the server's business, not a reason to die */
    da_status st = da_serve(&o);
    return st.code ? cli_fail(st.msg) : 0;
}
