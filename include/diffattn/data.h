/* diffattn data: training text and token shards, `prepare` (text -> token
 * shards), and token-id files.
 * Implemented in src/data/text_data.c, src/data/source.c, src/data/prepare.c, src/data/ids_file.c,
 * src/data/distract.c. */
#ifndef DIFFATTN_DATA_H
#define DIFFATTN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "diffattn/model.h"
#include "diffattn/rng.h"
#include "diffattn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- training data */

/* Token windows for training and evaluation, from either
 *  - text: a file or every regular file below a folder (sorted by path), read as
 *    bytes (vocabulary 256) and split into train (head) and validation (tail);
 *  - token shards: a folder written by `diffattn prepare` (train_*.bin and
 *    val_*.bin), mapped read-only with no copy. */
typedef struct {
    const uint32_t *tok;
    size_t n;
} da_token_span;

typedef struct {
    da_token_span *spans; /* train spans, then validation spans */
    int n_train_spans, n_val_spans;
    size_t n_train, n_val; /* tokens in each split */
    int vocab_size;        /* 256 for text; the shards' vocabulary otherwise */
    int from_shards;
    int tokenized;         /* text encoded with a tokenizer (da_text_data_load_tok) */
    uint32_t *owned;       /* text: the tokens */
    void **maps;           /* shards: the mappings */
    size_t *map_sizes;
    int n_maps;
    int n_files;
} da_text_data;

/* Both splits must hold a window of seq_len + 1 tokens; the error says how
 * much is needed otherwise. val_fraction applies to text only (shards carry
 * their own split). */
da_status da_text_data_load(da_text_data *d, const char *path, float val_fraction, int seq_len);
void da_text_data_free(da_text_data *d);
/* The same, text encoded with tok (NULL: bytes), split as `diffattn prepare`
 * splits it, so the ids equal prepare's shards of that text (the model's
 * own tokenizer: eval loss on text and on its shards agree). */
da_status da_text_data_load_tok(da_text_data *d, const char *path, float val_fraction, int seq_len,
                                const da_tokenizer *tok);
/* An error naming both sizes when the data's vocabulary is not the model's. */
da_status da_text_data_check_vocab(const da_text_data *d, const char *path, int model_vocab);
/* The tokenizer a shard folder holds (prepare copies it there), or *out NULL
 * for text or a folder without one. */
da_status da_data_tokenizer(const char *path, da_tokenizer **out);
/* 1 when path is a folder of token shards. */
int da_data_is_shards(const char *path);
/* The vocabulary the data needs: its shards' vocab_size, or 256 for text
 * (also when the shard header cannot be read: loading reports that). */
int da_data_vocab_size(const char *path);

/* ---------------------------------------------------------------- data sources */

/* What the one training loop (da_train_source) asks of any source of
 * training data: text and token shards (da_text_source), or a synthetic task
 * (experiments.h: da_task_source). Windows are (tokens, targets) of T
 * positions; a target of -1 adds no loss there. */
typedef struct da_data_source {
    void *self;
    int vocab_size;  /* every token is below it */
    int seq;         /* > 0: the window length the source makes, which the run's seq must equal; 0: any */
    long n_held_out; /* > 0: the held-out set's size in windows; 0: the run's eval_batches x batch */
    /* NULL, or the sampler's seed for a new run of seed `seed` (NULL: a fixed mix of seed). */
    uint64_t (*stream_seed)(void *self, uint64_t seed);
    /* Draws a step's B windows from rng and keeps windows j = phase, phase + stride, ... in order: every
     * rank draws the same B, so the stream does not depend on the number of ranks.
     * tokens, targets: (ceil((B - phase) / stride), T). */
    void (*next)(void *self, da_rng *rng, int B, int phase, int stride, int T, int *tokens, int *targets);
    /* Window i of the n held-out windows: the same at every evaluation of a run. */
    void (*held_out)(void *self, long i, long n, int T, int *tokens, int *targets);
    /* NULL, or the task's score of b held-out windows from their logits (b, T, V): adds the positions
     * scored to *total and the right ones to *right. */
    void (*score)(void *self, const int *targets, const float *logits, int b, int T, int V, long *right,
                  long *total);
} da_data_source;

/* Text or token shards as a source: windows at random offsets of the train
 * split, held out evenly spaced over the validation split, no score. d must
 * outlive the source. */
da_data_source da_text_source(const da_text_data *d);
/* A score for answers that are one token: a position with a target >= 0 is
 * right when its largest logit is the target (the first one on ties). */
void da_score_argmax(void *self, const int *targets, const float *logits, int b, int T, int V, long *right,
                     long *total);

/* ---------------------------------------------------------------- distractors */

/* Windows of target text with spans of an unrelated text (the distractors)
 * inserted at random places, so that a share `rate` of the window's T + 1
 * tokens are distractors; a position whose next token is a distractor is not
 * scored (target -1). A window's rate is one of rates, drawn per window. */
#define DA_DISTRACT_MAX_RATES 8
typedef struct {
    float rates[DA_DISTRACT_MAX_RATES]; /* each in [0, 0.9] */
    int n_rates;
    int span;      /* distractor tokens per inserted span (the last one may be shorter) */
    uint64_t seed; /* held-out windows: window i's insertions come from this seed and i */
} da_distract_config;

typedef struct da_distract da_distract;

/* The rates "0,0.3,0.6" into c (span and seed untouched); the error names the flag's text. */
da_status da_distract_parse_rates(da_distract_config *c, const char *list);
/* The distractor tokens of path (text through tok, NULL: bytes; or token shards), every file and both splits,
 * around target, which must outlive the result. */
da_status da_distract_open(da_distract **out, const da_text_data *target, const char *path, const da_tokenizer *tok,
                           const da_distract_config *c);
void da_distract_free(da_distract *d);
/* One window from the T + 1 target tokens text at rate: tokens, targets (T); *n_distract (may be NULL): the
 * distractor tokens among the T + 1. Every random choice comes from rng. */
void da_distract_fill(const da_distract *d, da_rng *rng, float rate, const int *text, int T, int *tokens,
                      int *targets, int *n_distract);
/* Held-out window i of n: the target's validation window i of n at rates[i % n_rates], insertions seeded by
 * (seed, i): the same windows for every model and every call. */
void da_distract_val_window(const da_distract *d, long i, long n, int T, int *tokens, int *targets);
/* The training source: windows of the target's train split drawn as da_text_source draws them, each at a rate
 * drawn from rates, from the run's sampler (a resumed run draws the same); held out as da_distract_val_window. */
da_data_source da_distract_source(const da_distract *d);

/* ---------------------------------------------------------------- prepare */

typedef struct {
    float val_fraction;  /* the tail of the input, by bytes, goes to val_*.bin; in (0, 1) */
    long shard_tokens;   /* tokens per shard at most */
    int chunk_bytes;     /* text encoded per task (cut at a line end) */
    int quiet;           /* no progress display */
} da_prepare_config;

typedef struct {
    long files, empty_files;
    double bytes, seconds;
    long long train_tokens, val_tokens;
    int train_shards, val_shards;
} da_prepare_stats;

void da_prepare_config_default(da_prepare_config *pc);
/* Streams text files through a tokenizer into uint32 token shards with
 * bounded memory, on every core; tokenizer_path is copied into out_dir next
 * to the shards. */
da_status da_prepare(const char *tokenizer_path, const char *const *inputs, int n_inputs, const char *out_dir,
                     const da_prepare_config *pc, da_prepare_stats *stats);

/* ---------------------------------------------------------------- token-id files */

/* Whitespace-separated decimal ids, one sequence; *ids is malloc'd. Every id
 * must lie in [0, vocab_size); the error names the file, the position and
 * the offending text. */
da_status da_ids_read(const char *path, int vocab_size, int **ids, int *n);
/* Writes ids space-separated on one line, atomically: on any failure (a full
 * disk, a file size limit) the previous file at path is untouched. */
da_status da_ids_write(const char *path, const int *ids, size_t n);
/* Writes n bytes to path with the same guarantee (decoded text, any output
 * a command writes whole). */
da_status da_bytes_write(const char *path, const void *bytes, size_t n);

#ifdef __cplusplus
}
#endif
#endif
