/* diffattn inference: one engine for every model format.
 *
 * An engine holds a model's weights as typed tensors (f32, f16, bf16, q8_0,
 * q4_0, q4_k) ready to run; a session holds one sequence's KV cache and
 * scratch. The same forward pass serves prompts (any number of tokens a
 * call) and batch-1 decoding, for safetensors and GGUF models alike:
 *
 *     da_engine *e;  da_engine_load(&e, "model.safetensors");   // or .gguf
 *     da_session *s; da_session_create(&s, e, NULL);
 *     da_session_feed(s, prompt, n, 0, &logits);               // logits: (V) of the last token
 *     ... da_sample_token(logits, ...) ... da_session_feed(s, &tok, 1, 0, &logits);
 *
 * or let da_generate run that loop.
 * Implemented in src/infer/engine_forward.c, src/infer/session.c, src/infer/engine_load.c, src/infer/engine_weights.c,
 * src/infer/convert_file.c, src/infer/generate.c, src/infer/sample.c,
 * src/infer/tokenizer_read.c. */
#ifndef DIFFATTN_GENERATE_H
#define DIFFATTN_GENERATE_H

#include "diffattn/formats.h"
#include "diffattn/model.h"
#include "diffattn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct da_engine da_engine;   /* a model's weights, ready to run; read-only once made */
typedef struct da_session da_session; /* one sequence: KV cache and scratch */

/* How a matmul's input row meets the weights:
 *   Q8:           int8 per 32-block (ggml's way for q8_0/q4_0/q4_K; near lossless), integer dots
 *   INT8_DYNAMIC: int8 with one scale per token (w8a8, dynamic per-token), integer dots
 *   INT8_STATIC:  int8 with one calibrated scale per tensor (w8a8, static), integer dots
 *   BF16:         activations rounded to bf16, weights dequantized (w8a16)
 *   F32:          fp32 activations, weights dequantized (weight-only reference) */
typedef enum {
    DA_ACTQ_Q8 = 0,
    DA_ACTQ_INT8_DYNAMIC = 1,
    DA_ACTQ_INT8_STATIC = 2,
    DA_ACTQ_BF16 = 3,
    DA_ACTQ_F32 = 4,
} da_act_mode;

const char *da_act_mode_name(da_act_mode m);
int da_act_mode_parse(const char *s, da_act_mode *out); /* 0 ok, -1 unknown */

/* A model file: a diffattn safetensors checkpoint, or a GGUF from `diffattn
 * quantize`. Errors name the file and the field. */
da_status da_engine_load(da_engine **out, const char *path);
/* da_engine_load with load options o (NULL: the defaults). */
da_status da_engine_load_with(da_engine **out, const char *path, const da_load_opts *o);
/* f32 views of m's parameters, no copy: m must outlive the engine. λ is
 * computed here, once: make a new engine after changing m's parameters. */
da_status da_engine_from_model(da_engine **out, const da_model *m);
void da_engine_free(da_engine *e);
const da_config *da_engine_config(const da_engine *e);
/* The tokenizer the model file carries (safetensors __metadata__
 * "tokenizer.json", GGUF tokenizer.* keys), its vocabulary checked against
 * the model's at load; NULL when it carries none (bytes, or an older file).
 * Owned by the engine. */
const da_tokenizer *da_engine_tokenizer(const da_engine *e);
/* The tokenizer to use with e, loaded from model_path: given_path when set
 * (an error when it differs from the one e carries, or from the model's
 * vocabulary), else a Hugging Face folder's tokenizer.json, else the one e
 * carries, else tokenizer files saved beside a model from before models
 * carried theirs; none (*use NULL: bytes are tokens) only for a 256-token
 * vocabulary. *owned: what the caller frees (NULL when *use is e's own). */
da_status da_engine_choose_tokenizer(const da_engine *e, const char *model_path, const char *given_path,
                                     da_tokenizer **owned, const da_tokenizer **use);
/* The tokenizer of tok_path (a tokenizer file or folder, or a model's), or
 * the one sample takes with the model at model, or, with both, tok_path's
 * once it matches the model's (da_tokenizer_match). A model that carries
 * none needs tok_path. *out: the caller frees. */
da_status da_tokenizer_open(const char *tok_path, const char *model, const da_load_opts *lo, da_tokenizer **out);
/* The type of the layer matmuls ("f32", "q8_0", ...), the activation mode
 * the file asks for, and the bytes of all tensor data. */
const char *da_engine_weight_type(const da_engine *e);
da_act_mode da_engine_default_act(const da_engine *e);
size_t da_engine_weight_bytes(const da_engine *e);
size_t da_engine_file_bytes(const da_engine *e); /* of the file it was loaded from; 0 when made in memory */
/* The bytes one batch-1 decoding step reads at a context of `context`
 * positions: every weight but the embedding table (one row of it; the whole
 * table when a tied model has no head copy, as it is then the head) and, in
 * every layer, the keys and values of the positions a query sees (a sliding
 * window's at most), f32, f16, or int8 with their scales. Decoding is bound by
 * this over the machine's memory bandwidth. */
double da_engine_decode_bytes(const da_engine *e, long context, int kv_int8, int kv_f16);
/* Tensor i (0 .. da_engine_n_tensors - 1) in the model's tensor order: its
 * name, its type ("f32", "q4_k", ...) and shape (cols 0 for vectors). */
int da_engine_n_tensors(const da_engine *e);
void da_engine_tensor(const da_engine *e, int i, const char **name, const char **type, int *rows, int *cols);

typedef struct {
    int act;        /* da_act_mode, or -1: the engine's default; float weights always run f32 activations */
    int kv_int8;    /* 1: the KV cache holds int8 with a scale per position, head and 32-block */
    int logit_bits; /* > 0: attention logits fake-quantized to this many bits before each softmax
                       (symmetric, one absmax scale per query row of each map: the paper's Figure 8); 0: exact */
    int max_T;      /* positions the session holds; 0: the model's max_seq_len */
    int max_batch;  /* tokens one da_session_feed call may take; 0: max_T */
    int kv_f16;     /* 1: the KV cache holds f16 (llama.cpp's default cache type; not with kv_int8) */
} da_session_opts;

/* Options with every field at its default: act -1, exact logits, f32 cache, max_seq_len positions. */
da_session_opts da_session_opts_default(void);

da_status da_session_create(da_session **out, const da_engine *e, const da_session_opts *o); /* o NULL: defaults */
void da_session_free(da_session *s);
void da_session_reset(da_session *s); /* empty the cache; the next token is position 0 */
/* Keeps positions 0 .. n-1 (the next token is position n): 1, or 0 when this session cannot (a variant
 * with a decoding cache of its own, or a sliding-window ring) or n > len; then nothing changes. */
int da_session_truncate(da_session *s, int n);
int da_session_len(const da_session *s);
int da_session_capacity(const da_session *s);  /* positions it holds (max_T) */
int da_session_max_batch(const da_session *s); /* tokens one call may take */
int da_session_vocab_size(const da_session *s);
da_act_mode da_session_act(const da_session *s); /* the activation mode it runs (float weights: f32) */

/* Feeds tokens: (n) at positions len .. len+n-1. logits: (n, V) when
 * all_logits, else the last position's (V); owned by s, valid until the next call. */
da_status da_session_feed(da_session *s, const int *tokens, int n, int all_logits, const float **logits);

/* One decoding step of n sessions at once, token i fed to ss[i] at its
 * position: every weight matrix is read once for up to 15 of them, each
 * session's keys and values go to its own cache. A session's logits are the
 * ones da_session_feed(ss[i], &tokens[i], 1, ...) gives (for quantized
 * weights with integer activations bit for bit; for float weights up to the
 * order of float sums). w: a session of the same engine and options used for
 * its scratch only (its cache is untouched); make it with max_batch >= min(n, 15).
 * logits: (n, V), written. */
da_status da_session_decode_batch(da_session *w, da_session *const *ss, int n, const int *tokens, float *logits);

/* Picks a token from logits: (V), which must be finite.
 *   temperature <= 0: argmax (the lowest index among ties); rng is not used.
 *   otherwise: softmax(logits / temperature) restricted to the smallest set of
 *   top tokens whose probability mass reaches top_p (ties at the boundary
 *   resolved towards lower indices), renormalised, and drawn with one
 *   da_rng_uniform. top_p in (0, 1]; 1 = no restriction; top_p <= 0 keeps only
 *   the most likely token, top_p > 1 acts as 1.
 * Deterministic given the rng state. scratch: (2V) floats. Returns -1 when V <= 0. */
int da_sample_token(const float *logits, int V, float temperature, float top_p, da_rng *rng, float *scratch);

typedef struct {
    int max_new;       /* tokens to generate */
    float temperature; /* 0: greedy */
    float top_p;
    uint64_t seed;
    int stop_token;    /* generation ends after this token; -1: none */
    /* called with each generated token; a non-zero return stops generation */
    int (*on_token)(void *ctx, int token);
    void *ctx;
    /* 0: the session must hold every position (else an error says so);
     * 1: when it is full, the last half of the tokens so far are fed again
     * from position 0 and generation goes on (a sliding context) */
    int slide;
} da_generate_opts;

/* Feeds the prompt (n_prompt >= 1) to s from its current position, then
 * samples up to o->max_new tokens, feeding each back. *n_out (may be NULL):
 * the tokens generated. Without o->slide the session must hold len +
 * n_prompt + max_new - 1 positions; with it, the prompt must fit. */
da_status da_generate(da_session *s, const int *prompt, int n_prompt, const da_generate_opts *o, int *n_out);

/* Any model file as a full-precision da_model for the training forward (the
 * evaluations that need activations): safetensors as stored, GGUF weights
 * dequantized to f32. */
da_status da_model_load_any(da_model *m, const char *path);
da_status da_model_load_any_with(da_model *m, const char *path, const da_load_opts *o);

/* A Hugging Face folder's tokenizer.json, which its da_model does not carry,
 * read into m->tokenizer_json, so a file made from m (converted, exported)
 * keeps it; nothing when m has a tokenizer or path is not such a folder. */
da_status da_model_take_folder_tokenizer(da_model *m, const char *path);
/* A model to train or convert from: diffattn safetensors, a Hugging Face
 * folder (its tokenizer.json carried into m) or a GGUF whose weights are f32,
 * f16 or bf16; a quantized GGUF is refused in one line naming a quantized
 * tensor (its rounding would be trained on as if it were weights). */
da_status da_model_load_float(da_model *m, const char *path, const da_load_opts *o);
/* diffattn convert: the softmax model at src_path (diffattn safetensors, a
 * Hugging Face Llama folder, or a GGUF in f32, f16 or bf16: a quantized one is
 * refused) converted by da_model_convert and saved at out_path. */
da_status da_model_convert_file(const char *src_path, da_arch to, da_convert_recipe r, uint64_t seed,
                                const char *out_path, const da_load_opts *o);

#ifdef __cplusplus
}
#endif
#endif
