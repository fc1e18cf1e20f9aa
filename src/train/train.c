/* The training loop: AdamW over windows of the training data (byte-level text or token shards), with evaluation,
 * metrics, atomic checkpoints and exact resume. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "core/clock.h"
#include "data/text_data.h"
#include "diffattn/train.h"
#include "train/data_parallel.h"
#include "parallel/dist.h"
#include "train/eval_loss.h"
#include "io/atomic_file.h"
#include "ops/bf16_gemm.h"
#include "ops/ops.h"
#include "train/train_state.h"

void da_train_config_default(da_train_config *tc) {
    memset(tc, 0, sizeof *tc);
    tc->batch = 8;
    tc->seq = 256;
    tc->grad_accum = 1;
    tc->steps = 500;
    tc->warmup = 50;
    tc->lr = 1e-3f;
    tc->min_lr = 1e-4f;
    tc->weight_decay = 0.1f;
    tc->clip = 1.0f;
    tc->beta1 = 0.9f;
    tc->beta2 = 0.95f;
    tc->adam_eps = 1e-8f;
    tc->eval_every = 100;
    tc->eval_batches = 4;
    tc->save_every = 100;
    tc->log_every = 10;
    tc->seed = 1337;
    tc->val_fraction = 0.1f;
}

da_status da_train_config_validate(const da_train_config *tc) {
    if (tc->batch <= 0) return da_errorf("--batch %d must be positive", tc->batch);
    if (tc->grad_accum <= 0 || tc->batch % tc->grad_accum)
        return da_errorf("--grad-accum %d must divide --batch %d", tc->grad_accum, tc->batch);
    if (tc->seq <= 0) return da_errorf("--seq %d must be positive", tc->seq);
    if (tc->steps <= 0) return da_errorf("--steps %ld must be positive", tc->steps);
    if (tc->warmup < 0) return da_errorf("--warmup %ld must be >= 0", tc->warmup);
    if (!(tc->lr > 0 && isfinite(tc->lr))) return da_errorf("--lr %g must be a positive number", (double)tc->lr);
    if (!(tc->min_lr >= 0 && tc->min_lr <= tc->lr))
        return da_errorf("--min-lr %g must lie in [0, --lr]", (double)tc->min_lr);
    if (!(tc->weight_decay >= 0 && tc->weight_decay < 1))
        return da_errorf("--weight-decay %g must lie in [0, 1)", (double)tc->weight_decay);
    if (!isfinite(tc->clip)) return da_errorf("--clip must be a number (0 disables clipping)");
    if (!(tc->beta1 >= 0 && tc->beta1 < 1 && tc->beta2 >= 0 && tc->beta2 < 1))
        return da_errorf("AdamW betas must lie in [0, 1)");
    if (!(tc->adam_eps > 0)) return da_errorf("AdamW eps must be positive");
    if (tc->eval_every < 0 || tc->save_every < 0) return da_errorf("--eval-every and --save-every must be >= 0");
    if (tc->log_every <= 0) return da_errorf("--log-every %ld must be positive", tc->log_every);
    if (tc->eval_batches <= 0) return da_errorf("--eval-batches %d must be positive", tc->eval_batches);
    if (!(tc->val_fraction > 0 && tc->val_fraction < 1))
        return da_errorf("--val-fraction %g must lie in (0, 1)", (double)tc->val_fraction);
    if (tc->bf16 != 0 && tc->bf16 != 1) return da_errorf("bf16 must be 0 or 1");
    if (tc->deterministic != 0 && tc->deterministic != 1) return da_errorf("deterministic must be 0 or 1");
    if (tc->zero != 0 && tc->zero != 1) return da_errorf("--zero %d: the stages are 0 (off) and 1 (shard the AdamW moments)", tc->zero);
    if (tc->bf16 && !bf16_gemm_available())
        return da_errorf("--bf16: this build has no AVX512-BF16 kernel (needs a CPU with avx512_bf16 and -march=native)");
    return da_ok();
}

/* Mean validation loss over eval_batches * batch fixed windows. */
static float evaluate(da_model *m, da_acts *a, const da_text_data *data, const da_train_config *tc, int micro,
                      int *tokens, int *targets) {
    return da_eval_val_loss(m, a, data, (long)tc->eval_batches * tc->batch, tc->seq, micro, tokens, targets);
}

/* On resume, drop metrics lines past the checkpoint, which the interrupted
 * run logged but the resumed run will log again. */
static da_status trim_metrics(const char *path, long last_step) {
    FILE *in = fopen(path, "r");
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

/* Copies the tokenizer files of a shard folder next to the model, so that
 * sample and eval decode with the tokenizer the model was trained on. */
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

static da_status save_checkpoint(const char *out_dir, const da_model *m, const da_adamw *opt,
                                 const da_train_config *tc, const da_rng *rng) {
    char path[4096];
    snprintf(path, sizeof path, "%s/train_state.safetensors", out_dir);
    da_status st = da_train_state_save(path, m, opt, tc, rng);
    if (st.code) return st;
    snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
    return da_model_save(m, path);
}

/* Data parallel: every rank takes part (gathering ZeRO's moments, comparing
 * the replicas), rank 0 writes, and every rank learns whether it worked. */
static da_status save_checkpoint_dp(const char *out_dir, da_dp *dp, da_model *m, da_adamw *opt,
                                    const da_train_config *tc, const da_rng *rng) {
    da_adamw full;
    float *owned = NULL;
    da_status st = da_dp_check_replicas(dp, m, opt->step);
    if (!st.code) st = da_dp_full_moments(dp, opt, m->grads, &full, &owned); /* the step's gradients are spent */
    if (!st.code && dp->rank == 0) st = save_checkpoint(out_dir, m, &full, tc, rng);
    free(owned);
    return st.code == DA_DIST_FAILED ? st : da_dist_agree(st);
}

/* Rank 0 loaded the training state (its outcome: st); the others build the
 * same model and optimizer from it. Every rank returns the same outcome. */
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

da_status da_train(const da_config *model_cfg, const da_train_config *tc_in, const char *data_path,
                   const char *out_dir, int resume, const da_train_hooks *hooks) {
    da_train_config tc = *tc_in;
    da_status st = da_train_config_validate(&tc);
    if (st.code) return st;
    da_model m = {0};
    da_adamw opt = {0};
    da_rng rng;
    da_acts *acts = NULL;
    int *tokens = NULL, *targets = NULL;
    FILE *metrics = NULL;
    da_text_data data = {0};
    da_dp dp = {0};
    int agreed = 0; /* data parallel: the setup's outcome was agreed on by every rank */
    char plan[512] = ""; /* data parallel: shown with the first log line */
    char path[4096];
    /* the data-parallel path: several ranks, or one rank asked for its
     * reductions; otherwise the single-process loop, untouched */
    const int dist = da_dist_size() > 1 || tc.deterministic || tc.zero;
    const int rank0 = da_dist_rank() == 0;
    /* only rank 0 writes; a rank that cannot reach the others must not wait
     * for them at the first collective, hence the agreement after setup */

    if (rank0 && (st = da_make_dirs(out_dir)).code) goto done;
    da_matmul_bf16 = tc.bf16;
    if (resume) {
        da_train_config saved;
        snprintf(path, sizeof path, "%s/train_state.safetensors", out_dir);
        if (rank0) st = da_train_state_load(path, &m, &opt, &saved, &rng);
        /* several ranks: rank 0 alone reads the state (the run folder need
         * only be on its machine) and sends it to the others */
        if (da_dist_size() > 1) {
            agreed = 1; /* receive_state agrees on rank 0's outcome first */
            st = receive_state(st, &m, &opt, &rng);
        }
        if (st.code) goto done;
        agreed = 0;
        if (opt.step >= tc.steps) {
            st = da_errorf("%s: the run already took %ld of %ld steps; pass a larger --steps to continue", out_dir,
                           opt.step, tc.steps);
            goto done;
        }
    } else {
        if ((st = da_model_create(&m, model_cfg)).code) goto done;
        da_model_init(&m, tc.seed);
        if ((st = da_model_alloc_grads(&m)).code) goto done;
        if ((st = da_adamw_create(&opt, m.n_params)).code) goto done;
        da_rng_seed(&rng, tc.seed ^ 0x5eed0fda7aULL);
    }
    if (tc.seq > m.cfg.max_seq_len) {
        st = da_errorf("--seq %d exceeds the model's max_seq_len %d", tc.seq, m.cfg.max_seq_len);
        goto done;
    }
    if ((st = da_text_data_load(&data, data_path, tc.val_fraction, tc.seq)).code) goto done;
    if (m.cfg.vocab_size < data.vocab_size) {
        st = da_errorf("%s: the data's vocabulary has %d tokens but the model only %d (--vocab)", data_path,
                       data.vocab_size, m.cfg.vocab_size);
        goto done;
    }
    if (rank0 && data.from_shards && (st = copy_tokenizer(data_path, out_dir)).code) goto done;

    int micro = tc.batch / tc.grad_accum;
    if (dist) {
        if ((st = da_dp_create(&dp, &m, &tc)).code) goto done;
        if ((st = da_dp_shard_optimizer(&dp, &opt)).code) goto done;
        micro = dp.micro;
        char lib[64] = "";
        if (dp.size > 1) snprintf(lib, sizeof lib, " (%s)", da_dist_library());
        snprintf(plan, sizeof plan,
                 "data parallel: %d rank%s%s, global batch %d = %d windows per rank in %d forward pass%s of %d; "
                 "reduction %s; AdamW moments %.2f MB per rank (%s)",
                 dp.size, dp.size > 1 ? "s" : "", lib, tc.batch, dp.local, dp.accum, dp.accum > 1 ? "es" : "",
                 dp.micro, tc.deterministic ? "exact (--deterministic)" : "float allreduce",
                 (double)da_dp_optimizer_bytes(&dp) / 1e6,
                 tc.zero ? "ZeRO-1: sharded" : "replicated on every rank");
    }
    if ((st = da_acts_create(&acts, &m.cfg, micro, tc.seq)).code) goto done;
    tokens = malloc((size_t)micro * tc.seq * sizeof(int));
    targets = malloc((size_t)micro * tc.seq * sizeof(int));
    if (!tokens || !targets) {
        st = da_errorf("out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    if (rank0 && resume && (st = trim_metrics(path, opt.step)).code) goto done;
    if (rank0 && !(metrics = fopen(path, resume ? "a" : "w"))) {
        st = da_errorf("%s: cannot open for writing: %s", path, strerror(errno));
        goto done;
    }
    if (dist) {
        agreed = 1;
        if ((st = da_dist_agree(st)).code) goto done;
    }
    da_dist_stats_reset();

    const double t_start = da_now_s();
    const long first_step = opt.step;
    if (opt.step == 0) {
        float vl;
        if (!dist) vl = evaluate(&m, acts, &data, &tc, micro, tokens, targets);
        else if ((st = da_dp_val_loss(&dp, &m, acts, &data, (long)tc.eval_batches * tc.batch, &vl)).code) goto done;
        if (rank0) {
            fprintf(metrics, "{\"step\":0");
            json_float(metrics, "val_loss", vl);
            fprintf(metrics, "}\n");
            fflush(metrics);
            da_train_log log = {0, tc.steps, NAN, vl, 0, 0, 0, 0, 0, plan[0] ? plan : NULL};
            if (hooks && hooks->on_log) hooks->on_log(hooks->ctx, &log);
            plan[0] = 0;
        }
    }
    double t_last = da_now_s();
    long tokens_since = 0;
    double comm_last = 0.0;
    while (opt.step < tc.steps) {
        double loss = 0.0;
        float norm;
        int stop_any = 0;
        if (dist) {
            int stop_local = hooks && hooks->stop && *hooks->stop;
            if ((st = da_dp_gradients(&dp, &m, acts, &data, &rng, stop_local, &loss, &norm, &stop_any)).code) {
                if (st.code == 1) {
                    char msg[sizeof st.msg];
                    snprintf(msg, sizeof msg, "%s", st.msg);
                    st = da_errorf("step %ld: %s; the last checkpoint in %s is intact", opt.step + 1, msg, out_dir);
                    st = da_dist_agree(st); /* every rank met it: the first one reports */
                }
                goto done;
            }
        } else {
            da_model_zero_grads(&m);
            for (int k = 0; k < tc.grad_accum; k++) {
                da_text_data_sample(&data, &rng, micro, tc.seq, tokens, targets);
                loss += da_forward(&m, acts, tokens, targets, micro, tc.seq);
                da_backward(&m, acts);
            }
            loss /= tc.grad_accum;
            if (tc.grad_accum > 1) da_grad_scale(&m, 1.0f / tc.grad_accum);
            norm = da_grad_norm(&m);
        }
        if (!isfinite(loss) || !isfinite(norm)) {
            st = da_errorf("loss became %g at step %ld (gradient norm %g); the last checkpoint in %s is intact; "
                           "lower --lr or raise --warmup",
                           loss, opt.step + 1, (double)norm, out_dir);
            if (dist) st = da_dist_agree(st); /* every rank is here: only the first reports */
            goto done;
        }
        float lr = da_lr_schedule(opt.step, tc.warmup, tc.steps, tc.lr, tc.min_lr);
        da_adamw_config ac = {tc.beta1, tc.beta2, tc.adam_eps, tc.weight_decay};
        if (dist) {
            if ((st = da_dp_update(&dp, &m, &opt, &ac, lr, tc.clip, norm)).code) goto done;
        } else {
            if (tc.clip > 0 && norm > tc.clip) da_grad_scale(&m, tc.clip / norm);
            da_adamw_step(&opt, &m, &ac, lr);
        }
        tokens_since += (long)tc.batch * tc.seq;

        const long step = opt.step;
        /* under data parallelism the stop flags were agreed on in the step */
        int stop = dist ? stop_any || (hooks && hooks->stop_at_step > 0 && step >= hooks->stop_at_step)
                        : hooks && ((hooks->stop && *hooks->stop) ||
                                    (hooks->stop_at_step > 0 && step >= hooks->stop_at_step));
        int is_last = step == tc.steps;
        float vl = NAN;
        if (is_last || (tc.eval_every > 0 && step % tc.eval_every == 0)) {
            if (!dist) vl = evaluate(&m, acts, &data, &tc, micro, tokens, targets);
            else if ((st = da_dp_val_loss(&dp, &m, acts, &data, (long)tc.eval_batches * tc.batch, &vl)).code)
                goto done;
        }
        if (rank0 && (is_last || step % tc.log_every == 0 || isfinite(vl))) {
            double t = da_now_s();
            float tps = (float)(tokens_since / (t - t_last + 1e-9));
            double elapsed = t - t_start;
            double eta = elapsed / (double)(step - first_step) * (double)(tc.steps - step);
            fprintf(metrics, "{\"step\":%ld", step);
            json_float(metrics, "train_loss", (float)loss);
            json_float(metrics, "val_loss", vl);
            json_float(metrics, "lr", lr);
            json_float(metrics, "grad_norm", norm);
            json_float(metrics, "tok_per_s", tps);
            if (dist && dp.size > 1) {
                /* rank 0's seconds in collectives since the last line */
                double c = da_dist_stats_get().comm_s;
                fprintf(metrics, ",\"comm_s\":%.4f", c - comm_last);
                comm_last = c;
            }
            fprintf(metrics, ",\"elapsed_s\":%.3f}\n", elapsed);
            fflush(metrics);
            da_train_log log = {step, tc.steps, (float)loss, vl, lr, norm, tps, elapsed, eta, plan[0] ? plan : NULL};
            if (hooks && hooks->on_log) hooks->on_log(hooks->ctx, &log);
            plan[0] = 0;
            t_last = t;
            tokens_since = 0;
        }
        if (is_last || stop || (tc.save_every > 0 && step % tc.save_every == 0)) {
            st = dist ? save_checkpoint_dp(out_dir, &dp, &m, &opt, &tc, &rng)
                      : save_checkpoint(out_dir, &m, &opt, &tc, &rng);
            if (st.code) goto done;
        }
        if (stop && !is_last) {
            st = da_errorf("interrupted at step %ld of %ld; checkpoint saved in %s; continue with --resume", step,
                           tc.steps, out_dir);
            st.code = DA_INTERRUPTED;
            goto done;
        }
    }
done:
    /* A rank that failed alone tells the others, which are waiting in the
     * setup agreement (or fail in the same place, as on a non-finite loss). */
    if (dist && da_dist_size() > 1 && st.code && st.code != DA_INTERRUPTED && st.code != DA_DIST_FAILED &&
        st.code != DA_DIST_PEER_FAILED && !agreed)
        st = da_dist_agree(st);
    if (metrics) fclose(metrics);
    da_dp_free(&dp);
    free(tokens);
    free(targets);
    da_acts_free(acts);
    da_text_data_free(&data);
    da_adamw_free(&opt);
    da_model_free(&m);
    da_matmul_bf16 = 0;
    return st;
}
