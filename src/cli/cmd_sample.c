/* diffattn sample: generation with the KV cache, from a text or (--chat) a
 * conversation rendered by the model's chat template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/tokenizer.h"
#include "serve/chat.h"

/* Prints each generated token as it comes: through the tokenizer, or as a byte. */
typedef struct {
    const da_tokenizer *tok;
    uint8_t *bytes;
    size_t cap;
} printer;

static int print_token(void *ctx, int tk) {
    printer *p = ctx;
    if (p->tok) {
        size_t nb = 0;
        if (tk < da_tokenizer_vocab_size(p->tok) && !da_tokenizer_decode(p->tok, &tk, 1, &p->bytes, &nb, &p->cap).code)
            fwrite(p->bytes, 1, nb, stdout);
    } else if (tk < 256) {
        fputc(tk, stdout);
    }
    fflush(stdout);
    return 0;
}

/* The prompt's ids: with add_special as Hugging Face encodes a prompt, with
 * the tokens its post_processor adds (a Llama 3 BOS); without, the special
 * tokens of the text recognised and nothing added (a rendered chat); bytes
 * when there is no tokenizer. */
static da_status prompt_ids(const da_tokenizer *use, const char *text, size_t n, int add_special, int **pids,
                            size_t *n_prompt) {
    size_t pcap = 0;
    if (use)
        return add_special ? da_tokenizer_encode_add_special(use, (const uint8_t *)text, n, pids, n_prompt, &pcap)
                           : da_tokenizer_encode(use, (const uint8_t *)text, n, pids, n_prompt, &pcap);
    *n_prompt = n;
    if (!(*pids = malloc((n ? n : 1) * sizeof(int)))) return da_errorf("out of memory");
    for (size_t i = 0; i < n; i++) (*pids)[i] = (unsigned char)text[i];
    return da_ok();
}

/* --chat: user as one user message (after a system message when system is
 * not NULL), rendered by the model's own chat template as serve renders a
 * chat (serve/chat.h, docs/serving.md). *text: malloc'ed, *n bytes. *end:
 * the id of the token that closes the assistant's turn, or -1. */
static da_status chat_text(const char *model, const da_tokenizer *tok, const char *system, const char *user,
                           char **text, size_t *n, int *end) {
    const char *why_plain = NULL;
    const srv_template t = srv_template_of_model(model, &why_plain);
    const char *turn_end = srv_template_turn_end(t);
    *end = tok && turn_end ? da_tokenizer_special_id(tok, turn_end) : -1;
    if (why_plain)
        fprintf(stderr, "sample: warning: %s; --chat renders the plain fallback (\"role: content\" lines, then "
                        "\"assistant:\"; docs/serving.md)\n",
                why_plain);
    char role_system[] = "system", role_user[] = "user";
    srv_message m[2] = {{role_system, (char *)(system ? system : ""), system ? strlen(system) : 0, NULL, 0},
                        {role_user, (char *)user, strlen(user), NULL, 0}};
    return srv_chat_render(t, system ? m : m + 1, system ? 2 : 1, NULL, 0, srv_template_bos(tok), text, n);
}

/* Past the context, generation slides: the last half is fed again and it
 * goes on (a sliding-window model's ring cache holds any length, so neither
 * its prompt nor its output is bounded). */
static da_status open_session(const da_engine *e, size_t n_prompt, int max_new, const char *kv_s, da_session **s) {
    const int max_seq = da_engine_config(e)->max_seq_len;
    const long total = (long)n_prompt + max_new;
    da_session_opts so = da_session_opts_default();
    so.kv_int8 = !strcmp(kv_s, "int8");
    so.kv_f16 = !strcmp(kv_s, "f16");
    so.max_T = total < max_seq ? (int)total : max_seq;
    da_status st = da_session_create(s, e, &so);
    if (!st.code && (long)n_prompt > da_session_capacity(*s))
        st = da_errorf("the prompt is %zu tokens; the model's context is %d (max_seq_len): shorten it", n_prompt,
                       max_seq);
    return st;
}

typedef struct {
    const char *model, *prompt, *system, *tok_path, *kv;
    int max_new, chat;
    float temperature, top_p;
    uint64_t seed;
} sample_args;

/* The flags, checked: CLI_OK, CLI_HELP, or CLI_ERROR (reported). */
static int parse_args(sample_args *a, int argc, char **argv) {
    *a = (sample_args){.prompt = "", .kv = "f32", .max_new = 256, .temperature = 0.8f, .top_p = 0.9f, .seed = 1337};
    cli_opt opts[] = {
        {"model", OPT_STR, &a->model, "model file (.safetensors, or a .gguf from diffattn quantize: run quantized)", 0},
        {"prompt", OPT_STR, &a->prompt,
         "text to continue (bytes are tokens; empty starts from a newline); with --chat, the user's message", 0},
        {"chat", OPT_FLAG, &a->chat,
         "render --prompt as a user's message through the model's chat template (tokenizer_config.json's or the "
         "GGUF's), as serve renders a chat, and generate the assistant's reply, up to the token closing its turn", 0},
        {"system", OPT_STR, &a->system, "with --chat: a system message before the user's", 0},
        {"max-new", OPT_INT, &a->max_new,
         "tokens to generate; past the model's context the last half of the text is kept and generation goes on", 0},
        {"temperature", OPT_FLOAT, &a->temperature, "softmax temperature (0 = greedy)", 0},
        {"top-p", OPT_FLOAT, &a->top_p, "nucleus sampling mass in (0, 1]", 0},
        {"seed", OPT_U64, &a->seed, "sampling seed", 0},
        {"tokenizer", OPT_STR, &a->tok_path,
         "tokenizer (default: a model folder's tokenizer.json, or the one the model file carries; else one saved "
         "next to an older model; else bytes)", 0},
        {"kv", OPT_STR, &a->kv, "KV cache: f32, f16 or int8 (a scale per position, head and 32-block)", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("sample", "Generates text, one token at a time with a KV cache.", argc, argv, opts,
                       (int)(sizeof opts / sizeof opts[0]), req);
    if (rc) return rc;
    if (a->max_new < 0) return cli_fail("--max-new must be >= 0");
    if (!(a->temperature >= 0)) return cli_fail("--temperature must be >= 0");
    if (!(a->top_p > 0 && a->top_p <= 1)) return cli_fail("--top-p must lie in (0, 1]");
    if (strcmp(a->kv, "f32") && strcmp(a->kv, "f16") && strcmp(a->kv, "int8"))
        return cli_fail("--kv: expected f32, f16 or int8");
    if (a->system && !a->chat) return cli_fail("--system needs --chat");
    return CLI_OK;
}

int cmd_sample(int argc, char **argv) {
    sample_args a;
    int rc = parse_args(&a, argc, argv);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_engine *e = NULL;
    da_status st = da_engine_load_with(&e, a.model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *tok = NULL;
    const da_tokenizer *use = NULL;
    if ((st = da_engine_choose_tokenizer(e, a.model, a.tok_path, &tok, &use)).code) {
        da_engine_free(e);
        return cli_fail(st.msg);
    }
    char *chat = NULL;
    size_t n_text = 0;
    int stop = -1;
    if (a.chat) st = chat_text(a.model, use, a.system, a.prompt, &chat, &n_text, &stop);
    const char *text = chat ? chat : a.prompt[0] ? a.prompt : "\n";
    if (!chat) n_text = strlen(text);
    int *pids = NULL;
    size_t n_prompt = 0;
    if (!st.code) st = prompt_ids(use, text, n_text, !chat, &pids, &n_prompt);
    da_session *s = NULL;
    if (!st.code) st = open_session(e, n_prompt, a.max_new, a.kv, &s);
    printer pr = {use, NULL, 0};
    da_generate_opts go = {a.max_new, a.temperature, a.top_p, a.seed, stop, print_token, &pr, 1};
    int generated = 0;
    const double t0 = da_now_s();
    if (!st.code && (chat || a.prompt[0])) fwrite(text, 1, n_text, stdout); /* the prompt, then its continuation */
    if (!st.code) st = da_generate(s, pids, (int)n_prompt, &go, &generated);
    const double secs = da_now_s() - t0;
    printf("\n");
    if (!st.code)
        fprintf(stderr, "[%zu tokens in %.2fs, %.1f tok/s]\n", n_prompt + (size_t)generated, secs,
                ((double)n_prompt + generated) / secs);
    free(chat);
    free(pr.bytes);
    free(pids);
    da_tokenizer_free(tok);
    da_session_free(s);
    da_engine_free(e);
    return st.code ? cli_fail(st.msg) : 0;
}
