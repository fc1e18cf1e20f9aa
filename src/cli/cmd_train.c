/* diffattn train: flags, progress display, Ctrl-C handling. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "data/text_data.h"
#include "parallel/dist.h"

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
        if (da_dist_size() > 1) fprintf(stderr, "diffattn: rank %d: %s\n", da_dist_rank(), st.msg);
        else cli_fail(st.msg);
    }
    da_dist_finalize();
    return rc;
}

static int train_main(int argc, char **argv);

int cmd_train(int argc, char **argv) {
    da_status st = da_dist_init();
    if (st.code) return cli_fail(st.msg);
    int rc = train_main(argc, argv);
    da_dist_finalize();
    return rc;
}

static int train_main(int argc, char **argv) {
    cli_model_flags mf;
    cli_model_flags_default(&mf);
    da_train_config tc;
    da_train_config_default(&tc);
    const char *data = NULL, *out = NULL;
    int resume = 0;
    long stop_at = 0;
    float dist_timeout = 60;
    const char *init_from = NULL;
    enum { NT = 23 };
    cli_opt opts[CLI_N_MODEL_OPTS + NT];
    cli_model_opts(&mf, opts);
    cli_opt topts[NT] = {
        {"data", OPT_STR, &data, "text file or folder of text files (bytes are tokens), or a folder of token shards "
                                 "from diffattn prepare", 0},
        {"out", OPT_STR, &out, "run folder: model.safetensors, train_state.safetensors, metrics.jsonl", 0},
        {"batch", OPT_INT, &tc.batch, "sequences per optimizer step: the global batch, summed over --grad-accum micro-batches and mpirun ranks", 0},
        {"steps", OPT_LONG, &tc.steps, "optimizer steps", 0},
        {"lr", OPT_FLOAT, &tc.lr, "peak learning rate", 0},
        {"warmup", OPT_LONG, &tc.warmup, "linear warmup steps", 0},
        {"min-lr", OPT_FLOAT, &tc.min_lr, "learning rate at the end of the cosine decay", 0},
        {"weight-decay", OPT_FLOAT, &tc.weight_decay, "AdamW decoupled weight decay (2-D matrices only)", 0},
        {"clip", OPT_FLOAT, &tc.clip, "global gradient-norm clip (0 = off)", 0},
        {"grad-accum", OPT_INT, &tc.grad_accum, "micro-batches per step; must divide --batch", 0},
        {"seed", OPT_U64, &tc.seed, "seed of the initialisation and of the data sampler", 0},
        {"eval-every", OPT_LONG, &tc.eval_every, "steps between validation passes (0 = start and end only)", 0},
        {"eval-batches", OPT_INT, &tc.eval_batches, "validation windows = this x --batch", 0},
        {"save-every", OPT_LONG, &tc.save_every, "steps between checkpoints (0 = end only)", 0},
        {"log-every", OPT_LONG, &tc.log_every, "steps between metrics lines", 0},
        {"val-fraction", OPT_FLOAT, &tc.val_fraction, "share of the text held out for validation (the tail)", 0},
        {"bf16", OPT_FLAG, &tc.bf16, "large matmuls in bf16 with fp32 accumulation (AVX512-BF16 CPUs; about 1.4x faster)", 0},
        {"init-from", OPT_STR, &init_from, "start from this model's weights and configuration (a .safetensors, "
                      ".gguf or Hugging Face folder): fine-tuning; model flags other than --seq do not apply", 0},
        {"resume", OPT_FLAG, &resume, "continue the run in --out exactly where its last checkpoint left it", 0},
        {"stop-at", OPT_LONG, &stop_at, "end this invocation after this step with a checkpoint, as Ctrl-C would (0 = run to --steps)", 0},
        {"deterministic", OPT_FLAG, &tc.deterministic, "sum each window's gradient exactly (integer fixed point): "
                          "bit-identical results for any number of mpirun ranks; slower (windows run one at a time)", 0},
        {"zero", OPT_INT, &tc.zero, "1: shard the AdamW moments over the mpirun ranks (ZeRO-1; optimizer memory / P); "
                 "0: every rank holds them", 0},
        {"dist-timeout", OPT_FLOAT, &dist_timeout, "under mpirun: seconds a rank waits for the others in a collective "
                         "before the job ends with an error (a dead or hung rank); 0: Open MPI's blocking "
                         "collectives, no deadline", 0},
    };
    memcpy(opts + CLI_N_MODEL_OPTS, topts, sizeof topts);
    const int n = CLI_N_MODEL_OPTS + NT;
    const char *req[] = {"data", "out", NULL};
    int rc = cli_parse("train",
                       "Trains a DIFF Transformer (or the softmax baseline) on byte-level text with AdamW, warmup and "
                       "cosine decay.\nCtrl-C saves a checkpoint and exits; --resume continues it. Threads: "
                       "OMP_NUM_THREADS.\nData parallel: mpirun -np P diffattn train ... trains one model on P "
                       "processes;\n--batch stays the global batch, so the same command is the same run on any P.",
                       argc, argv, opts, n, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    tc.seq = mf.seq;
    da_config cfg;
    da_status st;
    if (!(dist_timeout >= 0)) return cli_fail("--dist-timeout must be 0 or a positive number of seconds");
    da_dist_set_timeout(dist_timeout);
    if (resume) {
        for (int i = 0; i < CLI_N_MODEL_OPTS; i++)
            if (opts[i].set && strcmp(opts[i].name, "seq")) {
                fprintf(stderr, "diffattn train: --%s cannot change on --resume (the model comes from %s)\n",
                        opts[i].name, out);
                return 1;
            }
        /* under mpirun rank 0 reads the run folder and tells the others,
         * which need not see it */
        struct {
            da_status st;
            da_config cfg;
            da_train_config saved;
            long step;
        } peek;
        memset(&peek, 0, sizeof peek);
        if (da_dist_rank() == 0) peek.st = da_train_state_peek(out, &peek.cfg, &peek.saved, &peek.step);
        if ((st = da_dist_bcast(&peek, sizeof peek, "the run's configuration")).code) return finish(1, st);
        if (peek.st.code) {
            if (da_dist_rank() == 0)
                fprintf(stderr, "diffattn: %s (is %s a run folder? drop --resume to start a new run)\n", peek.st.msg,
                        out);
            return 1;
        }
        cfg = peek.cfg;
        da_train_config saved = peek.saved;
        long step = peek.step;
        /* Start from the saved run's settings; flags given now override them. */
        da_train_config given = tc;
        tc = saved;
        for (int i = CLI_N_MODEL_OPTS; i < n; i++) {
            if (!opts[i].set || !strcmp(opts[i].name, "stop-at") || !strcmp(opts[i].name, "dist-timeout")) continue;
            const char *f = opts[i].name;
#define OVERRIDE(flag, field) if (!strcmp(f, flag)) tc.field = given.field
            OVERRIDE("batch", batch); OVERRIDE("steps", steps); OVERRIDE("lr", lr); OVERRIDE("warmup", warmup);
            OVERRIDE("min-lr", min_lr); OVERRIDE("weight-decay", weight_decay); OVERRIDE("clip", clip);
            OVERRIDE("grad-accum", grad_accum); OVERRIDE("eval-every", eval_every);
            OVERRIDE("eval-batches", eval_batches); OVERRIDE("save-every", save_every);
            OVERRIDE("log-every", log_every); OVERRIDE("val-fraction", val_fraction); OVERRIDE("bf16", bf16);
            OVERRIDE("deterministic", deterministic); OVERRIDE("zero", zero);
#undef OVERRIDE
        }
        if (cli_was_set(opts, n, "seq")) tc.seq = given.seq;
        if (da_dist_rank() == 0) fprintf(stderr, "resuming %s at step %ld of %ld\n", out, step, tc.steps);
    } else if (init_from) {
        for (int i = 0; i < CLI_N_MODEL_OPTS; i++)
            if (opts[i].set && strcmp(opts[i].name, "seq")) {
                fprintf(stderr, "diffattn train: --%s cannot be set with --init-from (the model comes from %s)\n",
                        opts[i].name, init_from);
                return 1;
            }
        memset(&cfg, 0, sizeof cfg); /* unused: the model comes from init_from */
    } else {
        /* token shards bring their tokenizer's vocabulary */
        if (!cli_was_set(opts, n, "vocab")) mf.vocab = da_data_vocab_size(data);
        if ((st = cli_model_config(&mf, opts, n, &cfg)).code) return cli_fail(st.msg);
    }

    const int rank0 = da_dist_rank() == 0;
    int tty = isatty(2);
    /* under mpirun only rank 0 reports progress */
    volatile int *stop = cli_catch_stop_signals();
    da_train_hooks hooks = {rank0 ? on_log : NULL, &tty, stop, stop_at, resume ? NULL : init_from};
    st = da_train(&cfg, &tc, data, out, resume, &hooks);
    if (st.code == DA_INTERRUPTED) {
        if (rank0) fprintf(stderr, "%sdiffattn: %s\n", tty ? "\n" : "", st.msg);
        return finish(*stop ? 130 : 0, st); /* --stop-at is a normal end */
    }
    if (st.code) return finish(1, st);
    if (rank0) fprintf(stderr, "done: %s/model.safetensors\n", out);
    return finish(0, st);
}
