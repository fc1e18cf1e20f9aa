/* The training loop: AdamW over byte-level text windows, with evaluation,
 * metrics, atomic checkpoints and exact resume. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "clock.h"
#include "data/text_data.h"
#include "diffattn.h"
#include "eval/eval_loss.h"
#include "io/atomic_file.h"
#include "ops/bf16_gemm.h"
#include "ops/ops.h"
#include "train_state.h"

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
    char path[4096];

    if ((st = da_make_dirs(out_dir)).code) return st;
    da_matmul_bf16 = tc.bf16;
    if (resume) {
        da_train_config saved;
        snprintf(path, sizeof path, "%s/train_state.safetensors", out_dir);
        if ((st = da_train_state_load(path, &m, &opt, &saved, &rng)).code) goto done;
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
    if (data.from_shards && (st = copy_tokenizer(data_path, out_dir)).code) goto done;

    const int micro = tc.batch / tc.grad_accum;
    if ((st = da_acts_create(&acts, &m.cfg, micro, tc.seq)).code) goto done;
    tokens = malloc((size_t)micro * tc.seq * sizeof(int));
    targets = malloc((size_t)micro * tc.seq * sizeof(int));
    if (!tokens || !targets) {
        st = da_errorf("out of memory");
        goto done;
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", out_dir);
    if (resume && (st = trim_metrics(path, opt.step)).code) goto done;
    metrics = fopen(path, resume ? "a" : "w");
    if (!metrics) {
        st = da_errorf("%s: cannot open for writing: %s", path, strerror(errno));
        goto done;
    }

    const double t_start = da_now_s();
    const long first_step = opt.step;
    if (opt.step == 0) {
        float vl = evaluate(&m, acts, &data, &tc, micro, tokens, targets);
        fprintf(metrics, "{\"step\":0");
        json_float(metrics, "val_loss", vl);
        fprintf(metrics, "}\n");
        fflush(metrics);
        da_train_log log = {0, tc.steps, NAN, vl, 0, 0, 0, 0, 0};
        if (hooks && hooks->on_log) hooks->on_log(hooks->ctx, &log);
    }
    double t_last = da_now_s();
    long tokens_since = 0;
    while (opt.step < tc.steps) {
        da_model_zero_grads(&m);
        double loss = 0.0;
        for (int k = 0; k < tc.grad_accum; k++) {
            da_text_data_sample(&data, &rng, micro, tc.seq, tokens, targets);
            loss += da_forward(&m, acts, tokens, targets, micro, tc.seq);
            da_backward(&m, acts);
        }
        loss /= tc.grad_accum;
        if (tc.grad_accum > 1) da_grad_scale(&m, 1.0f / tc.grad_accum);
        float norm = da_grad_norm(&m);
        if (!isfinite(loss) || !isfinite(norm)) {
            st = da_errorf("loss became %g at step %ld (gradient norm %g); the last checkpoint in %s is intact; "
                           "lower --lr or raise --warmup",
                           loss, opt.step + 1, (double)norm, out_dir);
            goto done;
        }
        if (tc.clip > 0 && norm > tc.clip) da_grad_scale(&m, tc.clip / norm);
        float lr = da_lr_schedule(opt.step, tc.warmup, tc.steps, tc.lr, tc.min_lr);
        da_adamw_config ac = {tc.beta1, tc.beta2, tc.adam_eps, tc.weight_decay};
        da_adamw_step(&opt, &m, &ac, lr);
        tokens_since += (long)tc.batch * tc.seq;

        const long step = opt.step;
        int stop = hooks && ((hooks->stop && *hooks->stop) || (hooks->stop_at_step > 0 && step >= hooks->stop_at_step));
        int is_last = step == tc.steps;
        float vl = NAN;
        if (is_last || (tc.eval_every > 0 && step % tc.eval_every == 0))
            vl = evaluate(&m, acts, &data, &tc, micro, tokens, targets);
        if (is_last || step % tc.log_every == 0 || isfinite(vl)) {
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
            fprintf(metrics, ",\"elapsed_s\":%.3f}\n", elapsed);
            fflush(metrics);
            da_train_log log = {step, tc.steps, (float)loss, vl, lr, norm, tps, elapsed, eta};
            if (hooks && hooks->on_log) hooks->on_log(hooks->ctx, &log);
            t_last = t;
            tokens_since = 0;
        }
        if (is_last || stop || (tc.save_every > 0 && step % tc.save_every == 0))
            if ((st = save_checkpoint(out_dir, &m, &opt, &tc, &rng)).code) goto done;
        if (stop && !is_last) {
            st = da_errorf("interrupted at step %ld of %ld; checkpoint saved in %s; continue with --resume", step,
                           tc.steps, out_dir);
            st.code = DA_INTERRUPTED;
            goto done;
        }
    }
done:
    if (metrics) fclose(metrics);
    free(tokens);
    free(targets);
    da_acts_free(acts);
    da_text_data_free(&data);
    da_adamw_free(&opt);
    da_model_free(&m);
    da_matmul_bf16 = 0;
    return st;
}
