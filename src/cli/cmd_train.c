/* diffattn train: flags, progress display, Ctrl-C handling. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "diffattn/data.h"
#include "tasks/tasks.h"
#include "diffattn/generate.h"

static void format_duration(char *buf, size_t n, double s) {
    if (!(s >= 0) || s > 1e7) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)s / 60, (int)s % 60);
    else snprintf(buf, n, "%dh%02dm", (int)s / 3600, ((int)s % 3600) / 60);
}

/* One line, rewritten in place on a terminal, appended otherwise. */
static void on_log(void *ctx, const da_train_log *g) {
    int tty = *(int *)ctx;
    char eta[32], line[256];
    if (g->note) fprintf(stderr, "%s\n", g->note);
    format_duration(eta, sizeof eta, g->eta_s);
    int n = snprintf(line, sizeof line, "step %ld/%ld", g->step, g->steps);
    if (g->train_loss == g->train_loss) n += snprintf(line + n, sizeof line - n, " | loss %.4f", (double)g->train_loss);
    if (g->val_loss == g->val_loss) n += snprintf(line + n, sizeof line - n, " | val %.4f", (double)g->val_loss);
    if (g->accuracy == g->accuracy) n += snprintf(line + n, sizeof line - n, " | accuracy %.3f", g->accuracy);
    if (g->step > 0)
        snprintf(line + n, sizeof line - n, " | lr %.2e | %.0f tok/s | ETA %s", (double)g->lr, (double)g->tok_per_s,
                 eta);
    if (tty) fprintf(stderr, "\r\033[K%s%s", line, g->val_loss == g->val_loss || g->step == g->steps ? "\n" : "");
    else fprintf(stderr, "%s\n", line);
    fflush(stderr);
}

/* Under mpirun: reports an error once (from the rank that met it first),
 * ends the whole job when the ranks can no longer reach each other, and
 * leaves MPI before returning. */
static int finish(int rc, da_status st) {
    if (st.code == DA_DIST_FAILED) {
        fprintf(stderr, "diffattn: %s; ending the job (the last checkpoint is intact: rerun with --resume)\n", st.msg);
        da_dist_abort(1);
    }
    if (st.code && st.code != DA_DIST_PEER_FAILED && st.code != DA_INTERRUPTED) {
        char named[1024];
        cli_name_flags(named, sizeof named, st.msg);
        if (da_dist_size() > 1) fprintf(stderr, "diffattn: rank %d: %s\n", da_dist_rank(), named);
        else cli_fail(named);
    }
    da_dist_finalize();
    return rc;
}

static int train_main(int argc, char **argv);

/* The vocabulary the data needs: a task's, its shards', or 256 for text;
 * *seq: a task's sequence length, else unchanged. */
static int data_vocab_size(const char *data, int *seq) {
    da_task_source *task;
    if (!da_task_file_is(data) || da_task_source_load(&task, data).code) return da_data_vocab_size(data);
    const da_data_source src = da_task_source_of(task);
    *seq = src.seq;
    da_task_source_free(task);
    return src.vocab_size;
}

int cmd_train(int argc, char **argv) {
    da_status st = da_dist_init();
    if (st.code) return cli_fail(st.msg);
    int rc = train_main(argc, argv);
    da_dist_finalize();
    return rc;
}

/* The flags given now, for da_train_resume_config. --seq is the model's
 * context on a new run and the training window on either, so on resume it
 * only marks the window. */
static void resume_given(const cli_opt *opts, int n, da_train_config *tc, int seq, unsigned char *model_given,
                         unsigned char *train_given) {
    cli_fields_given(da_config_fields, DA_CONFIG_N_FIELDS, opts, n, model_given);
    cli_fields_given(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, opts, n, train_given);
    const int ctx = (int)(da_fields_find(da_config_fields, DA_CONFIG_N_FIELDS, "max_seq_len") - da_config_fields);
    const int win = (int)(da_fields_find(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, "seq") -
                          da_train_config_fields);
    if (model_given[ctx]) {
        model_given[ctx] = 0;
        train_given[win] = 1;
        tc->seq = seq;
    }
}

/* train's flags that are not fields of the model or training configuration. */
typedef struct {
    const char *data, *out, *init, *init_from; /* init_from: --init-from, the same as --init */
    const char *distract, *rates;
    int resume, force, span;
    long stop_at;
    float dist_timeout;
} train_flags;

enum { TRAIN_N_OPTS = CLI_N_MODEL_OPTS + DA_TRAIN_CONFIG_N_FIELDS + 11 };

/* The options of train, bound to mf, tc and f; returns how many. */
static int train_opts(cli_model_flags *mf, da_train_config *tc, train_flags *f, cli_opt *opts) {
    int n = 0;
    *f = (train_flags){NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, 32, 0, 60};
    cli_model_opts(mf, opts);
    n += CLI_N_MODEL_OPTS;
    opts[n++] = (cli_opt){"data", OPT_STR, &f->data, "text file or folder of text files (bytes are tokens), a folder "
                                                     "of token shards from diffattn prepare, or a synthetic task's "
                                                     "task.txt (a compare --task run folder holds one)", 0};
    opts[n++] = (cli_opt){"out", OPT_STR, &f->out, "run folder: model.safetensors, train_state.safetensors, "
                                                   "metrics.jsonl", 0};
    n += cli_field_opts(da_train_config_fields, DA_TRAIN_CONFIG_N_FIELDS, tc, opts + n, NULL);
    opts[n++] = (cli_opt){"init", OPT_STR, &f->init, "start from this model (diffattn .safetensors, a Hugging Face "
                          "folder, a GGUF in f32, f16 or bf16; quantized ones are refused): its weights, configuration "
                          "and tokenizer, with a fresh optimizer and schedule; model flags are refused except --seq "
                          "(the training window)", 0};
    opts[n++] = (cli_opt){"init-from", OPT_STR, &f->init_from, "the same as --init", 0};
    opts[n++] = (cli_opt){"resume", OPT_FLAG, &f->resume, "continue the run in --out exactly where its last checkpoint "
                                                          "left it", 0};
    opts[n++] = (cli_opt){"force", OPT_FLAG, &f->force, "start a new run in an --out that holds one, replacing it", 0};
    opts[n++] = (cli_opt){"stop-at", OPT_LONG, &f->stop_at, "end this invocation after this step with a checkpoint, as "
                                                            "Ctrl-C would (0 = run to --steps)", 0};
    opts[n++] = (cli_opt){"dist-timeout", OPT_FLOAT, &f->dist_timeout,
                          "under mpirun: seconds a rank waits for the others in a collective before the job ends "
                          "with an error (a dead or hung rank); 0: Open MPI's blocking collectives, no deadline", 0};
    opts[n++] = (cli_opt){"distract", OPT_STR, &f->distract, "text (or token shards) whose spans are inserted into "
                          "every window of --data; the loss counts the target text only", 0};
    opts[n++] = (cli_opt){"distract-rate", OPT_STR, &f->rates, "share of each window's tokens that are distractors, "
                          "in [0, 0.9], drawn per window from a list like 0,0.3,0.6", 0};
    opts[n++] = (cli_opt){"distract-span", OPT_INT, &f->span, "distractor tokens per inserted span", 0};
    return n;
}

/* --distract's flags into dc; 0 when they hold, else the message is printed and 1 returned. */
static int distract_flags(const train_flags *f, const cli_opt *opts, int n, da_distract_config *dc) {
    if (!f->distract) {
        if (cli_was_set(opts, n, "distract-rate") || cli_was_set(opts, n, "distract-span"))
            return cli_fail("train: --distract-rate and --distract-span need --distract FILE");
        return 0;
    }
    if (da_task_file_is(f->data)) return cli_fail("train: --distract inserts spans into text or token shards, not a task");
    if (!f->rates) return cli_fail("train: --distract needs --distract-rate, like 0,0.3,0.6");
    da_status st = da_distract_parse_rates(dc, f->rates);
    if (st.code) return cli_fail(st.msg);
    if (f->span < 1) return cli_fail("train: --distract-span must be positive");
    dc->span = f->span;
    dc->seed = 1; /* the held-out windows: the same for every run */
    return 0;
}

/* --init's model brings its shape and settings: a model flag other than --seq
 * (the training window) is refused, named. 0 when none is given. */
static int refuse_model_flags(const cli_opt *opts, const char *init) {
    for (int i = 0; i < CLI_N_MODEL_OPTS; i++)
        if (opts[i].set && strcmp(opts[i].name, "seq")) {
            fprintf(stderr, "diffattn: train: --%s cannot be set with --init: the model's shape and settings come "
                            "from %s (only --seq, the training window, and training flags apply)\n",
                    opts[i].name, init);
            return 1;
        }
    return 0;
}

/* The model and training configurations of this invocation: a resumed run's
 * own, an --init model's, or the flags'. -1 to go on, else the exit
 * code (the error is printed). */
static int train_configs(cli_model_flags *mf, da_train_config *tc, train_flags *f, const cli_opt *opts, int n,
                         da_config *cfg) {
    da_status st;
    if (f->init && f->init_from) return cli_fail("--init and --init-from name the same thing: give one");
    if (f->init_from) f->init = f->init_from;
    if (f->resume) {
        unsigned char model_given[DA_CONFIG_N_FIELDS], train_given[DA_TRAIN_CONFIG_N_FIELDS];
        resume_given(opts, n, tc, mf->cfg.max_seq_len, model_given, train_given);
        long step;
        if ((st = da_train_resume_config(f->out, &mf->cfg, model_given, train_given, cfg, tc, &step)).code)
            return finish(1, st);
        if (da_dist_rank() == 0) fprintf(stderr, "resuming %s at step %ld of %ld\n", f->out, step, tc->steps);
    } else if (f->init) {
        if (refuse_model_flags(opts, f->init)) return 1;
        memset(cfg, 0, sizeof *cfg); /* unused: the model comes from init */
        tc->seq = mf->cfg.max_seq_len;
    } else {
        /* token shards bring their tokenizer's vocabulary, a task its vocabulary and length */
        int seq = mf->cfg.max_seq_len;
        const int vocab = data_vocab_size(f->data, &seq);
        if (!cli_was_set(opts, n, "vocab")) mf->cfg.vocab_size = vocab;
        if (!cli_was_set(opts, n, "seq")) mf->cfg.max_seq_len = seq;
        if ((st = cli_model_config(mf, opts, n, cfg)).code) return cli_fail(st.msg);
        tc->seq = cfg->max_seq_len;
    }
    if ((st = da_train_config_validate(tc)).code) return cli_fail_fields(st.msg);
    if (f->resume && f->force) return cli_fail("--resume and --force: choose one (continue the run, or replace it)");
    return -1;
}

/* The run on its data (text, shards or a task file) and its outcome. */
static int train_run(const da_config *cfg, const da_train_config *tc, const train_flags *f,
                     const da_distract_config *dc) {
    const int rank0 = da_dist_rank() == 0;
    int tty = isatty(2);
    /* under mpirun only rank 0 reports progress */
    volatile int *stop = cli_catch_stop_signals();
    da_train_hooks hooks = {.on_log = rank0 ? on_log : NULL, .ctx = &tty, .stop = stop, .stop_at_step = f->stop_at,
                            .init_from = f->resume ? NULL : f->init, /* a resumed run's model is in its checkpoint */
                            .load_init = da_model_load_float, .load_opts = cli_load_opts(),
                            .distract = f->distract, .distract_cfg = dc};
    const int mode = f->resume ? DA_RUN_RESUME : f->force ? DA_RUN_OVERWRITE : DA_RUN_NEW;
    da_task_source *task = NULL;
    da_status st;
    if (da_task_file_is(f->data) && (st = da_task_source_load(&task, f->data)).code) return finish(1, st);
    if (task) {
        const da_data_source src = da_task_source_of(task);
        st = da_train_source(cfg, tc, &src, f->out, mode, &hooks);
        da_task_source_free(task);
    } else {
        st = da_train(cfg, tc, f->data, f->out, mode, &hooks);
    }
    if (st.code == DA_RUN_EXISTS) {
        if (rank0) fprintf(stderr, "diffattn: %s (--resume, or --force)\n", st.msg);
        return finish(1, da_ok());
    }
    if (st.code == DA_INTERRUPTED) {
        if (rank0) fprintf(stderr, "%sdiffattn: %s\n", tty ? "\n" : "", st.msg);
        return finish(*stop ? 130 : 0, st); /* --stop-at is a normal end */
    }
    if (st.code) return finish(1, st);
    if (rank0) fprintf(stderr, "done: %s/model.safetensors\n", f->out);
    return finish(0, st);
}

static int train_main(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_default(&mf);
    da_train_config tc;
    da_train_config_default(&tc);
    train_flags f;
    cli_opt opts[TRAIN_N_OPTS];
    const int n = train_opts(&mf, &tc, &f, opts);
    const char *req[] = {"data", "out", NULL};
    int rc = cli_parse("train",
                       "Trains a DIFF Transformer (or the softmax baseline) on byte-level text, token shards or a "
                       "synthetic task with AdamW,\nwarmup and cosine decay. Ctrl-C saves a checkpoint and exits; "
                       "--resume continues it. Threads: OMP_NUM_THREADS.\nData parallel: mpirun -np P diffattn train "
                       "... trains one model on P processes;\n--batch stays the global batch, so the same command is "
                       "the same run on any P.",
                       argc, argv, opts, n, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (!(f.dist_timeout >= 0)) return cli_fail("--dist-timeout must be 0 or a positive number of seconds");
    da_dist_set_timeout(f.dist_timeout);
    da_config cfg;
    da_distract_config dc = {0};
    if (distract_flags(&f, opts, n, &dc)) return 1;
    if ((rc = train_configs(&mf, &tc, &f, opts, n, &cfg)) >= 0) return rc;
    return train_run(&cfg, &tc, &f, &dc);
}
