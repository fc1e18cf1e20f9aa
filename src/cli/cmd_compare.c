/* diffattn compare: architectures trained and evaluated alike (the byte-level
 * needle comparison, and compare --task on the synthetic tasks and studies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/formats.h"
#include "experiments/compare.h"

/* The end of a comparison: its error (with the flags that apply to a folder
 * holding one), an interruption (exit 130), or its report.md on standard output. */
static int compare_finish(da_status st, const char *out_dir, const char *exists_hint) {
    if (st.code == DA_RUN_EXISTS) {
        fprintf(stderr, "diffattn: %s (%s)\n", st.msg, exists_hint);
        return 1;
    }
    if (st.code == DA_INTERRUPTED) {
        fprintf(stderr, "diffattn compare: %s\n", st.msg);
        return 130;
    }
    if (st.code) return cli_fail(st.msg);
    char path[4200], line[8192];
    snprintf(path, sizeof path, "%s/report.md", out_dir);
    FILE *fp = da_fopen_regular(path, NULL);
    while (fp && fgets(line, sizeof line, fp)) fputs(line, stdout);
    if (fp) fclose(fp);
    return 0;
}

/* The flags every kind of compare takes (its da_study_shape) that are not
 * fields of the shape. */
typedef struct {
    const char *task, *archs, *grid;
    int run_index;
    char def_archs[128], archs_help[256];
} shape_flags;

/* The options every kind of compare shares, bound to s and f; the kind's
 * --task, --out and --resume help. Returns how many. */
static int shape_opts(da_study_shape *s, shape_flags *f, const char *task_help, const char *out_help,
                      const char *resume_help, cli_opt *opts) {
    char all[128];
    da_arch_names_default(f->def_archs, sizeof f->def_archs, ",");
    snprintf(f->archs_help, sizeof f->archs_help, "comma-separated architectures trained side by side: %s, swa, or "
             "arch:flag=value columns", da_arch_names_all(all, sizeof all, ", "));
    f->archs = f->def_archs, f->grid = NULL, f->run_index = -1;
    const cli_opt table[] = {
        {"task", OPT_STR, &f->task, task_help, 0},
        {"out", OPT_STR, &s->study.out_dir, out_help, 0},
        {"archs", OPT_STR, &f->archs, f->archs_help, 0},
        {"swa-window", OPT_INT, &s->swa_window, "swa: softmax attention over the last W keys only", 0},
        {"match-params", OPT_FLAG, &s->match_params, "widen each column's FFN to the largest column's parameters "
                                                     "(within 1%; the report lists each column's parameters)", 0},
        {"grid", OPT_STR, &f->grid, "a study: model and training axes, e.g. --grid heads=1,2,4 dim=64,128 lr=1e-3,3e-3 "
                                 "(heads, dim, layers, lr, batch; every combination is a cell)", 0},
        {"steps", OPT_LONG, &s->steps, "training steps per model", 0},
        {"seeds", OPT_INT, &s->seeds, "seeds per column and cell (mean and spread are reported)", 0},
        {"dim", OPT_INT, &s->dim, "model width", 0},
        {"layers", OPT_INT, &s->layers, "blocks", 0},
        {"heads", OPT_INT, &s->heads, "DIFF heads (the baseline gets twice as many, for equal parameters)", 0},
        {"batch", OPT_INT, &s->batch, "sequences per step", 0},
        {"jobs", OPT_INT, &s->study.jobs, "runs at a time, each a process of one thread (1: in this process, --threads apply)", 0},
        {"run-index", OPT_INT, &f->run_index, "run only run K of the study and write its result file (what --jobs starts)", 0},
        {"quiet", OPT_FLAG, &s->study.quiet, "no progress display", 0},
        {"resume", OPT_FLAG, &s->study.resume, resume_help, 0},
        {"force", OPT_FLAG, &s->study.force, "replace a comparison already in --out", 0},
    };
    memcpy(opts, table, sizeof table);
    return (int)(sizeof table / sizeof table[0]);
}

/* The parsed shared flags into s; 0, or 1 after an error line. */
static int shape_apply(da_study_shape *s, const shape_flags *f) {
    da_status st = da_study_parse_archs(s, f->archs);
    if (!st.code && f->grid) st = da_grid_parse(f->grid, s->grid, &s->n_grid);
    return st.code ? cli_fail(st.msg) : 0;
}

/* One run of a study, as --jobs starts it (--run-index K): 130 when stopped. */
static int run_one_finish(da_status st) {
    if (st.code == DA_INTERRUPTED) return 130;
    return st.code ? cli_fail(st.msg) : 0;
}

/* train's fields that compare --task takes as train does: the others are the
 * study's own flags (--batch, --steps, --lr, --eval-every, --seed), or do not
 * apply to a task (the held-out set is --eval-seqs; no mpirun). */
static int task_train_opts(da_train_config *tc, cli_opt *opts) {
    static const char *const skip[] = {"batch", "steps", "lr", "eval-every", "seed", "eval-batches", "val-fraction",
                                       "deterministic", "zero"};
    cli_opt all[DA_TRAIN_CONFIG_N_FIELDS];
    const int n = cli_field_opts(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, tc, all, NULL);
    int k = 0;
    for (int i = 0; i < n; i++) {
        int keep = 1;
        for (size_t j = 0; j < sizeof skip / sizeof skip[0]; j++) keep &= strcmp(all[i].name, skip[j]) != 0;
        if (keep) opts[k++] = all[i];
    }
    return k;
}

/* The flags of compare --task that are not fields of its configuration. */
typedef struct {
    shape_flags shape;
    const char *pairs, *seqs, *train_seqs, *noises, *demos, *depths, *dump;
    float alpha, memory_share, cw_ratio;
} task_flags;

/* The options of RULER's tasks (niah*, vt, cwe), bound to c and f; returns how many. */
static int ruler_opts(da_task_compare_config *c, task_flags *f, cli_opt *opts) {
    f->cw_ratio = (float)c->task.cw_ratio;
    const cli_opt table[] = {
        {"value-len", OPT_INT, &c->task.value_len, "niah*: value tokens per needle (the answer per key)", 0},
        {"needles", OPT_INT, &c->task.needles, "niah-multikey: needles, one asked; niah-multivalue: values of the one "
                                               "key; niah-multiquery: keys asked; cwe: common words asked", 0},
        {"depths", OPT_STR, &f->depths, "niah*, vt: needle depths (shares of the haystack before a needle), each "
                                        "needle's drawn from the list, like 0,0.5,1 (default: uniform in [0, 1])", 0},
        {"interleave", OPT_FLAG, &c->task.interleave, "niah-multiquery: each asked key is followed by its answer "
                                                      "(Q k1 v1 k2 v2 ..., MQAR's form), not all keys then all answers", 0},
        {"hops", OPT_INT, &c->task.hops, "vt: assignments after the first in each chain (hops + 1 variables asked)", 0},
        {"cw-ratio", OPT_FLOAT, &f->cw_ratio, "cwe: a common word is about this many times as frequent as the others "
                                              "(>= 2)", 0},
        {"dump-episodes", OPT_STR, &f->dump, "write the held-out episodes of every sweep point as JSON lines "
                                             "{task, input, answer, answer_positions} to FILE, and train nothing", 0},
    };
    memcpy(opts, table, sizeof table);
    return (int)(sizeof table / sizeof table[0]);
}

/* The options of compare --task, bound to c and f; returns how many. */
static int task_opts(da_task_compare_config *c, task_flags *f, cli_opt *opts) {
    memset(f, 0, sizeof *f);
    f->alpha = (float)c->task.alpha, f->memory_share = (float)c->task.memory_share;
    int n = shape_opts(&c->shape, &f->shape,
                       "mqar | noisy-recall | icl | counterfactual | niah | niah-multikey | niah-multivalue "
                       "| niah-multiquery | vt | cwe | needle | text (see docs/tasks.md)",
                       "folder for report.md, report.json, the figures and runs/ (one run folder per run)",
                       "continue the study in --out (same flags): runs with a valid result file are kept, the others "
                       "are done again", opts);
    const cli_opt table[] = {
        {"pairs", OPT_STR, &f->pairs, "mqar: key-value pairs, or a list to sweep (4,8,16)", 0},
        {"seq", OPT_STR, &f->seqs, "tokens per sequence, or a list to sweep (64,128,256); icl: 2 demos + 2; with "
                                   "--train-seq: the lengths each trained model is evaluated at", 0},
        {"train-seq", OPT_STR, &f->train_seqs, "a length curriculum: train every model at L0, then L1, ... (equal "
                                               "step shares, in order), e.g. 256,512", 0},
        {"noise", OPT_STR, &f->noises, "noisy-recall: share of noise slots; niah*, vt: share of the haystack that is "
                                       "distractors; or a list to sweep (0,0.2,0.6)", 0},
        {"demos", OPT_STR, &f->demos, "icl: labelled demonstrations per sequence, or a list to sweep (4,8,16)", 0},
        {"classes", OPT_INT, &c->task.classes, "icl: class labels", 0},
        {"symbols", OPT_INT, &c->task.symbols, "icl: input symbols, each mapped to a random class per sequence", 0},
        {"perms", OPT_INT, &c->perms, "icl: random orders of each held-out episode's demos", 0},
        {"perm-episodes", OPT_INT, &c->perm_episodes, "icl: held-out episodes of the order evaluation", 0},
        {"entities", OPT_INT, &c->task.entities, "counterfactual: entities in the fact table", 0},
        {"attributes", OPT_INT, &c->task.attributes, "counterfactual: attributes an entity can have", 0},
        {"context-pairs", OPT_INT, &c->task.context_pairs, "counterfactual: (entity, attribute) pairs before the queries", 0},
        {"memory-share", OPT_FLOAT, &f->memory_share, "counterfactual: share of training sequences stating facts, no context", 0},
        {"cf-episodes", OPT_INT, &c->cf_episodes, "counterfactual: held-out episodes of the faithfulness evaluation", 0},
        {"vocab", OPT_INT, &c->task.vocab, "task and model vocabulary (counterfactual: 2 + entities + attributes)", 0},
        {"alpha", OPT_FLOAT, &f->alpha, "mqar: power-law exponent of the query gaps (Zoology's power_a)", 0},
        {"noise-vocab", OPT_INT, &c->task.noise_vocab, "noisy-recall: tokens in the noise vocabulary", 0},
        {"eval-every", OPT_INT, &c->eval_every, "steps between held-out accuracy evaluations", 0},
        {"eval-seqs", OPT_INT, &c->eval_seqs, "held-out evaluation sequences (the same for every model)", 0},
        {"seed", OPT_INT, &c->seed0, "first seed", 0},
        {"lr", OPT_FLOAT, &c->lr, "peak learning rate (warmup 10% and cosine to a tenth unless --warmup, --min-lr)", 0},
    };
    memcpy(opts + n, table, sizeof table);
    n += (int)(sizeof table / sizeof table[0]);
    const int r = ruler_opts(c, f, opts + n);
    return n + r + task_train_opts(&c->train, opts + n + r);
}

/* The parsed flags into c; 0, or 1 after an error line. */
static int task_apply(da_task_compare_config *c, const task_flags *f, const cli_opt *opts, int n_opts) {
    c->task.alpha = f->alpha, c->task.memory_share = f->memory_share, c->task.cw_ratio = f->cw_ratio;
    c->warmup_given = cli_was_set(opts, n_opts, "warmup"), c->min_lr_given = cli_was_set(opts, n_opts, "min-lr");
    if (c->task.kind == DA_TASK_COUNTERFACTUAL) { /* the vocabulary and length follow the table and the pairs unless given */
        if (!cli_was_set(opts, n_opts, "vocab")) c->task.vocab = 2 + c->task.entities + c->task.attributes;
        if (!f->seqs) c->task.seq = 5 * c->task.context_pairs;
    }
    if (f->pairs && cli_parse_ints("pairs", f->pairs, c->pairs, 8, &c->n_pairs, 1, 512, "counts", "4,8,16")) return 1;
    if (f->seqs && cli_parse_ints("seq", f->seqs, c->seqs, 8, &c->n_seqs, 5, 1 << 16, "lengths", "64,128,256"))
        return 1;
    if (f->train_seqs && cli_parse_ints("train-seq", f->train_seqs, c->train_seqs, 8, &c->n_train_seqs, 5, 1 << 16,
                                        "lengths", "256,512"))
        return 1;
    if (f->noises && cli_parse_doubles("noise", f->noises, c->noises, 8, &c->n_noises, 0, 0.99, "shares", "0,0.2,0.6"))
        return 1;
    if (f->depths && cli_parse_doubles("depths", f->depths, c->task.depths, DA_TASK_MAX_DEPTHS, &c->task.n_depths, 0,
                                       1, "shares", "0,0.5,1"))
        return 1;
    if (f->demos &&
        cli_parse_ints("demos", f->demos, c->demos, 8, &c->n_demos, 1, DA_ICL_MAX_DEMOS, "counts", "4,8,16"))
        return 1;
    return shape_apply(&c->shape, &f->shape);
}

/* compare --task K (a synthetic task of da_task_parse): the retrieval comparison, its sweeps and grids. */
static int cmd_compare_task(int argc, char **argv, da_task_kind kind) {
    static const char *const out[DA_TASK_N_KINDS] = {
        "runs/compare-mqar", "runs/compare-noisy-recall", "runs/compare-icl", "runs/compare-counterfactual",
        "runs/compare-niah", "runs/compare-niah-multikey", "runs/compare-niah-multivalue",
        "runs/compare-niah-multiquery", "runs/compare-vt", "runs/compare-cwe"};
    da_task_compare_config c;
    da_task_compare_config_default(&c);
    da_task_config_default(&c.task, kind);
    c.shape.study.out_dir = out[kind];
    task_flags f;
    cli_opt opts[80];
    const int n_opts = task_opts(&c, &f, opts);
    int rc = cli_parse("compare",
                       "Trains every architecture on a synthetic task from the same initialisation and data stream, "
                       "scores\nheld-out answer accuracy during training, then the attention, outlier and "
                       "quantized-logit analyses (icl: accuracy under reordered demonstrations;\ncounterfactual: "
                       "faithful, leak and binding error); over a grid of shapes (--grid) and seeds, the rate of seeds "
                       "that learn\nthe task with its interval and the verdict against softmax; writes report.md, "
                       "report.json and PNG figures.",
                       argc, argv, opts, n_opts, NULL);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (task_apply(&c, &f, opts, n_opts)) return 1;
    if (f.dump) {
        da_status st = da_task_dump_episodes(&c, f.dump);
        return st.code ? cli_fail(st.msg) : 0;
    }
    c.shape.study.stop = cli_catch_stop_signals();
    c.shape.study.argc = argc, c.shape.study.argv = argv;
    if (f.shape.run_index >= 0) return run_one_finish(da_task_compare_run(&c, f.shape.run_index));
    return compare_finish(da_task_compare(&c), c.shape.study.out_dir, "--resume continues it, --force replaces it");
}

/* "--grid heads=1,2 dim=64,128" -> "--grid" "heads=1,2 dim=64,128": the axes
 * after --grid, up to the next flag, are one value. Returns the new argc;
 * joined is the storage of the value. */
static int join_grid_axes(int argc, char **argv, char *joined, size_t n) {
    int out = 0;
    for (int i = 0; i < argc; i++) {
        argv[out++] = argv[i];
        if (strcmp(argv[i], "--grid") || i + 1 >= argc) continue;
        size_t len = 0;
        joined[0] = 0;
        while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) {
            len += (size_t)snprintf(joined + len, len < n ? n - len : 0, "%s%s", len ? " " : "", argv[++i]);
            if (len >= n) len = n - 1;
        }
        argv[out++] = joined;
    }
    argv[out] = NULL;
    return out;
}

/* The flags of plain compare that are not fields of its configuration. */
typedef struct {
    shape_flags shape;
    const char *contexts;
    float budget;
} text_flags;

/* The options of plain compare, bound to c and f; returns how many. */
static int text_opts(da_compare_config *c, text_flags *f, cli_opt *opts) {
    f->contexts = "auto", f->budget = 0;
    int n = shape_opts(&c->shape, &f->shape,
                       "mqar | noisy-recall | icl | counterfactual | niah* | vt | cwe (synthetic tasks: see compare "
                       "--task mqar --help) | needle (the built-in needle mix) | text (--data)",
                       "folder for runs/ (one run folder per run), report.md, report.json and the figures",
                       "continue an interrupted compare in --out (same flags): runs with a valid result file are kept, "
                       "an interrupted one continues from its checkpoint; a new --steps continues every run to it",
                       opts);
    const cli_opt table[] = {
        {"data", OPT_STR, &c->data, "training text or shards (default: the built-in needle mix)", 0},
        {"budget-minutes", OPT_FLOAT, &f->budget,
         "choose --steps so the whole job takes about this long: timed steps and a probe evaluation per arch "
         "(0: use --steps)", 0},
        {"seq", OPT_INT, &c->seq, "training context length", 0},
        {"needles", OPT_INT, &c->needles, "needle sentences per evaluation prompt (1..16)", 0},
        {"queries", OPT_INT, &c->queries, "needles asked for per prompt", 0},
        {"needle-context", OPT_STR, &f->contexts, "comma-separated needle prompt lengths in bytes, each at most seq - 64 "
                                                 "(auto: seq/2 - 64 and seq - 64)", 0},
    };
    memcpy(opts + n, table, sizeof table);
    return n + (int)(sizeof table / sizeof table[0]);
}

/* The parsed flags into c; 0, or 1 after an error line. */
static int text_apply(da_compare_config *c, const text_flags *f, const cli_opt *opts, int n_opts) {
    if (f->budget < 0 || (f->budget > 0 && cli_was_set(opts, n_opts, "steps")))
        return cli_fail("--budget-minutes must be positive, and chooses the steps itself: drop --steps");
    c->budget_minutes = f->budget;
    const char *task = f->shape.task;
    if (task && !strcmp(task, "text") != (c->data != NULL))
        return cli_fail("--task text trains on --data; --task needle on the built-in mix (drop --data)");
    if (shape_apply(&c->shape, &f->shape)) return 1;
    if (strcmp(f->contexts, "auto") && cli_parse_ints("needle-context", f->contexts, c->contexts, 4, &c->n_contexts,
                                                      128, 1 << 20, "lengths", "960,1984"))
        return 1;
    c->steps_given = cli_was_set(opts, n_opts, "steps");
    return 0;
}

/* compare (--task needle or text): the byte-level comparison. */
static int cmd_compare_text(int argc, char **argv, const char *task) {
    da_compare_config c;
    da_compare_config_default(&c);
    text_flags f = {.shape.task = task};
    cli_opt opts[32];
    const int n_opts = text_opts(&c, &f, opts);
    int rc = cli_parse("compare",
                       "Trains the architectures of --archs at equal tokens, data and seed (DIFF and the softmax "
                       "baseline at equal\nparameters), runs the same evaluations on each (validation loss, needle "
                       "retrieval, attention on the answer,\noutliers, quantized logits) and writes report.md, "
                       "report.json and PNG figures.",
                       argc, argv, opts, n_opts, NULL);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (text_apply(&c, &f, opts, n_opts)) return 1;
    /* Ctrl-C: the run in training saves a checkpoint, and --resume continues */
    c.shape.study.stop = cli_catch_stop_signals();
    c.shape.study.argc = argc, c.shape.study.argv = argv;
    if (f.shape.run_index >= 0) return run_one_finish(da_compare_run(&c, f.shape.run_index));
    return compare_finish(da_compare(&c), c.shape.study.out_dir, "--resume, or --force");
}

int cmd_compare(int argc, char **argv) {
    static char grid_axes[1024];
    argc = join_grid_axes(argc, argv, grid_axes, sizeof grid_axes);
    const char *task = NULL;
    for (int i = 1; i < argc; i++) /* the task decides the flag table */
        if (!strncmp(argv[i], "--task", 6)) task = argv[i][6] == '=' ? argv[i] + 7 : i + 1 < argc ? argv[i + 1] : "";
    da_task_kind kind;
    if (task && !da_task_parse(task, &kind)) return cmd_compare_task(argc, argv, kind);
    if (task && strcmp(task, "needle") && strcmp(task, "text"))
        return cli_fail("--task: expected mqar, noisy-recall, icl, counterfactual, niah, niah-multikey, niah-multivalue, "
                        "niah-multiquery, vt, cwe, needle or text");
    return cmd_compare_text(argc, argv, task);
}
