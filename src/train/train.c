/* The training loop: AdamW over windows of a data source (byte-level text, token shards, a synthetic task), with
 * evaluation, metrics, atomic checkpoints and exact resume. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "data/text_data.h"
#include "diffattn/tokenizer.h"
#include "diffattn/train.h"
#include "train/data_parallel.h"
#include "parallel/dist.h"
#include "train/eval_loss.h"
#include "io/atomic_file.h"
#include "io/run_lock.h"
#include "ops/ops.h"
#include "train/train_state.h"
#include "diffattn/formats.h"

/* On resume, drop metrics lines past the checkpoint, which the interrupted
 * run logged but the resumed run will log again. */
static da_status trim_metrics(const char *path, long last_step) {
    FILE *in = da_fopen_regular(path, NULL);
    if (!in) return da_ok();
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) {
        fclose(in);
        return st;
    }
    char line[4096];
    while (fgets(line, sizeof line, in)) {
        long step;
        if (sscanf(line, "{\"step\":%ld", &step) == 1 && step <= last_step) fputs(line, af.fp);
    }
    fclose(in);
    return da_atomic_commit(&af);
}

static void json_float(FILE *fp, const char *key, float v) {
    if (isfinite(v)) fprintf(fp, ",\"%s\":%.6g", key, (double)v);
}

/* Copies the tokenizer files of a shard folder next to the model, for tools
 * that read the folder; the model file itself carries the tokenizer too
 * (embed_tokenizer), which is what diffattn reads. */
static da_status copy_tokenizer(const char *data_dir, const char *out_dir) {
    static const char *names[] = {"tokenizer.json", "encoder.json", "vocab.bpe"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char src[4096], dst[4096];
        snprintf(src, sizeof src, "%s/%s", data_dir, names[i]);
        snprintf(dst, sizeof dst, "%s/%s", out_dir, names[i]);
        struct stat sb;
        if (stat(src, &sb)) continue; /* this tokenizer form lacks the file */
        da_status st = da_copy_file(src, dst);
        if (st.code) return st;
    }
    return da_ok();
}

/* The shards' tokenizer goes into the model, so that model.safetensors (and
 * a GGUF quantized from it) decodes its ids wherever it is moved. A resumed
 * run must be given the tokenizer its model file already carries, a run
 * started from a model (init_from) the one that model carries. */
static da_status embed_tokenizer(da_model *m, const char *data_path, const char *out_dir, int resume,
                                 const char *init_from) {
    da_tokenizer *tok = NULL, *prev_tok = NULL;
    da_status st = da_data_tokenizer(data_path, &tok);
    if (st.code || !tok) return st;
    if (da_tokenizer_vocab_size(tok) != m->cfg.vocab_size)
        st = da_errorf("%s: the shards' tokenizer has %d tokens but the model's vocabulary %d", data_path,
                       da_tokenizer_vocab_size(tok), m->cfg.vocab_size);
    char path[4200], shards[4300], own[4300];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    snprintf(shards, sizeof shards, "%s: the shards' tokenizer", data_path);
    da_model prev;
    struct stat sb;
    if (!st.code && resume && !stat(path, &sb) && !da_model_load(&prev, path).code) {
        snprintf(own, sizeof own, "the one %s was trained with", path);
        if (!(st = da_model_tokenizer(&prev, &prev_tok)).code)
            st = da_tokenizer_match(tok, shards, prev_tok, own, "resume with the run's shards");
        da_model_free(&prev);
    } else if (!st.code && !resume && init_from) {
        snprintf(own, sizeof own, "the tokenizer of %s", init_from);
        if (!(st = da_model_tokenizer(m, &prev_tok)).code)
            st = da_tokenizer_match(tok, shards, prev_tok, own, "prepare the data with the model's tokenizer");
    }
    da_tokenizer_free(prev_tok);
    if (!st.code) {
        size_t n;
        const char *json = da_tokenizer_json(tok, &n);
        free(m->tokenizer_json);
        if (!(m->tokenizer_json = malloc(n + 1))) st = da_errorf("out of memory");
        else memcpy(m->tokenizer_json, json, n + 1);
    }
    da_tokenizer_free(tok);
    return st;
}

static da_status save_checkpoint(const char *out_dir, const da_model *m, const da_adamw *opt,
                                 const da_train_config *tc, const da_rng *rng) {
    /* train_state is the point --resume trusts, and a finished run's model
     * file is read as its result: the model goes first, so a crash or a full
     * disk between the two writes leaves the previous resume point, never a
     * finished state beside an older model */
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    da_status st = da_model_save(m, path);
    if (st.code) return st;
    snprintf(path, sizeof path, "%s/train_state.safetensors", out_dir);
    return da_train_state_save(path, m, opt, tc, rng);
}

/* Every rank takes part (gathering ZeRO's moments, comparing the replicas),
 * rank 0 writes, and every rank learns whether it worked. */
static da_status checkpoint(const char *out_dir, da_dp *dp, da_model *m, da_adamw *opt, const da_train_config *tc,
                            const da_rng *rng) {
    da_adamw full;
    float *owned = NULL;
    da_status st = da_dp_check_replicas(dp, m, opt->step);
    if (!st.code) st = da_dp_full_moments(dp, opt, m->grads, &full, &owned); /* the step's gradients are spent */
    if (!st.code && dp->rank == 0) st = save_checkpoint(out_dir, m, &full, tc, rng);
    free(owned);
    return st.code == DA_DIST_FAILED ? st : da_dist_agree(st);
}

/* Rank 0 loaded the training state (its outcome: st); the others build the
 * same model and optimizer from it. Every rank returns the same outcome. In
 * a group of one every step is the identity. */
static da_status receive_state(da_status st, da_model *m, da_adamw *opt, da_rng *rng) {
    if ((st = da_dist_agree(st)).code) return st;
    const int rank0 = da_dist_rank() == 0;
    da_config cfg = m->cfg;
    long step = opt->step;
    if ((st = da_dist_bcast(&cfg, sizeof cfg, "model config")).code) return st;
    if ((st = da_dist_bcast(&step, sizeof step, "step")).code) return st;
    if ((st = da_dist_bcast(rng, sizeof *rng, "sampler state")).code) return st;
    if (!rank0) {
        st = da_model_create(m, &cfg);
        if (!st.code) st = da_model_alloc_grads(m);
        if (!st.code) st = da_adamw_create(opt, m->n_params);
        opt->step = step;
    }
    if ((st = da_dist_agree(st)).code) return st;
    if ((st = da_dist_bcast(m->params, m->n_params * sizeof(float), "parameters")).code) return st;
    if ((st = da_dist_bcast(opt->m, m->n_params * sizeof(float), "AdamW first moments")).code) return st;
    return da_dist_bcast(opt->v, m->n_params * sizeof(float), "AdamW second moments");
}

/* One training run. A single process is a group of one: the same steps run,
 * and every collective is the identity. */
typedef struct {
    da_train_config tc;
    const char *out_dir;
    const da_train_hooks *hooks;
    da_model m;
    da_adamw opt;
    da_rng rng;
    da_acts *acts;
    da_text_data text; /* a text or shard run's data; src reads it */
    da_distract *distract; /* NULL, or the distractors inserted into text's windows */
    da_data_source src;
    da_dp dp;
    FILE *metrics;   /* rank 0 only */
    int lock_fd;     /* rank 0: the run folder's lock (io/run_lock.h); -1 when not held */
    int agreed;      /* the outcome so far was agreed on by every rank */
    char plan[512];  /* the data-parallel plan, shown with the first log line */
    double t_start, t_last, comm_last;
    long first_step, tokens_since;
} run;

/* The model, optimizer and sampler: from the state in out_dir (read by rank
 * 0, sent to the others), or new. */
static da_status load_or_init(run *r, const da_config *model_cfg, int resume) {
    da_status st = da_ok();
    const da_train_config *tc = &r->tc;
    if (!resume) {
        if (r->hooks && r->hooks->init_from) { /* every rank reads it */
            const da_train_hooks *h = r->hooks;
            st = h->load_init ? h->load_init(&r->m, h->init_from, h->load_opts)
                              : da_model_load_with(&r->m, h->init_from, h->load_opts);
            if (st.code) return st;
        } else {
            if ((st = da_model_create(&r->m, model_cfg)).code) return st;
            da_model_init(&r->m, tc->seed);
        }
        if (r->hooks && r->hooks->on_init && (st = r->hooks->on_init(r->hooks->ctx, &r->m)).code) return st;
        if ((st = da_model_alloc_grads(&r->m)).code) return st;
        if ((st = da_adamw_create(&r->opt, r->m.n_params)).code) return st;
        da_rng_seed(&r->rng, tc->seed ^ 0x5eed0fda7aULL);
        return st;
    }
    char path[4096];
    da_train_config saved;
    snprintf(path, sizeof path, "%s/train_state.safetensors", r->out_dir);
    if (da_dist_rank() == 0) st = da_train_state_load(path, &r->m, &r->opt, &saved, &r->rng);
    r->agreed = 1; /* receive_state agrees on rank 0's outcome first */
    if ((st = receive_state(st, &r->m, &r->opt, &r->rng)).code) return st;
    r->agreed = 0;
    if (r->opt.step >= tc->steps)
        return da_errorf("%s: the run already took %ld of its %ld steps; to continue, resume with more steps", r->out_dir,
                         r->opt.step, tc->steps);
    return st;
}

static void describe_plan(run *r) {
    const da_dp *dp = &r->dp;
    const da_train_config *tc = &r->tc;
    if (dp->size == 1 && !tc->deterministic && !tc->zero) return; /* plain training: nothing to say */
    char lib[64] = "";
    if (dp->size > 1) snprintf(lib, sizeof lib, " (%s)", da_dist_library());
    snprintf(r->plan, sizeof r->plan,
             "data parallel: %d rank%s%s, global batch %d = %d windows per rank in %d forward pass%s of %d; "
             "reduction %s; AdamW moments %.2f MB per rank (%s)",
             dp->size, dp->size > 1 ? "s" : "", lib, tc->batch, dp->local, dp->accum, dp->accum > 1 ? "es" : "",
             dp->micro, tc->deterministic ? "exact (deterministic)" : "float allreduce",
             (double)da_dp_optimizer_bytes(dp) / 1e6, tc->zero ? "ZeRO-1: sharded" : "replicated on every rank");
}

da_status da_refuse_existing(const char *dir, const char *what, const char *const *files, int n) {
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &sb)) continue;
        da_status st = da_errorf("%s holds a %s (%s): resume it to continue, or overwrite it to start again there", dir,
                                 what, files[i]);
        st.code = DA_RUN_EXISTS;
        return st;
    }
    return da_ok();
}

/* A new run does not replace one silently. */
static da_status refuse_existing_run(const char *out_dir) {
    static const char *const files[] = {"train_state.safetensors", "model.safetensors"};
    return da_refuse_existing(out_dir, "run", files, 2);
}

/* metrics.jsonl, appended to on resume, else truncated; O_NOFOLLOW: a
 * symlink planted in the run folder is refused, not written through. */
static FILE *open_metrics(const char *path, int resume) {
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (resume ? O_APPEND : O_TRUNC), 0666);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, resume ? "a" : "w");
    if (!fp) close(fd);
    return fp;
}

/* The run folder, its lock, and the model, optimizer and sampler. */
static da_status start(run *r, const da_config *model_cfg, int mode) {
    const int rank0 = da_dist_rank() == 0;
    da_status st;
    if (rank0 && (st = da_make_dirs(r->out_dir)).code) return st;
    /* one writer: two runs started together in one folder both passed the check below */
    if (rank0 && (st = da_run_lock(r->out_dir, &r->lock_fd)).code) return st;
    if (rank0 && mode == DA_RUN_NEW && (st = refuse_existing_run(r->out_dir)).code) return st;
    if ((st = load_or_init(r, model_cfg, mode == DA_RUN_RESUME)).code) return st;
    if (r->tc.seq > r->m.cfg.max_seq_len)
        return da_errorf("seq: windows of %d tokens exceed the model's max_seq_len %d (train on windows of at most "
                         "%d)", r->tc.seq, r->m.cfg.max_seq_len, r->m.cfg.max_seq_len);
    return st;
}

/* Text or token shards as the run's source, checked against the model; a
 * shard run's model carries the shards' tokenizer. */
static da_status open_text(run *r, const char *data_path, int resume) {
    const int rank0 = da_dist_rank() == 0;
    da_status st;
    if ((st = da_text_data_load(&r->text, data_path, r->tc.val_fraction, r->tc.seq)).code) return st;
    /* a resumed shard run given text would train its BPE ids on bytes */
    if (!r->text.from_shards && r->text.vocab_size != r->m.cfg.vocab_size)
        return da_errorf("%s: text is read as bytes (vocabulary 256) but the model's vocabulary has %d tokens%s",
                         data_path, r->m.cfg.vocab_size,
                         resume ? " (the run was trained on token shards: resume it with them, or prepare this text "
                                  "with its tokenizer)"
                         : r->m.tokenizer_json ? " (prepare the text into token shards with the model's tokenizer)"
                                               : " (prepare the text into token shards with a tokenizer of that size)");
    if ((st = da_text_data_check_vocab(&r->text, data_path, r->m.cfg.vocab_size)).code) return st;
    const char *init_from = r->hooks ? r->hooks->init_from : NULL;
    if (r->text.from_shards && (st = embed_tokenizer(&r->m, data_path, r->out_dir, resume, init_from)).code)
        return st;
    if (rank0 && r->text.from_shards && (st = copy_tokenizer(data_path, r->out_dir)).code) return st;
    r->src = da_text_source(&r->text);
    if (r->hooks && r->hooks->distract) {
        if ((st = da_distract_open(&r->distract, &r->text, r->hooks->distract, NULL, r->hooks->distract_cfg)).code)
            return st;
        r->src = da_distract_source(r->distract);
    }
    return st;
}

/* Everything else before the first step: the source against the model, the
 * data-parallel plan, activations, metrics. */
static da_status setup(run *r, int mode) {
    const da_train_config *tc = &r->tc;
    const int rank0 = da_dist_rank() == 0, resume = mode == DA_RUN_RESUME;
    char path[4096];
    da_status st;
    if (r->src.seq > 0 && r->src.seq != tc->seq)
        return da_errorf("seq: %d, but the data source makes windows of %d tokens", tc->seq, r->src.seq);
    if (r->src.vocab_size > r->m.cfg.vocab_size)
        return da_errorf("vocab_size: the data's tokens go up to %d but the model's vocabulary has %d",
                         r->src.vocab_size - 1, r->m.cfg.vocab_size);
    if (!resume && r->src.stream_seed) da_rng_seed(&r->rng, r->src.stream_seed(r->src.self, tc->seed));
    if ((st = da_dp_create(&r->dp, &r->m, tc)).code) return st;
    if ((st = da_dp_shard_optimizer(&r->dp, &r->opt)).code) return st;
    describe_plan(r);
    da_exec ex = da_exec_default();
    ex.bf16_matmul = tc->bf16;
    if ((st = da_acts_create_ex(&r->acts, &r->m.cfg, r->dp.micro, tc->seq, DA_ATTN_FLASH, &ex)).code) return st;
    r->opt.isa = ex.isa;
    snprintf(path, sizeof path, "%s/metrics.jsonl", r->out_dir);
    if (rank0 && resume && (st = trim_metrics(path, r->opt.step)).code) return st;
    if (rank0 && !(r->metrics = open_metrics(path, resume)))
        return da_errorf("%s: cannot open for writing: %s", path, strerror(errno));
    return st;
}

/* A metrics line and the log hooks (rank 0). vl: NAN without an
 * evaluation; acc: NAN without a score. */
static void log_step(run *r, long step, double loss, float vl, double acc, float lr, float norm) {
    double t = da_now_s();
    float tps = (float)(r->tokens_since / (t - r->t_last + 1e-9));
    double elapsed = t - r->t_start;
    double eta = step > r->first_step ? elapsed / (double)(step - r->first_step) * (double)(r->tc.steps - step) : 0;
    FILE *fp = r->metrics;
    fprintf(fp, "{\"step\":%ld", step);
    if (step > 0) {
        json_float(fp, "train_loss", (float)loss);
        json_float(fp, "val_loss", vl);
        if (isfinite(acc)) fprintf(fp, ",\"accuracy\":%.6g", acc);
        json_float(fp, "lr", lr);
        json_float(fp, "grad_norm", norm);
        json_float(fp, "tok_per_s", tps);
        if (r->dp.size > 1) {
            /* rank 0's seconds in collectives since the last line */
            double c = da_dist_stats_get().comm_s;
            fprintf(fp, ",\"comm_s\":%.4f", c - r->comm_last);
            r->comm_last = c;
        }
        fprintf(fp, ",\"elapsed_s\":%.3f", elapsed);
    } else {
        json_float(fp, "val_loss", vl);
        if (isfinite(acc)) fprintf(fp, ",\"accuracy\":%.6g", acc);
    }
    fprintf(fp, "}\n");
    fflush(fp);
    da_train_log log = {step, r->tc.steps, step > 0 ? (float)loss : NAN, vl, step > 0 ? lr : 0, step > 0 ? norm : 0,
                        step > 0 ? tps : 0, step > 0 ? elapsed : 0, step > 0 ? eta : 0, r->plan[0] ? r->plan : NULL,
                        acc};
    if (r->hooks && r->hooks->on_log) r->hooks->on_log(r->hooks->ctx, &log);
    if (r->hooks && r->hooks->on_eval && isfinite(vl)) r->hooks->on_eval(r->hooks->ctx, &r->m, &log);
    r->plan[0] = 0;
    r->t_last = t;
    r->tokens_since = 0;
}

static da_status val_loss(run *r, float *vl, double *acc) {
    const long n = r->src.n_held_out > 0 ? r->src.n_held_out : (long)r->tc.eval_batches * r->tc.batch;
    return da_dp_val_loss(&r->dp, &r->m, r->acts, &r->src, n, vl, acc);
}

/* One optimizer step, its evaluation, log line and checkpoint. *stop: the
 * run ends after this step (interrupted). */
static da_status train_step(run *r, int *stop) {
    const da_train_config *tc = &r->tc;
    const da_train_hooks *hooks = r->hooks;
    double loss = 0.0;
    float norm;
    int stop_any = 0;
    int stop_local = hooks && hooks->stop && *hooks->stop;
    /* --lambda-ramp: this step's weight of the second map, saved with the model */
    if (da_arch_maps(r->m.cfg.arch) == 2) r->m.cfg.lambda_hold = 1.0f - da_lambda_ramp_factor(r->opt.step, tc->lambda_ramp);
    da_status st = da_dp_gradients(&r->dp, &r->m, r->acts, &r->src, &r->rng, stop_local, &loss, &norm, &stop_any);
    if (st.code == 1) {
        char msg[sizeof st.msg];
        snprintf(msg, sizeof msg, "%s", st.msg);
        st = da_errorf("step %ld: %s; the last checkpoint in %s is intact", r->opt.step + 1, msg, r->out_dir);
        return da_dist_agree(st); /* every rank met it: the first one reports */
    }
    if (st.code) return st;
    if (!isfinite(loss) || !isfinite(norm)) {
        st = da_errorf("loss became %g at step %ld (gradient norm %g); the last checkpoint in %s is intact; "
                       "lower lr or raise warmup",
                       loss, r->opt.step + 1, (double)norm, r->out_dir);
        return da_dist_agree(st); /* every rank is here: only the first reports */
    }
    float lr = da_lr_schedule(r->opt.step, tc->warmup, tc->steps, tc->lr, tc->min_lr);
    da_adamw_config ac = {tc->beta1, tc->beta2, tc->adam_eps, tc->weight_decay};
    if ((st = da_dp_update(&r->dp, &r->m, &r->opt, &ac, lr, tc->clip, norm)).code) return st;
    r->tokens_since += (long)tc->batch * tc->seq;

    const long step = r->opt.step;
    /* the stop flags were agreed on in the step */
    *stop = stop_any || (hooks && hooks->stop_at_step > 0 && step >= hooks->stop_at_step);
    const int is_last = step == tc->steps;
    float vl = NAN;
    double acc = NAN;
    if ((is_last || (tc->eval_every > 0 && step % tc->eval_every == 0)) && (st = val_loss(r, &vl, &acc)).code)
        return st;
    if (r->dp.rank == 0 && (is_last || step % tc->log_every == 0 || isfinite(vl)))
        log_step(r, step, loss, vl, acc, lr, norm);
    if (is_last || *stop || (tc->save_every > 0 && step % tc->save_every == 0))
        st = checkpoint(r->out_dir, &r->dp, &r->m, &r->opt, tc, &r->rng);
    return st;
}

static da_status train_loop(run *r) {
    da_status st;
    da_dist_stats_reset();
    r->t_start = da_now_s();
    r->first_step = r->opt.step;
    if (r->opt.step == 0) {
        float vl;
        double acc;
        if ((st = val_loss(r, &vl, &acc)).code) return st;
        if (r->dp.rank == 0) log_step(r, 0, NAN, vl, acc, 0, 0);
    }
    r->t_last = da_now_s();
    r->tokens_since = 0;
    if (r->hooks && r->hooks->stop_at_step > 0 && r->opt.step >= r->hooks->stop_at_step && r->opt.step < r->tc.steps) {
        /* already at (or past) the step to stop at: no step is taken, the checkpoint is as it was */
        st = da_errorf("stopped at step %ld of %ld (stop_at %ld); checkpoint in %s; continue by resuming", r->opt.step,
                       r->tc.steps, r->hooks->stop_at_step, r->out_dir);
        st.code = DA_INTERRUPTED;
        return st;
    }
    while (r->opt.step < r->tc.steps) {
        int stop = 0;
        if ((st = train_step(r, &stop)).code) return st;
        if (stop && r->opt.step < r->tc.steps) {
            st = da_errorf("interrupted at step %ld of %ld; checkpoint saved in %s; continue by resuming",
                           r->opt.step, r->tc.steps, r->out_dir);
            st.code = DA_INTERRUPTED;
            return st;
        }
    }
    return da_ok();
}

/* data_path: text or shards; else src. */
static da_status train_run(const da_config *model_cfg, const da_train_config *tc, const char *data_path,
                           const da_data_source *src, const char *out_dir, int mode, const da_train_hooks *hooks) {
    da_status st = da_train_config_validate(tc);
    if (st.code) return st;
    run r;
    memset(&r, 0, sizeof r);
    r.tc = *tc;
    r.out_dir = out_dir;
    r.lock_fd = -1;
    r.hooks = hooks;
    if (src) r.src = *src;
    /* only rank 0 writes; a rank that cannot reach the others must not wait
     * for them at the first collective, hence the agreement after setup */
    st = start(&r, model_cfg, mode);
    if (!st.code && data_path) st = open_text(&r, data_path, mode == DA_RUN_RESUME);
    if (!st.code) st = setup(&r, mode);
    if (!r.agreed) {
        r.agreed = 1;
        if (st.code != DA_DIST_FAILED && st.code != DA_DIST_PEER_FAILED) st = da_dist_agree(st);
    }
    if (!st.code) st = train_loop(&r);
    if (r.metrics) fclose(r.metrics);
    da_run_unlock(r.lock_fd);
    da_dp_free(&r.dp);
    da_acts_free(r.acts);
    da_distract_free(r.distract);
    da_text_data_free(&r.text);
    da_adamw_free(&r.opt);
    da_model_free(&r.m);
    return st;
}

da_status da_train(const da_config *model_cfg, const da_train_config *tc, const char *data_path, const char *out_dir,
                   int mode, const da_train_hooks *hooks) {
    return train_run(model_cfg, tc, data_path, NULL, out_dir, mode, hooks);
}

da_status da_train_source(const da_config *model_cfg, const da_train_config *tc, const da_data_source *src,
                          const char *out_dir, int mode, const da_train_hooks *hooks) {
    return train_run(model_cfg, tc, NULL, src, out_dir, mode, hooks);
}
