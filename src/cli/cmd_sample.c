/* diffattn sample: byte-level generation with the KV cache. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/tokenizer.h"

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

/* The prompt's ids: as Hugging Face encodes a prompt, with the tokens its
 * post_processor adds (a Llama 3 BOS); bytes when there is no tokenizer. */
static da_status prompt_ids(const da_tokenizer *use, const char *text, int **pids, size_t *n_prompt) {
    size_t pcap = 0;
    if (use) return da_tokenizer_encode_add_special(use, (const uint8_t *)text, strlen(text), pids, n_prompt, &pcap);
    *n_prompt = strlen(text);
    if (!(*pids = malloc(*n_prompt * sizeof(int)))) return da_errorf("out of memory");
    for (size_t i = 0; i < *n_prompt; i++) (*pids)[i] = (unsigned char)text[i];
    return da_ok();
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

int cmd_sample(int argc, char **argv) {
    const char *model = NULL, *prompt = "", *tok_path = NULL, *kv_s = "f32";
    int max_new = 256;
    float temperature = 0.8f, top_p = 0.9f;
    uint64_t seed = 1337;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors, or a .gguf from diffattn quantize: run quantized)", 0},
        {"prompt", OPT_STR, &prompt, "text to continue (bytes are tokens; empty starts from a newline)", 0},
        {"max-new", OPT_INT, &max_new,
         "tokens to generate; past the model's context the last half of the text is kept and generation goes on", 0},
        {"temperature", OPT_FLOAT, &temperature, "softmax temperature (0 = greedy)", 0},
        {"top-p", OPT_FLOAT, &top_p, "nucleus sampling mass in (0, 1]", 0},
        {"seed", OPT_U64, &seed, "sampling seed", 0},
        {"tokenizer", OPT_STR, &tok_path,
         "tokenizer (default: a model folder's tokenizer.json, or the one the model file carries; else one saved "
         "next to an older model; else bytes)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32, f16 or int8 (a scale per position, head and 32-block)", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("sample", "Generates text, one token at a time with a KV cache.", argc,
                       argv, opts, 8, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (max_new < 0) return cli_fail("--max-new must be >= 0");
    if (!(temperature >= 0)) return cli_fail("--temperature must be >= 0");
    if (!(top_p > 0 && top_p <= 1)) return cli_fail("--top-p must lie in (0, 1]");
    if (strcmp(kv_s, "f32") && strcmp(kv_s, "f16") && strcmp(kv_s, "int8")) return cli_fail("--kv: expected f32, f16 or int8");
    da_engine *e = NULL;
    da_status st = da_engine_load_with(&e, model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *tok = NULL;
    const da_tokenizer *use = NULL;
    if ((st = da_engine_choose_tokenizer(e, model, tok_path, &tok, &use)).code) {
        da_engine_free(e);
        return cli_fail(st.msg);
    }
    int *pids = NULL;
    size_t n_prompt = 0;
    st = prompt_ids(use, prompt[0] ? prompt : "\n", &pids, &n_prompt);
    da_session *s = NULL;
    if (!st.code) st = open_session(e, n_prompt, max_new, kv_s, &s);
    printer pr = {use, NULL, 0};
    da_generate_opts go = {max_new, temperature, top_p, seed, -1, print_token, &pr, 1};
    int generated = 0;
    const double t0 = da_now_s();
    if (!st.code && prompt[0]) fwrite(prompt, 1, strlen(prompt), stdout);
    if (!st.code) st = da_generate(s, pids, (int)n_prompt, &go, &generated);
    const double secs = da_now_s() - t0;
    printf("\n");
    if (!st.code)
        fprintf(stderr, "[%zu tokens in %.2fs, %.1f tok/s]\n", n_prompt + (size_t)generated, secs,
                ((double)n_prompt + generated) / secs);
    free(pr.bytes);
    free(pids);
    da_tokenizer_free(tok);
    da_session_free(s);
    da_engine_free(e);
    return st.code ? cli_fail(st.msg) : 0;
}
