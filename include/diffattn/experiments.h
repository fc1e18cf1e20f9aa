/* diffattn experiments: `compare` (DIFF against the softmax baseline, trained
 * and evaluated alike, with a report), throughput benchmarks, and the PNG
 * figures of reports.
 * Implemented in src/experiments/compare.c, src/experiments/grid.c, src/experiments/tasks.c, src/experiments/task_compare.c,
 * src/experiments/task_source.c, src/experiments/task_report.c, src/experiments/match_params.c, src/experiments/tasks_ruler.c, src/experiments/task_dump.c,
 * src/experiments/task_counterfactual.c, src/experiments/icl_order.c, src/experiments/plot.c,
 * src/experiments/bench.c, src/experiments/bench_generate.c, src/experiments/bench_json.c. */
#ifndef DIFFATTN_EXPERIMENTS_H
#define DIFFATTN_EXPERIMENTS_H

#include "diffattn/eval.h"
#include "diffattn/train.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- grids
 * A study's grid (--grid heads=1,2,4 dim=64,128 lr=1e-3,3e-3): every
 * combination of the axes' values is a cell, the last axis varying fastest;
 * plain compare and compare --task read it alike. */
typedef enum { DA_GRID_HEADS = 0, DA_GRID_DIM, DA_GRID_LAYERS, DA_GRID_LR, DA_GRID_BATCH, DA_GRID_N_KEYS } da_grid_key;
#define DA_GRID_MAX_VALUES 8

typedef struct {
    da_grid_key key;
    int n;
    double values[DA_GRID_MAX_VALUES];
} da_grid_axis;

/* "heads=1,2,4 dim=64,128 lr=1e-3,3e-3" (axes separated by spaces or
 * semicolons; keys heads, dim, layers, lr, batch) into grid (DA_GRID_N_KEYS
 * long) and *n_grid. */
da_status da_grid_parse(const char *spec, da_grid_axis *grid, int *n_grid);

/* How a study runs (experiments/study.c). */
typedef struct {
    const char *out_dir;
    int jobs;    /* 1: the runs one after another in this process; N: N single-thread processes at a time */
    int argc;    /* jobs > 1: the command line (without the program) that names this study; each process */
    char **argv; /* runs it with --run-index K --quiet --threads 1 and dies with the study */
    int quiet;
    int force;  /* replace a study already in out_dir (its runs/ is removed) */
    int resume; /* continue the study in out_dir: runs with a valid result file are kept */
    volatile int *stop; /* non-zero: return DA_INTERRUPTED (the run in training is lost; finished ones are kept) */
} da_study_opts;

/* ---------------------------------------------------------------- compare */

/* DIFF and the softmax baseline trained at equal parameters, tokens, data and
 * seed, then the same evaluations on both, with a side-by-side report
 * (report.md, report.json, figures per cell) in out_dir: a study of the same
 * pipeline as compare --task (cells of a grid, the study scheduler, one
 * report writer). */
#define DA_COMPARE_MAX_ARCHS 8
#define DA_COLUMN_NAME_MAX 48 /* a column token of --archs: "diff:lambda-init=0.5:head-norm=off" */

typedef struct {
    /* out_dir, --jobs, --resume (finished runs are kept, an interrupted one continues from its last checkpoint,
     * and the steps are those the first run was started with), --force; in this process a stop checkpoints the
     * run in training and returns DA_INTERRUPTED */
    da_study_opts study;
    const char *data; /* NULL: the built-in needle mix */
    /* trained and evaluated side by side, in this order (default: da_arch_compare_defaults); each
     * gets a verdict against the baseline when the baseline is among them */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS]; /* > 0: that arch with a sliding window of this many keys ("swa") */
    /* a column with model options: its --archs token ("diff:head-norm=off"), its run folder's and report's
     * name; "" for a plain architecture */
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    int n_archs;
    int swa_window; /* the window of "swa" in --archs */
    long steps;
    double budget_minutes; /* > 0: steps chosen so the whole job fits (overrides steps) */
    int dim, layers, heads, seq, batch;
    /* model and training axes (heads, dim, layers, lr, batch), in the order given: each combination is a cell,
     * whose runs are out_dir/runs/cell<i>_NAME_seedS (without a grid: runs/NAME_seedS) */
    da_grid_axis grid[DA_GRID_N_KEYS];
    int n_grid;
    int seeds;
    int needles, queries;  /* needle prompts: N needles, R asked */
    int n_contexts, contexts[4]; /* needle prompt lengths; 0 contexts: seq/2 - 64 and seq - 64 */
    int steps_given; /* on resume, steps was chosen now: the runs continue to it (else the first run's steps) */
    int match_params; /* 1: each architecture's FFN widened to the largest one's parameters (da_match_params) */
    volatile int *stop; /* when it becomes non-zero: checkpoint the run in training and return DA_INTERRUPTED */
} da_compare_config;

void da_compare_config_default(da_compare_config *c);
/* --archs into c->archs, c->windows and c->columns, as da_task_parse_archs
 * reads it (every da_arch_name, swa with c->swa_window set first, and
 * "arch:flag=value[:...]" columns). */
da_status da_compare_parse_archs(da_compare_config *c, const char *list);
/* --match-params: widens the SwiGLU FFN (ffn_hidden) of each of the n
 * configurations to the width whose parameter count is nearest the largest
 * one's (within 3 dim n_layers / 2 parameters, far inside 1% at any useful
 * width); the largest keeps its own. */
void da_match_params(da_config *cfgs, int n);
/* Writes the built-in training mix (filler text with needle sentences, each
 * document ending in a question and its answer) of about `bytes` bytes. */
da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed);
da_status da_compare(const da_compare_config *c);
/* Run k of da_compare (column k % n_archs, seed (k / n_archs) % seeds, cell
 * k / (n_archs seeds)): trains it, or continues it, and writes its result
 * file; what each process of jobs > 1 does. */
da_status da_compare_run(const da_compare_config *c, int k);

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

/* Zoology's and MAD's defaults, scaled to small models (docs/tasks.md). */
void da_task_config_default(da_task_config *c, da_task_kind kind);
da_status da_task_validate(const da_task_config *c);
const char *da_task_name(da_task_kind k);
int da_task_parse(const char *s, da_task_kind *out); /* 0 ok, -1 unknown */

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

/* ---------------------------------------------------------------- retrieval tasks and studies
 * compare --task mqar|noisy-recall|icl|counterfactual: every architecture from
 * the same initialisation where shapes agree (da_copy_shared_init), on the
 * same generated training stream per seed, scored every eval_every steps on
 * the same held-out sequences (teacher-forced answer accuracy).
 *
 * A study is a grid of cells: the product of the task sweeps (--pairs, --seq,
 * --noise, --demos) and the grid axes (--grid heads=1,2,4 dim=64,128 ...).
 * Each (cell, seed, architecture) is one run, independent of every other:
 * an ordinary training run (da_train_source on da_task_source) in its own
 * folder out_dir/runs/cell<i>_<arch>_seed<s> (model.safetensors,
 * train_state.safetensors, metrics.jsonl with the accuracy per evaluation,
 * task.txt), plus its result file, written atomically when the run ends. So
 * runs can go to separate processes in any order (the results are the same
 * bits), and a killed study continues with the runs that have no valid
 * result file (--resume). */


typedef struct {
    da_study_opts study;
    da_task_config task; /* the kind and the values of every parameter not swept */
    /* trained side by side in this order (default: da_arch_compare_defaults); the first one's
     * initialisation is copied into the others; verdicts are against softmax when it is listed */
    da_arch archs[DA_COMPARE_MAX_ARCHS];
    int windows[DA_COMPARE_MAX_ARCHS]; /* > 0: that arch with a sliding window of this many keys ("swa") */
    /* a column with model options: its --archs token ("diff:head-norm=off"), its name in reports and run
     * files; "" for a plain architecture */
    char columns[DA_COMPARE_MAX_ARCHS][DA_COLUMN_NAME_MAX];
    int n_archs;
    int swa_window;        /* the window of "swa" in --archs */
    int n_pairs, pairs[8]; /* mqar sweep (0: task.pairs) */
    int n_seqs, seqs[8];   /* sweep over sequence lengths (0: task.seq); not icl. With train_seqs: the
                            * evaluation lengths instead (none: the training lengths) */
    /* --train-seq: a length curriculum (not icl): the steps in n_train_seqs equal shares, in order, share i
     * trained at train_seqs[i]; each trained model is then scored at every length of seqs */
    int n_train_seqs, train_seqs[8];
    int n_noises;          /* noisy-recall sweep (0: task.noise) */
    double noises[8];
    int n_demos, demos[8]; /* icl sweep (0: task.demos); seq is 2 demos + 2 */
    da_grid_axis grid[DA_GRID_N_KEYS]; /* model and training axes, in the order given */
    int n_grid;
    int perms, perm_episodes; /* icl order robustness: random orders per episode, held-out episodes */
    int cf_episodes;          /* counterfactual: held-out episodes of the faithfulness evaluation */
    long steps;
    int eval_every, eval_seqs;
    int dim, layers, heads, batch;
    float lr;
    /* every other training setting (optimizer, clipping, bf16, checkpoints); batch, seq, steps, lr, seed and
     * eval_every come from the fields above and the cell; warmup is steps / 10 and min_lr lr / 10 unless given */
    da_train_config train;
    int warmup_given, min_lr_given;
    int match_params; /* 1: each cell's columns at its largest column's parameters (da_match_params) */
    int seeds, seed0; /* seeds seed0, seed0 + 1, ... */
} da_task_compare_config;

void da_task_compare_config_default(da_task_compare_config *c);
/* --archs into c->archs, c->windows and c->columns: every da_arch_name,
 * swa (the softmax model with a sliding window of c->swa_window keys, set
 * first), and an architecture with model options, "arch:flag=value[:...]"
 * (flags head-norm and lambda-init: "diff:head-norm=off",
 * "softmax:head-norm=on", "diff:lambda-init=0.5"). */
da_status da_task_parse_archs(da_task_compare_config *c, const char *list);
/* The whole study (c->study: in this process or in c->study.jobs
 * processes), with progress and an ETA on stderr; then the report: out_dir/report.md, report.json,
 * accuracy.png (accuracy_<cell>.png with several cells), steps_to_90.png, lambda.png (when DIFF is listed),
 * for icl permutation_margin.png, and for a grid of several cells
 * success_<arch>.png and, per architecture against softmax,
 * success_<arch>_vs_softmax.png. */
da_status da_task_compare(const da_task_compare_config *c);

/* --dump-episodes: the held-out episodes of every task point of c (the sets
 * its runs score, eval_seqs each, in sweep order) as JSON lines
 * {"task", "input", "answer", "answer_positions"} to path, atomically.
 * input is the whole sequence, answers included (as the model is trained and
 * scored, teacher-forced); answer_positions[i] is the position whose next
 * token is answer[i], so input[answer_positions[i] + 1] == answer[i]. */
da_status da_task_dump_episodes(const da_task_compare_config *c, const char *path);

/* Trains and evaluates run k of the study (what a --jobs process does) and
 * writes its result file. */
da_status da_task_compare_run(const da_task_compare_config *c, int k);

/* Teacher-forced answer accuracy of m on n sequences of task t drawn from
 * seed; logit_bits > 0: the reference kernel with quantized attention logits. */
da_status da_task_answer_accuracy(da_model *m, const da_task_config *t, int n, uint64_t seed, int logit_bits,
                                  double *acc);
/* The first steps[i] with acc[i] >= threshold; -1 when none. */
long da_steps_to_threshold(const long *steps, const double *acc, int n, double threshold);
/* Copies into dst every tensor of src with dst's name and shape; returns how
 * many were copied. */
int da_copy_shared_init(da_model *dst, const da_model *src);

/* ---------------------------------------------------------------- benchmarks */

typedef struct {
    double ms_min, ms_median, ms_mean; /* per step */
    double tok_per_s;         /* at ms_min: the best of the timed steps */
    double gflops;            /* model FLOPs per step / ms_min */
    double peak_gflops;       /* sgemm n=2048, best of 3, this run */
    double peak_bf16_gflops;  /* bf16 GEMM n=2048, best of 3, this run (bf16 mode only, else 0) */
    double mfu;               /* gflops / the peak of the arithmetic in use (bf16 peak in bf16 mode) */
    double flops_per_token;
    double peak_rss_mb;       /* the process's high-water resident memory (VmHWM) */
    size_t n_params;
    int steps;
} da_bench_result;

/* Times `steps` training steps (zero grads, forward, backward, AdamW) after
 * `warmup` untimed ones, on random tokens, in the context x (kernel level,
 * bf16 matmuls). When x->prof_s is set, the time per phase summed over the
 * timed steps is added to it. */
da_status da_bench_train(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                         const da_exec *x, da_bench_result *r);
/* Times the attention forward + backward of one layer on random q, k, v. */
da_status da_bench_attn(const da_config *c, int B, int T, int warmup, int steps, da_attn_kernel kernel,
                        const da_exec *x, da_bench_result *r);
/* A bench train or attn result as a JSON line: the model's shape, the context x (with its
 * profile per step when x->prof_s is set) and the timings. malloc'd; NULL when out of memory. */
char *da_bench_json(const char *bench, const char *kernel, const da_config *c, int batch, int seq, const da_exec *x,
                    const da_bench_result *r);

/* ---------------------------------------------------------------- figures */

/* PNG figures drawn with cairo, 800 x 500, one color per series (DIFF blue,
 * baseline orange). */
#define DA_PLOT_WIDTH 800
#define DA_PLOT_HEIGHT 500

typedef struct {
    const char *name;
    const double *x, *y; /* n points; NAN y values are skipped */
    int n;
} da_series;

da_status da_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                        const da_series *s, int n_series);
/* The same with a shaded band lo[k][i]..hi[k][i] under series k (e.g. mean
 * ± sd over seeds); lo[k] or hi[k] NULL: no band for that series. */
da_status da_plot_lines_band(const char *path, const char *title, const char *xlabel, const char *ylabel,
                             const da_series *s, const double *const *lo, const double *const *hi, int n_series);

/* values[g][c]: group g (a series, e.g. an architecture), category c. */
da_status da_plot_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                       int n_cat, const char *const *groups, const double *const *values, int n_groups);

/* Attention of a few query rows over a long context, one band per model
 * (the paper's Figure 1): map (rows, cols), weights may be negative (DIFF),
 * with the asked needle [needle_begin, needle_end) and its answer
 * [span_begin, span_end) marked under the band. All bands share one scale. */
typedef struct {
    const char *name;
    const float *map;
    int rows, cols;
    int span_begin, span_end, needle_begin, needle_end;
} da_attention_band;

da_status da_plot_attention_bands(const char *path, const char *title, const da_attention_band *bands, int n_bands);

/* A grid of cells, values (n_rows, n_cols), each printed in its cell with
 * an optional note under it (notes NULL, or "" for none); NAN cells are grey.
 * Sequential (white to blue over [lo, hi]) or diverging (red below 0, blue
 * above, saturated at +-hi). */
da_status da_plot_heatmap(const char *path, const char *title, const char *xlabel, const char *ylabel,
                          const char *const *rows, int n_rows, const char *const *cols, int n_cols,
                          const double *values, const char *const *notes, double lo, double hi, int diverging);


/* ---------------------------------------------------------------- bench generate */

/* `bench generate`: prompt and batch-1 decoding speed of several models,
 * timed interleaved so their ratios share the machine's conditions. */
typedef struct {
    int prompt, gen, reps; /* prompt tokens (one batch), greedy decoding steps, repetitions */
    const char *act;       /* activation mode for every model; NULL: each file's own (f32 for float weights) */
    int kv_int8;
    da_load_opts load; /* how the model files are read */
    int kv_f16; /* 1: an f16 KV cache (llama.cpp's default; not with kv_int8); both 0: f32 */
} da_bench_generate_opts;

typedef struct {
    char weight_type[8], act[16];
    char dots[16];   /* the instruction set of the quantized dot products */
    int kv_int8, kv_f16;
    long file_bytes;
    double best_prompt, best_decode; /* tokens/s, the best repetition */
    double decode_bytes;             /* read per decoded token, at the run's mean decoding context */
} da_bench_generate_result;

/* The machine's copy bandwidth in GB/s (bytes read + bytes written, as
 * STREAM counts them) with the current OpenMP threads: memcpy between two
 * buffers of `bytes` (far above the caches), the best of 5; 0 when the
 * buffers cannot be allocated. */
double da_copy_bandwidth_gbs(size_t bytes);

/* Times the n model files in paths; res: (n). */
da_status da_bench_generate(const char *const *paths, int n, const da_bench_generate_opts *o,
                            da_bench_generate_result *res);
/* One model's result as a JSON line (bench generate --json): speeds against the first model's, the
 * machine's load and copy bandwidth (0: not measured). malloc'd; NULL when out of memory. */
char *da_bench_generate_json(const char *path, const da_bench_generate_opts *o, const da_bench_generate_result *r,
                             const da_bench_generate_result *first, double loadavg, double bandwidth_gbs);

#ifdef __cplusplus
}
#endif
#endif
