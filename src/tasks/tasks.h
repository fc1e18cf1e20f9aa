/* Synthetic retrieval tasks: each a data source of the training loop and a
 * scorer (definitions in docs/tasks.md), and the built-in needle mix of
 * plain compare. */
#ifndef DA_TASKS_H
#define DA_TASKS_H

#include "diffattn/data.h"
#include "diffattn/model.h"
#include "diffattn/train.h"

/* ---------------------------------------------------------------- synthetic retrieval tasks */

/* Token-level synthetic retrieval tasks, generated from a seed (definitions
 * and their sources in docs/tasks.md).
 *
 *   mqar          multi-query associative recall (Zoology): `pairs` key-value
 *                 pairs, then each key asked once at a power-law gap.
 *   noisy-recall  in-context recall with noise (MAD): key-value pairs drawn
 *                 with repeats, slots of noise tokens from their own
 *                 vocabulary in between; every repeated key's value is asked.
 *   icl           in-context classification: a random rule per sequence maps
 *                 input symbols to class labels; `demos` labelled
 *                 demonstrations, then a query whose symbol is among them.
 *
 * A sample is (tokens, targets) of T positions each: targets[t] is the token
 * the model must predict after tokens[t] at an answer position, and -1 (the
 * loss mask of cross_entropy) everywhere else. */
typedef enum {
    DA_TASK_MQAR = 0,
    DA_TASK_NOISY_RECALL = 1,
    DA_TASK_ICL = 2,
    DA_TASK_COUNTERFACTUAL = 3,
    /* RULER's synthetic tasks at token level (tasks_ruler.c) */
    DA_TASK_NIAH = 4,
    DA_TASK_NIAH_MULTIKEY = 5,
    DA_TASK_NIAH_MULTIVALUE = 6,
    DA_TASK_NIAH_MULTIQUERY = 7,
    DA_TASK_VT = 8,
    DA_TASK_CWE = 9,
    DA_TASK_N_KINDS = 10
} da_task_kind;

#define DA_ICL_MAX_DEMOS 128
#define DA_ICL_MAX_SYMBOLS 256
#define DA_TASK_MAX_DEPTHS 16

typedef struct {
    da_task_kind kind;
    int seq;         /* T, tokens per sequence; even */
    int vocab;       /* the model's vocabulary; every token lies in [0, vocab) */
    int pairs;       /* mqar: key-value pairs, each asked once */
    double alpha;    /* mqar: query gaps g = 0.. drawn with p(g) ~ (g + 1)^(alpha - 1) (Zoology's power_a) */
    double noise;    /* noisy-recall: probability that a two-token slot is noise */
    int noise_vocab; /* noisy-recall: tokens [vocab - noise_vocab, vocab) are noise */
    int demos;       /* icl: K demonstrations; seq must be 2K + 2 */
    int classes;     /* icl: C labels, tokens [symbols, symbols + C) */
    int symbols;     /* icl: N input symbols, tokens [0, N) */
    int entities;    /* counterfactual: E entities, tokens [2, 2 + E) */
    int attributes;  /* counterfactual: A attributes, tokens [2 + E, 2 + E + A) */
    int context_pairs;   /* counterfactual: K (entity, attribute) pairs before the queries */
    double memory_share; /* counterfactual: share of training sequences that state facts with no context */
    uint64_t facts_seed; /* counterfactual: the fact table W(e), fixed for the task */
    /* RULER's tasks (niah*, vt, cwe); noise is the share of the haystack that is distractors */
    int value_len;   /* niah*: value tokens per needle (m) */
    int needles;     /* niah-multikey: needles (one asked); -multivalue: values of the key; -multiquery: keys asked;
                        cwe: the common words */
    int hops;        /* vt: assignments after the first in each chain (hops + 1 variables) */
    int interleave;  /* niah-multiquery: each asked key is followed by its answer (`Q k1 v1.. k2 v2..`, MQAR's
                        form) instead of all keys, then all answers */
    int n_depths;    /* 0: needle depths uniform in [0, 1]; else each drawn uniformly from depths */
    double depths[DA_TASK_MAX_DEPTHS];
    double cw_ratio; /* cwe: a common word is about this many times as frequent as an uncommon one (>= 2) */
} da_task_config;

/* A held-out set's score, as da_data_source.score: adds the answers (or
 * episodes) scored to *total and the right ones to *right. */
typedef void (*da_task_score_fn)(void *self, const int *targets, const float *logits, int b, int T, int V,
                                 long *right, long *total);

/* Zoology's and MAD's defaults, scaled to small models (docs/tasks.md). */
void da_task_config_default(da_task_config *c, da_task_kind kind);
da_status da_task_validate(const da_task_config *c);
const char *da_task_name(da_task_kind k);
int da_task_parse(const char *s, da_task_kind *out); /* 0 ok, -1 unknown */
/* The score of a task's held-out set: da_score_argmax for one-token answers,
 * da_score_episodes (every answer token of an episode) for RULER's tasks. */
da_task_score_fn da_task_score(da_task_kind k);

/* One sample of c from r: tokens and targets (T) as above. src (T), when not
 * NULL, gets at each answer position t the position of the key that t
 * retrieves (its value follows it at src[t] + 1: for noisy-recall the most
 * recent earlier occurrence of the pair), and -1 elsewhere. Returns the
 * number of answer positions. c must be valid. */
int da_task_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);

/* noisy-recall: whether token is a noise token (0 for the other tasks). */
int da_task_is_noise(const da_task_config *c, int token);

/* ---------------------------------------------------------------- RULER's tasks at token level
 * niah, niah-multikey, niah-multivalue, niah-multiquery, vt and cwe (Hsieh et
 * al. 2024, NVIDIA/RULER's synthetic.yaml; exact definitions in docs/tasks.md).
 * An episode fills T = seq tokens at any length: the context (haystack with
 * the needles at their depths), the query marker, the query's key(s), then the
 * answer of n tokens, the only targets: each is the target of the position
 * before it (positions T - 1 - n .. T - 2). Tokens: 0 pad (never written),
 * 1 the query marker, 2 the assignment `=` of vt; then the key range, the value
 * range and the filler range of da_ruler_layout_of. */
enum { DA_RULER_PAD = 0, DA_RULER_QUERY = 1, DA_RULER_ASSIGN = 2, DA_RULER_RESERVED = 3 };

typedef struct {
    int key0, keys;       /* keys (niah*) and variables (vt): [key0, key0 + keys) */
    int value0, values;   /* values: [value0, value0 + values) */
    int filler0, fillers; /* the haystack's filler, and cwe's words: [filler0, vocab) */
} da_ruler_layout;

/* keys = values = (vocab - 3) / 4, the filler the rest. */
void da_ruler_layout_of(int vocab, da_ruler_layout *l);
/* 1 for niah, niah-multikey, niah-multivalue, niah-multiquery, vt and cwe. */
int da_task_is_ruler(da_task_kind k);
/* The answer's length in tokens and the query's keys after the marker. c valid. */
void da_ruler_shape(const da_task_config *c, int *answer_len, int *query_keys);

/* RULER's scoring of episodes, teacher-forced: an episode is right when every
 * one of its answer tokens is (the exact match of string_match_all); the share
 * of answer tokens right is the partial credit reported beside it. */
typedef struct {
    long episodes, right;      /* episodes with an answer, and those with every answer token right */
    long tokens, tokens_right; /* answer tokens, and those right */
} da_ruler_counts;

/* Adds b sequences: targets (b, T) as da_task_sample writes them, pred (b, T)
 * the token answered at each position. */
void da_ruler_count(const int *targets, const int *pred, int b, int T, da_ruler_counts *out);
/* The same with the answers the largest logits, logits (b, T, V) (the first on ties). */
void da_ruler_count_logits(const int *targets, const float *logits, int b, int T, int V, da_ruler_counts *out);
/* A data source's score (da_data_source.score) counting episodes: *total gets
 * b, *right the episodes with every answer token right. */
void da_score_episodes(void *self, const int *targets, const float *logits, int b, int T, int V, long *right,
                       long *total);

/* A task as a data source of the training loop (da_train_source): the
 * stream of da_task_sample, a held-out set of n_held_out sequences fixed by
 * the sweep point (counterfactual: episodes only), and the answer accuracy
 * as its score. A run of seed s trains on the stream of
 * s * 0x9E3779B97F4A7C15 + point, the same for every architecture. */
typedef struct da_task_source da_task_source;
da_status da_task_source_create(da_task_source **out, const da_task_config *t, int point, int n_held_out);
void da_task_source_free(da_task_source *s);
/* The source's interface; s must outlive it. */
da_data_source da_task_source_of(da_task_source *s);
/* Writes dir/task.txt ("key value" lines: what `train --data RUN/task.txt`,
 * new or --resume, rebuilds the source from) and dir/held_out/, the held-out
 * sequences as token shards (train_000000.bin = val_000000.bin) for
 * `eval loss --data RUN/held_out`: the next-token loss at every position. */
da_status da_task_source_save(const da_task_source *s, const char *dir);
/* The source of a task file. */
da_status da_task_source_load(da_task_source **out, const char *path);
/* 1 when path is a task file. */
int da_task_file_is(const char *path);

/* ---------------------------------------------------------------- counterfactual (contextual faithfulness) */

/* Tokens: 0 pad, 1 the query marker Q, entity e in [0, E) is token 2 + e,
 * attribute a in [0, A) is token 2 + E + a. A fact table W maps each entity
 * to an attribute (from facts_seed); the model learns it from memory
 * sequences (`Q e W(e)` triples, no context). An episode is K context pairs
 * `e a` (a = W(e) or, with probability 1/2, a counterfactual a' != W(e)),
 * then queries `Q e ?`: the answer is the context's attribute when e is in
 * the context, W(e) when it is not (docs/tasks.md). */
enum { DA_CF_PAD = 0, DA_CF_QUERY = 1 };
typedef enum { DA_CF_COUNTER = 0, DA_CF_AGREE = 1, DA_CF_ABSENT = 2 } da_cf_condition;

typedef struct {
    int pos;       /* the answer position: the entity token after Q */
    int condition; /* da_cf_condition */
    int entity;    /* entity index */
    int answer;    /* the target token: the context's attribute, or W(e) when absent */
    int memory;    /* the token of W(e) */
} da_cf_query;

/* W(e), an attribute index in [0, A). */
int da_cf_fact(const da_task_config *c, int entity);
int da_cf_entity_token(const da_task_config *c, int e);
int da_cf_attribute_token(const da_task_config *c, int a);
/* Queries per episode: (seq - 2K) / 3, at most K. */
int da_cf_queries_per_episode(const da_task_config *c);
/* One held-out episode (never a memory sequence): tokens, targets, src (the
 * position of the queried context pair's entity, -1 when absent or not an
 * answer) and its queries q (da_cf_queries_per_episode of them, in sequence
 * order). Returns the number of queries. */
int da_cf_episode(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src, da_cf_query *q);

/* Scores by exact match, per condition (index da_cf_condition):
 *   counterfactual: faithful (the context's a'), leak (W(e)), binding error
 *                   (another context pair's attribute), other;
 *   agreeing:       right (W(e), which the context states), binding error, other;
 *   absent:         right (W(e) from memory), binding error (any context attribute), other.
 * A leak takes precedence over a binding error when a distractor happens to
 * carry W(e). */
typedef struct {
    long n[3];       /* queries per condition */
    long right[3];   /* counterfactual: faithful; agreeing and absent: the right answer */
    long leak;       /* counterfactual only */
    long binding[3];
    double lookback[3]; /* mean lookback ratio at the answer positions per condition (attention analysis) */
} da_cf_counts;

/* Adds the outcome of one episode's queries (pred[j]: the token answered at
 * q[j].pos) to out. */
void da_cf_score(const da_task_config *c, const int *tokens, const da_cf_query *q, int n_q, const int *pred,
                 da_cf_counts *out);
/* The whole evaluation of m: `episodes` held-out episodes drawn from seed,
 * argmax answers, counts into out (lookback left 0). */
da_status da_cf_evaluate(da_model *m, const da_task_config *t, int episodes, uint64_t seed, da_cf_counts *out);

/* ---------------------------------------------------------------- in-context classification (icl) */

/* One icl episode: a rule and K demonstrations. The sequence written from
 * it is x y x y ... (the demos in some order), then the query symbol q and
 * its label: positions 2i, 2i + 1 hold demo order[i], position 2K holds q
 * with target label[q], position 2K + 1 holds label[q] (never scored: the
 * model at 2K cannot see it). */
typedef struct {
    int demos;                     /* K */
    int x[DA_ICL_MAX_DEMOS];       /* demo i's input symbol, in [0, symbols), drawn with repeats */
    int label[DA_ICL_MAX_SYMBOLS]; /* the rule: symbol s's label token, in [symbols, symbols + classes) */
} da_icl_episode;

/* A fresh rule (each symbol's class uniform among C) and K demos (symbols
 * uniform, with repeats). c must be a valid icl task. */
void da_icl_episode_sample(const da_task_config *c, da_rng *r, da_icl_episode *e);
/* The distinct symbols of e's demos in order of first appearance: the
 * queries an order evaluation asks; returns their count. */
int da_icl_queries(const da_icl_episode *e, int *symbols);
/* order (k): a uniformly random permutation of 0..k-1. */
void da_icl_order_random(int k, da_rng *r, int *order);
/* order (K): the demos grouped by class, the classes present in a random
 * order, each class's demos in their episode order. */
void da_icl_order_grouped(const da_task_config *c, const da_icl_episode *e, da_rng *r, int *order);
/* order (K): the classes present, in a random order, take turns (one demo
 * each, in episode order, a class leaving when it runs out). */
void da_icl_order_alternating(const da_task_config *c, const da_icl_episode *e, da_rng *r, int *order);
/* The sequence (seq = 2K + 2) of e with its demos in `order` and query
 * symbol q; src (optional) gets at 2K the position of the last demo of q
 * (its label follows it), -1 elsewhere. */
void da_icl_write(const da_icl_episode *e, const int *order, int q, int *tokens, int *targets, int *src);

/* Order robustness of a model on icl (docs/tasks.md): for each of
 * `episodes` held-out episodes, the accuracy over its distinct queries with
 * its demos in `perms` random orders, grouped by class and alternating.
 * Per episode: mean over the random orders, best and worst of them; then
 * every figure is the mean over episodes (margin = best - worst, the gap a
 * fixed set of demonstrations shows between its best and worst order). */
typedef struct {
    int episodes, perms;
    double mean, best, worst, margin; /* over the random orders */
    double grouped, alternating;
} da_icl_order_result;

/* acc: (episodes, perms + 2) accuracies, row e = episode e's random orders,
 * then its grouped and its alternating order. */
void da_icl_order_summary(const double *acc, int episodes, int perms, da_icl_order_result *r);
/* m's accuracy over e's distinct queries with the demos in `order`. */
da_status da_icl_order_accuracy(da_model *m, const da_task_config *t, const da_icl_episode *e, const int *order,
                                double *acc);
/* The whole evaluation: episodes and orders drawn from seed. */
da_status da_icl_order_robustness(da_model *m, const da_task_config *t, int episodes, int perms, uint64_t seed,
                                  da_icl_order_result *r);

/* Writes the built-in training mix (filler text with needle sentences, each
 * document ending in a question and its answer) of about `bytes` bytes. */
da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed);

/* The counterfactual task's training sequence (a memory sequence with
 * probability memory_share, else an episode) and its checks; da_task_sample
 * and da_task_validate dispatch here. */
int da_cf_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);
da_status da_cf_validate(const da_task_config *c);

/* RULER's tasks (tasks_ruler.c): da_task_sample and da_task_validate dispatch
 * here; name: the task's, for the errors. */
int da_ruler_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);
da_status da_ruler_validate(const da_task_config *c, const char *name);

/* A task as a data source (task_source.c): its settings and held-out set. */
struct da_task_source {
    da_task_config task;
    int point;                   /* the sweep point: the stream and the held-out set follow it */
    int n, T, answers;           /* held-out sequences, their length, the answer positions in them */
    int *tokens, *targets, *src; /* (n, T) the held-out set; src as da_task_sample gives it */
    int *scratch;                /* (2, T) a window of the stream that another rank keeps */
};
/* da_task_source_create with the held-out set drawn from seed. */
da_status task_source_new(da_task_source **out, const da_task_config *t, int point, int n_held_out, uint64_t seed);

#endif
