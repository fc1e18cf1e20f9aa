/* DIFF against the baseline, side by side (see compare.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"
#include "experiments/bench.h"
#include "experiments/compare.h"
#include "train/eval_loss.h"
#include "eval/needle.h"
#include "eval/needle_attention.h"
#include "eval/outliers.h"
#include "eval/quant_logits.h"
#include "experiments/plot.h"
#include "experiments/stats.h"
#include "attn/attention.h"
#include "io/atomic_file.h"
#include "io/run_lock.h"
#include "experiments/bench.h"
#include "core/clock.h"

void da_compare_config_default(da_compare_config *c) {
    memset(c, 0, sizeof *c);
    c->out_dir = "runs/compare";
    c->steps = 300;
    c->dim = 256;
    c->layers = 4;
    c->heads = 4;
    c->seq = 512;
    c->batch = 8;
    c->seeds = 1;
    c->needles = 3;
    c->queries = 1;
    c->n_archs = da_arch_compare_defaults(c->archs);
}
_Static_assert(DA_ARCH_N <= DA_COMPARE_MAX_ARCHS, "da_arch_compare_defaults may fill every architecture");

da_status da_arch_list_parse(const char *list, da_arch *out, int *n_archs) {
    da_arch archs[DA_COMPARE_MAX_ARCHS]; /* out is left as it was on an error */
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        da_arch a;
        char names[128];
        if (da_arch_parse(tok, &a))
            return da_errorf("--archs: \"%s\" is not an architecture (%s)", tok, da_arch_names_all(names, sizeof names, ", "));
        for (int i = 0; i < n; i++)
            if (archs[i] == a) return da_errorf("--archs: %s is listed twice", tok);
        if (n == DA_COMPARE_MAX_ARCHS) return da_errorf("--archs: at most %d architectures", DA_COMPARE_MAX_ARCHS);
        archs[n++] = a;
    }
    char names[128];
    if (!n) return da_errorf("--archs: empty list (expected e.g. %s)", da_arch_names_default(names, sizeof names, ","));
    memcpy(out, archs, (size_t)n * sizeof *archs);
    *n_archs = n;
    return da_ok();
}

da_status da_compare_parse_archs(da_compare_config *c, const char *list) {
    return da_arch_list_parse(list, c->archs, &c->n_archs);
}

/* The name an architecture goes by in reports and figures. */
const char *da_compare_arch_label(da_arch a) { return da_arch_describe(a).label; }

da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed) {
    if (context < 256) return da_errorf("the needle mix needs a context of at least 256 bytes, got %d", context);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.queries = 1, nc.n_contexts = 1, nc.n_depths = 11;
    for (int i = 0; i <= 10; i++) nc.depths[i] = 10 * i;
    nc.seed = seed ^ 0x6d6978ULL; /* other prompts than the evaluation's */
    da_rng r;
    da_rng_seed(&r, nc.seed);
    long written = 0;
    for (int s = 0; written < bytes && !st.code; s++) {
        /* Documents of 1..4 needles, from barely more than the needles up to
         * the whole context, every needle asked for once, in a random order:
         * short documents and many questions give a small model enough
         * retrieval examples to learn the format within a few hundred steps.
         * n needles take about 50n bytes of the context and 46n after it. */
        const int most = (context - 32) / 96 < 4 ? (context - 32) / 96 : 4; /* 2 at 256 bytes */
        nc.needles = 1 + (int)(da_rng_next(&r) % (uint64_t)most);
        const int lo = 50 * nc.needles + 32, hi = context - 46 * nc.needles;
        const double u = da_rng_uniform(&r);
        nc.contexts[0] = lo + (int)(u * u * (hi - lo)); /* mostly short: more questions per token */
        uint8_t *text;
        size_t n;
        char keys[16][16], values[16][16];
        st = da_needle_prompt(&nc, 0, s % 11, s, &text, &n, keys, values);
        if (st.code) break;
        fwrite(text, 1, n, af.fp);
        written += (long)n;
        int order[16];
        for (int i = 0; i < nc.needles; i++) order[i] = i;
        for (int i = nc.needles - 1; i > 0; i--) {
            int j = (int)(da_rng_next(&r) % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        for (int i = 0; i < nc.needles; i++)
            written += fprintf(af.fp, "\nThe special magic %s number is: %s.", keys[order[i]], values[order[i]]);
        written += fprintf(af.fp, "\n\n");
        free(text);
    }
    if (st.code) {
        da_atomic_abort(&af);
        return st;
    }
    return da_atomic_commit(&af);
}

typedef struct {
    double eval_loss, needle;
    double needle_acc[DA_NEEDLE_MAX_CONTEXTS][DA_NEEDLE_MAX_DEPTHS];
    double attn_answer, attn_noise, digits; /* digits: teacher-forced answer digit accuracy */
    da_outliers_result out;
    double quant[4], quant_needle[4]; /* loss increase and needle accuracy at 16, 8, 6, 4 bits */
    double train_s, eval_s;
    double loss_flash_s, loss_ref_s, fixed_s, per_prompt_s; /* evaluate()'s parts, for the budget */
    size_t n_params;
    double flops_per_token; /* training FLOPs per token at seq (da_train_flops_per_token) */
    da_needle_attention_map map; /* first seed only: one prompt's attention, for the figure */
} arch_result;

static const int QBITS[4] = {16, 8, 6, 4};

/* "key":{"16":v0,"8":v1,"6":v2,"4":v3}, null where the arch has no quantized logits (NaN) */
static void write_json_bits(FILE *fp, const char *key, const char *fmt, const double v[4]) {
    fprintf(fp, "\"%s\":{", key);
    for (int i = 0; i < 4; i++) {
        fprintf(fp, "%s\"%d\":", i ? "," : "", QBITS[i]);
        da_json_number(fp, fmt, v[i]);
    }
    fprintf(fp, "}");
}

/* The paper's numbers (DIFF, Transformer) for the report's last column. */
/* The paper's numbers (DIFF / Transformer), for the report's last column:
 * the row label in report.md, the key in report.json, the text. */
static const char *const PAPER[][3] = {
    {"needle retrieval accuracy", "needle", "0.85 / 0.55 (4K, N=6, R=2)"},
    {"attention on the answer span", "attention_answer", "0.27-0.40 / 0.03-0.09"},
    {"attention noise (irrelevant context)", "attention_noise", "0.01-0.02 / 0.49-0.54"},
    {"top-1 \\|attention logit\\|", "attn_logit_top1", "38.8 / 318.0"},
    {"top-1 \\|hidden state\\|", "hidden_top1", "1688 / 3609"},
    {"needle accuracy, 4-bit logits", "quant_needle_4", "about the 6-bit Transformer's"},
};

static const char *paper_of(const char *label) {
    for (size_t i = 0; i < sizeof PAPER / sizeof PAPER[0]; i++)
        if (!strcmp(PAPER[i][0], label)) return PAPER[i][2];
    return "";
}

static void on_log(void *ctx, const da_train_log *g) {
    (void)ctx;
    fprintf(stderr, "\r  step %ld/%ld", g->step, g->steps);
    if (g->train_loss == g->train_loss) fprintf(stderr, "  loss %.4f", (double)g->train_loss);
    if (g->val_loss == g->val_loss) fprintf(stderr, "  val %.4f", (double)g->val_loss);
    if (g->step > 0) fprintf(stderr, "  %.0f tok/s  ETA %.0fs   ", (double)g->tok_per_s, g->eta_s);
    if (g->step == g->steps) fprintf(stderr, "\n");
    fflush(stderr);
}

/* Equal parameters: c->heads counts DIFF heads. */
static da_status heads_config(const da_compare_config *c, da_arch arch, da_config *cfg) {
    da_config_default(cfg);
    cfg->arch = arch;
    cfg->dim = c->dim;
    cfg->n_layers = c->layers;
    cfg->n_heads = c->heads;
    cfg->n_kv_heads = 0;
    cfg->ffn_hidden = 0;
    cfg->max_seq_len = c->seq;
    return da_config_from_diff_heads(cfg);
}

/* ... and with --match-params each FFN widened to the largest architecture's parameters. */
static da_status arch_config(const da_compare_config *c, da_arch arch, da_config *cfg) {
    da_status st = heads_config(c, arch, cfg);
    if (st.code || !c->match_params) return st;
    da_config all[DA_COMPARE_MAX_ARCHS];
    int mine = 0;
    for (int a = 0; a < c->n_archs && !st.code; a++) {
        st = heads_config(c, c->archs[a], &all[a]);
        if (c->archs[a] == arch) mine = a;
    }
    if (st.code) return st;
    da_match_params(all, c->n_archs);
    *cfg = all[mine];
    return st;
}

/* Validation windows of the evaluation: flash-kernel loss, and each of the
 * exact and quantized reference-kernel losses. */
enum { FLASH_WINDOWS = 64, REF_WINDOWS = 32 };

/* Every evaluation of one trained model. With `windows_flash`/`windows_ref`
 * and `nc` scaled down, the same code times a probe for the budget: r gets the
 * time of each part. */
static da_status evaluate_windows(const da_compare_config *c, da_model *m, const char *data, float val_fraction,
                                  const da_needle_config *nc, int first_seed, int windows_flash, int windows_ref,
                                  arch_result *r) {
    const char *name = da_arch_name(m->cfg.arch);
    da_text_data d;
    da_status st = da_text_data_load(&d, data, val_fraction, c->seq);
    if (st.code) return st;
    if (!c->quiet) fprintf(stderr, "compare: evaluating %s: loss", name);
    da_eval_loss_result el, exact, q;
    double t0 = da_now_s();
    st = da_eval_loss(m, &d, c->seq, windows_flash, 4, DA_ATTN_FLASH, &el);
    r->eval_loss = el.loss;
    r->loss_flash_s = da_now_s() - t0;
    t0 = da_now_s();
    da_engine *e = NULL;
    if (!st.code) st = da_engine_from_model(&e, m);
    if (!st.code) st = da_eval_loss_logit_bits(e, &d, c->seq, windows_ref, 0, &exact);
    const int exact_only = da_arch_describe(m->cfg.arch).exact_logits_only; /* quantized logits: NaN */
    for (int i = 0; i < 4 && !st.code; i++) {
        if (!exact_only) st = da_eval_loss_logit_bits(e, &d, c->seq, windows_ref, QBITS[i], &q);
        r->quant[i] = exact_only ? NAN : q.loss - exact.loss;
    }
    da_engine_free(e);
    r->loss_ref_s = da_now_s() - t0;
    if (!c->quiet) fprintf(stderr, ", outliers");
    t0 = da_now_s();
    if (!st.code) st = da_eval_outliers(m, &d, c->seq, 4, &r->out);
    r->fixed_s = da_now_s() - t0;
    da_text_data_free(&d);
    if (!c->quiet) fprintf(stderr, ", needle retrieval");
    t0 = da_now_s();
    da_needle_result nr = {0};
    if (!st.code) st = da_needle_eval_model(m, nc, 0, &nr);
    r->needle = nr.overall;
    for (int i = 0; i < nc->n_contexts && !st.code; i++)
        for (int j = 0; j < nc->n_depths; j++) r->needle_acc[i][j] = nr.acc[i][j];
    if (!c->quiet) fprintf(stderr, ", with quantized logits");
    for (int i = 0; i < 4 && !st.code; i++) {
        if (!exact_only) st = da_needle_eval_model(m, nc, QBITS[i], &nr);
        r->quant_needle[i] = exact_only ? NAN : nr.overall;
    }
    if (!c->quiet) fprintf(stderr, ", attention\n");
    da_needle_attention_result ar = {0};
    if (!st.code) st = da_eval_needle_attention(m, nc, &ar);
    r->attn_answer = ar.answer_all, r->attn_noise = ar.noise_all, r->digits = ar.digits_all;
    r->per_prompt_s = (da_now_s() - t0) / ((double)nc->n_contexts * nc->n_depths * nc->samples);
    t0 = da_now_s();
    if (!st.code && first_seed)
        st = da_needle_attention_map_of(m, nc, nc->n_contexts - 1, nc->n_depths / 2, 0, &r->map);
    r->fixed_s += da_now_s() - t0;
    return st;
}

static da_status evaluate(const da_compare_config *c, da_model *m, const char *data, float val_fraction,
                          const da_needle_config *nc, int first_seed, arch_result *r) {
    return evaluate_windows(c, m, data, val_fraction, nc, first_seed, FLASH_WINDOWS, REF_WINDOWS, r);
}

/* A run's training time from its metrics.jsonl: elapsed_s restarts with each
 * resumed session, so the sessions' last values are summed. 0 without lines. */
static double run_elapsed(const char *dir) {
    char p[4300], line[512];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    FILE *fp = fopen(p, "r");
    double done = 0, last = 0;
    while (fp && fgets(line, sizeof line, fp)) {
        const char *k = strstr(line, "\"elapsed_s\":");
        if (!k) continue;
        const double e = atof(k + 12);
        if (e < last) done += last; /* a new session began */
        last = e;
    }
    if (fp) fclose(fp);
    return done + last;
}

static da_status run_arch(const da_compare_config *c, da_arch arch, uint64_t seed, int first_seed, const char *data,
                          const da_needle_config *nc, arch_result *r) {
    char dir[4096], model_path[4200];
    snprintf(dir, sizeof dir, "%s/%s_seed%llu", c->out_dir, da_arch_name(arch), (unsigned long long)seed);
    da_config cfg;
    da_status st = arch_config(c, arch, &cfg);
    if (st.code) return st;
    da_train_config tc;
    da_train_config_default(&tc);
    tc.steps = c->steps;
    tc.warmup = c->steps / 10;
    tc.batch = c->batch;
    tc.seq = c->seq;
    tc.seed = seed;
    tc.eval_every = c->steps / 5 > 0 ? c->steps / 5 : 0;
    tc.save_every = c->steps / 10 > 0 ? c->steps / 10 : 1; /* what --resume can continue from */
    /* --resume: a finished run is kept, an interrupted one continues */
    da_config saved_cfg;
    da_train_config saved_tc;
    long done = -1;
    if (c->resume && !da_train_state_peek(dir, &saved_cfg, &saved_tc, &done).code) {
        if (saved_cfg.dim != cfg.dim || saved_cfg.n_layers != cfg.n_layers || saved_cfg.n_heads != cfg.n_heads ||
            saved_cfg.ffn_hidden != cfg.ffn_hidden ||
            saved_cfg.max_seq_len != cfg.max_seq_len || saved_tc.batch != tc.batch)
            return da_errorf("%s was trained with dim %d, %d layers, %d heads, seq %d, batch %d, %ld steps; "
                             "--resume needs the flags of the first run",
                             dir, saved_cfg.dim, saved_cfg.n_layers, saved_cfg.n_heads, saved_cfg.max_seq_len,
                             saved_tc.batch, saved_tc.steps);
    } else {
        done = -1;
    }
    if (done >= c->steps) {
        if (!c->quiet) fprintf(stderr, "compare: %s (seed %llu) already trained for %ld steps: kept\n",
                               da_arch_name(arch), (unsigned long long)seed, c->steps);
    } else {
        if (!c->quiet)
            fprintf(stderr, "compare: training %s (seed %llu) for %ld steps%s\n", da_arch_name(arch),
                    (unsigned long long)seed, c->steps, done >= 0 ? ", resumed from its checkpoint" : "");
        da_train_hooks hooks = {.on_log = c->quiet ? NULL : on_log, .stop = c->stop};
        st = da_train(&cfg, &tc, data, dir, done >= 0 ? DA_RUN_RESUME : c->force ? DA_RUN_OVERWRITE : DA_RUN_NEW,
                      &hooks);
        if (st.code == DA_INTERRUPTED) {
            /* da_train's message names its own --resume; this job continues with compare's */
            da_status e = da_errorf("interrupted while training %s (seed %llu); the checkpoint is saved: run "
                                    "the same compare command with --resume to continue",
                                    da_arch_name(arch), (unsigned long long)seed);
            e.code = DA_INTERRUPTED;
            return e;
        }
        if (st.code) return st;
    }
    r->train_s = run_elapsed(dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    da_model m;
    if ((st = da_model_load(&m, model_path)).code) return st;
    r->n_params = m.n_params;
    r->flops_per_token = da_train_flops_per_token(&m.cfg, c->seq);
    double t0 = da_now_s();
    st = evaluate(c, &m, data, tc.val_fraction, nc, first_seed, r);
    r->eval_s = da_now_s() - t0;
    da_model_free(&m);
    return st;
}

/* Steps that make the whole job fit budget_minutes. Three timed training
 * steps per architecture (after a warm-up one) give the training rate; a probe
 * evaluation of each freshly initialised model, with 4 windows per loss and
 * one prompt per needle context, is scaled up to the real one. Evaluations
 * cost more than training at long contexts (the reference kernel's T x T maps,
 * a prefill per needle question), so a fixed share of the budget for them
 * overran it by a third at 2,176 bytes. */
static da_status steps_for_budget(const da_compare_config *c, const char *data, float val_fraction,
                                  const da_needle_config *nc, long *steps) {
    const double t_start = da_now_s();
    double step_s = 0, eval_s = 0;
    da_compare_config quiet = *c;
    quiet.quiet = 1;
    da_needle_config probe_nc = *nc;
    probe_nc.samples = 1;
    probe_nc.n_depths = 1;
    probe_nc.depths[0] = 50;
    const double prompts = (double)nc->n_contexts * nc->n_depths * nc->samples;
    if (!c->quiet) fprintf(stderr, "compare: timing a training step and a probe evaluation per architecture\n");
    for (int a = 0; a < c->n_archs; a++) {
        da_config cfg;
        da_status st = arch_config(c, c->archs[a], &cfg);
        if (st.code) return st;
        da_bench_result b;
        const da_exec x = da_exec_default();
        if ((st = da_bench_train(&cfg, c->batch, c->seq, 1, 3, DA_ATTN_FLASH, &x, &b)).code) return st;
        step_s += b.ms_mean / 1000.0;
        da_model m;
        if ((st = da_model_create(&m, &cfg)).code) return st;
        da_model_init(&m, 1);
        arch_result r = {0};
        st = evaluate_windows(&quiet, &m, data, val_fraction, &probe_nc, 1, 4, 4, &r);
        da_model_free(&m);
        free(r.map.map);
        if (st.code) return st;
        const double per_seed = r.loss_flash_s * FLASH_WINDOWS / 4 + r.loss_ref_s * REF_WINDOWS / 4 +
                                r.per_prompt_s * prompts + r.fixed_s;
        eval_s += per_seed * c->seeds;
    }
    const double left = c->budget_minutes * 60.0 - (da_now_s() - t_start) - eval_s;
    /* 10% on top of the timed steps: the validation passes and checkpoints
     * of training, and a shared machine's slower spells (a 6-minute budget
     * ran 13% over without it) */
    *steps = left > 0 ? (long)(left / (1.1 * step_s * c->seeds)) : 0;
    if (*steps < 20)
        return da_errorf("--budget-minutes %g leaves %ld training steps per model: the evaluations take about %.0f s "
                         "and a step of every architecture %.2f s (%d seed(s)); raise the budget or lower --seq, "
                         "--needles, --dim or --seeds",
                         c->budget_minutes, *steps, eval_s, step_s, c->seeds);
    if (!c->quiet)
        fprintf(stderr,
                "compare: %.2f s per step of every architecture, about %.0f s of evaluations: %ld steps per model "
                "fit %g minutes\n",
                step_s, eval_s, *steps, c->budget_minutes);
    return da_ok();
}

/* Loss curves from a run's metrics.jsonl: train loss per logged step, val
 * loss at evaluation steps (NAN elsewhere). */
static int read_curves(const char *dir, double *step, double *train, double *val, int cap) {
    char p[4300], line[512];
    snprintf(p, sizeof p, "%s/metrics.jsonl", dir);
    FILE *fp = fopen(p, "r");
    int n = 0;
    while (fp && n < cap && fgets(line, sizeof line, fp)) {
        long st;
        if (sscanf(line, "{\"step\":%ld", &st) != 1) continue;
        const char *t = strstr(line, "\"train_loss\":"), *v = strstr(line, "\"val_loss\":");
        step[n] = (double)st;
        train[n] = t ? atof(t + 13) : NAN;
        val[n] = v ? atof(v + 11) : NAN;
        n++;
    }
    if (fp) fclose(fp);
    return n;
}

enum { NA = DA_COMPARE_MAX_ARCHS };

/* Training and validation loss of every arch's first seed, from its run's log. */
static da_status loss_figure(const da_compare_config *c, const char *const *groups) {
    const int na = c->n_archs;
    enum { CAP = 8192 };
    static double step[NA][CAP], tr[NA][CAP], va[NA][CAP];
    char names[2 * NA][48], p[4200];
    da_series ls[2 * NA];
    for (int a = 0; a < na; a++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s_seed1337", c->out_dir, da_arch_name(c->archs[a]));
        const int n = read_curves(dir, step[a], tr[a], va[a], CAP);
        snprintf(names[a], sizeof names[a], "%s train", groups[a]);
        snprintf(names[na + a], sizeof names[na + a], "%s validation", groups[a]);
        ls[a] = (da_series){names[a], step[a], tr[a], n};
        ls[na + a] = (da_series){names[na + a], step[a], va[a], n};
    }
    snprintf(p, sizeof p, "%s/loss_curves.png", c->out_dir);
    return da_plot_lines(p, "Loss (first seed)", "step", "loss (nats/token)", ls, 2 * na);
}

static da_status figures(const da_compare_config *c, const da_needle_config *nc, arch_result res[NA][16]) {
    char p[4200];
    da_status st;
    const int na = c->n_archs;
    const char *groups[NA];
    for (int a = 0; a < na; a++) groups[a] = da_compare_arch_label(c->archs[a]);
    if ((st = loss_figure(c, groups)).code) return st;
    /* needle accuracy by depth (mean over contexts) and by context (mean over depths), mean over seeds */
    char labels[DA_NEEDLE_MAX_DEPTHS][16];
    const char *cats[DA_NEEDLE_MAX_DEPTHS];
    double acc[NA][DA_NEEDLE_MAX_DEPTHS];
    for (int j = 0; j < nc->n_depths; j++) {
        snprintf(labels[j], sizeof labels[j], "%d%%", nc->depths[j]);
        cats[j] = labels[j];
        for (int a = 0; a < na; a++) {
            acc[a][j] = 0;
            for (int s = 0; s < c->seeds; s++)
                for (int i = 0; i < nc->n_contexts; i++)
                    acc[a][j] += res[a][s].needle_acc[i][j] / (c->seeds * nc->n_contexts);
        }
    }
    const double *av[NA];
    for (int a = 0; a < na; a++) av[a] = acc[a];
    snprintf(p, sizeof p, "%s/needle_by_depth.png", c->out_dir);
    if ((st = da_plot_bars(p, "Needle retrieval accuracy by depth of the asked needle", "accuracy", cats,
                           nc->n_depths, groups, av, na)).code)
        return st;
    for (int i = 0; i < nc->n_contexts; i++) {
        snprintf(labels[i], sizeof labels[i], "%d bytes", nc->contexts[i]);
        cats[i] = labels[i];
        for (int a = 0; a < na; a++) {
            acc[a][i] = 0;
            for (int s = 0; s < c->seeds; s++)
                for (int j = 0; j < nc->n_depths; j++) acc[a][i] += res[a][s].needle_acc[i][j] / (c->seeds * nc->n_depths);
        }
    }
    snprintf(p, sizeof p, "%s/needle_by_context.png", c->out_dir);
    if ((st = da_plot_bars(p, "Needle retrieval accuracy by context length", "accuracy", cats, nc->n_contexts,
                           groups, av, na)).code)
        return st;
    /* one prompt's attention, first seed, every model on one scale */
    da_attention_band bands[NA];
    for (int a = 0; a < na; a++) {
        const da_needle_attention_map *mp = &res[a][0].map;
        const da_arch arch = c->archs[a];
        bands[a] = (da_attention_band){da_arch_describe(arch).map_note, mp->map, mp->rows, mp->cols, mp->span_begin,
                                       mp->span_end, mp->needle_begin, mp->needle_end};
    }
    snprintf(p, sizeof p, "%s/attention_heatmap.png", c->out_dir);
    if ((st = da_plot_attention_bands(p, "Attention of the answer positions (mean over layers and heads)", bands, na))
            .code)
        return st;
    /* outliers, mean over seeds */
    const char *ocats[4] = {"top-1 |logit|", "top-10 |logit|", "top-1 |hidden|", "top-10 |hidden|"};
    double ov[NA][4] = {{0}};
    for (int a = 0; a < na; a++)
        for (int s = 0; s < c->seeds; s++) {
            const da_outliers_result *o = &res[a][s].out;
            ov[a][0] += o->logits.top[0] / c->seeds, ov[a][1] += o->logits.top[3] / c->seeds;
            ov[a][2] += o->hidden.top[0] / c->seeds, ov[a][3] += o->hidden.top[3] / c->seeds;
        }
    const double *ovp[NA];
    for (int a = 0; a < na; a++) ovp[a] = ov[a];
    snprintf(p, sizeof p, "%s/outliers.png", c->out_dir);
    if ((st = da_plot_bars(p, "Largest attention logits and hidden states", "|value|", ocats, 4, groups, ovp, na)).code)
        return st;
    /* quantized attention logits: loss cost and retrieval accuracy against bits */
    static const double bits_x[4] = {16, 8, 6, 4};
    double qd[NA][4] = {{0}}, qn[NA][4] = {{0}};
    da_series qs[NA], qa[NA];
    int nq = 0; /* the archs with quantized logits (NaN: none) */
    for (int a = 0; a < na; a++) {
        for (int s = 0; s < c->seeds; s++)
            for (int i = 0; i < 4; i++) qd[a][i] += res[a][s].quant[i] / c->seeds, qn[a][i] += res[a][s].quant_needle[i] / c->seeds;
        if (isnan(qd[a][0])) continue;
        qs[nq] = (da_series){groups[a], bits_x, qd[a], 4};
        qa[nq++] = (da_series){groups[a], bits_x, qn[a], 4};
    }
    snprintf(p, sizeof p, "%s/quant_logits.png", c->out_dir);
    if ((st = da_plot_lines(p, "Validation loss increase with quantized attention logits", "bits",
                            "loss increase (nats)", qs, nq)).code)
        return st;
    snprintf(p, sizeof p, "%s/quant_needle.png", c->out_dir);
    return da_plot_lines(p, "Needle retrieval accuracy with quantized attention logits", "bits", "accuracy", qa, nq);
}

/* The slot of softmax among c->archs, or -1: each DIFF variant is judged against it. */
static int baseline_slot(const da_compare_config *c) {
    for (int a = 0; a < c->n_archs; a++)
        if (c->archs[a] == da_arch_baseline()) return a;
    return -1;
}

static void write_json(FILE *fp, const da_compare_config *c, const char *data, const da_needle_config *nc,
                       arch_result res[NA][16]) {
    fprintf(fp, "{\"data\":\"%s\",\"steps\":%ld,\"budget_minutes\":%g,\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,"
                "\"seq\":%d,\"batch\":%d,\"seeds\":%d,\"needle\":{\"needles\":%d,\"queries\":%d,\"samples\":%d,"
                "\"contexts\":[",
            data, c->steps, c->budget_minutes, c->dim, c->layers, c->heads, c->seq, c->batch, c->seeds, nc->needles,
            nc->queries, nc->samples);
    for (int i = 0; i < nc->n_contexts; i++) fprintf(fp, "%s%d", i ? "," : "", nc->contexts[i]);
    fprintf(fp, "],\"depths\":[");
    for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%d", j ? "," : "", nc->depths[j]);
    fprintf(fp, "]},\"archs\":{");
    for (int a = 0; a < c->n_archs; a++) {
        fprintf(fp, "%s\"%s\":[", a ? "," : "", da_arch_name(c->archs[a]));
        for (int s = 0; s < c->seeds; s++) {
            const arch_result *r = &res[a][s];
            fprintf(fp, "%s{\"seed\":%d,\"n_params\":%zu,\"train_flops_per_token\":%.6g,\"train_seconds\":%.1f,"
                        "\"eval_seconds\":%.1f,\"val_loss\":%.6f,\"needle\":%.4f,\"needle_by_context_depth\":[",
                    s ? "," : "", 1337 + s, r->n_params, r->flops_per_token, r->train_s, r->eval_s, r->eval_loss,
                    r->needle);
            for (int i = 0; i < nc->n_contexts; i++) {
                fprintf(fp, "%s[", i ? "," : "");
                for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%.4f", j ? "," : "", r->needle_acc[i][j]);
                fprintf(fp, "]");
            }
            fprintf(fp, "],\"answer_digit_accuracy\":%.4f,\"attention_answer\":%.4f,\"attention_noise\":%.4f,",
                    r->digits, r->attn_answer, r->attn_noise);
            fprintf(fp, "\"attn_logit_top1\":%.4f,\"attn_logit_top10\":%.4f,\"attn_logit_median\":%.4f,"
                        "\"hidden_top1\":%.4f,\"hidden_top10\":%.4f,\"hidden_median\":%.4f,",
                    r->out.logits.top[0], r->out.logits.top[3], r->out.logits.median, r->out.hidden.top[0],
                    r->out.hidden.top[3], r->out.hidden.median);
            write_json_bits(fp, "quant_delta_loss", "%.6f", r->quant);
            fprintf(fp, ",");
            write_json_bits(fp, "quant_needle", "%.4f", r->quant_needle);
            fprintf(fp, "}");
        }
        fprintf(fp, "]");
    }
    fprintf(fp, "},\"paper\":{");
    for (size_t i = 0; i < sizeof PAPER / sizeof PAPER[0]; i++)
        fprintf(fp, "%s\"%s\":\"%s\"", i ? "," : "", PAPER[i][1], PAPER[i][2]);
    fprintf(fp, "}}\n");
}

static double context_accuracy(const arch_result *r, int ci, int n_depths) {
    double acc = 0;
    for (int j = 0; j < n_depths; j++) acc += r->needle_acc[ci][j] / n_depths;
    return acc;
}

static void write_md(FILE *fp, const da_compare_config *c, const char *data, const da_needle_config *nc,
                     arch_result res[NA][16]) {
    const int na = c->n_archs, base = baseline_slot(c);
    fprintf(fp, "# ");
    for (int a = 0; a < na; a++) fprintf(fp, "%s%s", a ? (a + 1 < na ? ", " : " and ") : "", da_compare_arch_label(c->archs[a]));
    fprintf(fp, " side by side\n\nEqual tokens, data and seed: dim %d, %d layers, %d DIFF heads (the others have "
                "their own heads at that size: %d for the baseline, of half the size), %ld steps of %d x %d tokens, "
                "%d seed(s). Data: %s. DIFF and the baseline have equal parameters; ",
            c->dim, c->layers, c->heads, da_arch_heads(da_arch_baseline(), c->heads), c->steps, c->batch, c->seq,
            c->seeds, data);
    for (int a = 0; a < na; a++) {
        const da_arch_info in = da_arch_describe(c->archs[a]);
        if (in.extra_params_note[0]) fprintf(fp, "%s adds %s; ", in.label, in.extra_params_note);
    }
    fprintf(fp, "see the parameters row.\n\n");
    fprintf(fp, "| metric |");
    for (int a = 0; a < na; a++) fprintf(fp, " %s |", da_compare_arch_label(c->archs[a]));
    for (int a = 0; a < na && base >= 0; a++)
        if (a != base) fprintf(fp, " %s vs softmax |", da_compare_arch_label(c->archs[a]));
    fprintf(fp, " paper (DIFF / Transformer) |\n|---|");
    for (int a = 0; a < na + (base >= 0 ? na - 1 : 0) + 1; a++) fprintf(fp, "---|");
    fprintf(fp, "\n");
#define ROW(label, expr, fmt)                                                                                   \
    do {                                                                                                        \
        double v[NA][16], mean[NA], sd[NA];                                                                     \
        fprintf(fp, "| %s |", label);                                                                           \
        for (int a = 0; a < na; a++) {                                                                          \
            for (int s = 0; s < c->seeds; s++) {                                                                \
                const arch_result *r = &res[a][s];                                                              \
                v[a][s] = (expr);                                                                               \
            }                                                                                                   \
            da_mean_sd(v[a], c->seeds, &mean[a], &sd[a]);                                                       \
            if (isnan(mean[a])) fprintf(fp, " n/a |"); /* not measurable for the arch */                       \
            else fprintf(fp, " " fmt " ± " fmt " |", mean[a], sd[a]);                                           \
        }                                                                                                       \
        for (int a = 0; a < na && base >= 0; a++) {                                                             \
            if (a == base) continue;                                                                            \
            if (isnan(mean[a]) || isnan(mean[base])) {                                                          \
                fprintf(fp, " – |");                                                                            \
                continue;                                                                                       \
            }                                                                                                   \
            char vd[64];                                                                                        \
            da_verdict_spread(vd, sizeof vd, da_compare_arch_label(c->archs[a]), c->seeds, mean[a], sd[a], mean[base], sd[base],       \
                    0.5 * pow(10, -atoi(strchr(fmt, '.') + 1)));                                                \
            fprintf(fp, " %s |", vd);                                                                           \
        }                                                                                                       \
        fprintf(fp, " %s |\n", paper_of(label));                                                                \
    } while (0)
    ROW("parameters", (double)r->n_params, "%.0f");
    ROW("training FLOPs per token", r->flops_per_token, "%.4g");
    ROW("validation loss (nats/token)", r->eval_loss, "%.4f");
    ROW("needle retrieval accuracy", r->needle, "%.3f");
    for (int i = 0; i < nc->n_contexts; i++) {
        char label[64];
        snprintf(label, sizeof label, "needle accuracy, %d-byte prompts", nc->contexts[i]);
        ROW(label, context_accuracy(r, i, nc->n_depths), "%.3f");
    }
    ROW("answer digits right, teacher-forced (chance 0.1)", r->digits, "%.3f");
    ROW("attention on the answer span", r->attn_answer, "%.4f");
    ROW("attention noise (irrelevant context)", r->attn_noise, "%.4f");
    ROW("top-1 \\|attention logit\\|", r->out.logits.top[0], "%.2f");
    ROW("median \\|attention logit\\|", r->out.logits.median, "%.3f");
    ROW("top-1 \\|hidden state\\|", r->out.hidden.top[0], "%.2f");
    ROW("median \\|hidden state\\|", r->out.hidden.median, "%.3f");
    ROW("Δ loss, 8-bit logits", r->quant[1], "%.4f");
    ROW("Δ loss, 6-bit logits", r->quant[2], "%.4f");
    ROW("Δ loss, 4-bit logits", r->quant[3], "%.4f");
    ROW("needle accuracy, 8-bit logits", r->quant_needle[1], "%.3f");
    ROW("needle accuracy, 6-bit logits", r->quant_needle[2], "%.3f");
    ROW("needle accuracy, 4-bit logits", r->quant_needle[3], "%.3f");
    ROW("training time (s)", r->train_s, "%.0f");
#undef ROW
    fprintf(fp, "\nValues are mean ± sample standard deviation over seeds (± 0 with one seed: no spread measured). "
                "\"within noise\" means the two means differ by less than the sum of their spreads; with one seed "
                "no difference can be called. The paper's numbers come from 3B-parameter models at 4K context and "
                "are there for orientation, not as a target at this scale.\n\n");
    fprintf(fp, "Needle prompts: %d needles, %d asked, %d samples per (context, depth) at depths ", nc->needles,
            nc->queries, nc->samples);
    for (int j = 0; j < nc->n_depths; j++) fprintf(fp, "%s%d%%", j ? ", " : "", nc->depths[j]);
    fprintf(fp, "; contexts of ");
    for (int i = 0; i < nc->n_contexts; i++) fprintf(fp, "%s%d", i ? " and " : "", nc->contexts[i]);
    fprintf(fp, " bytes. Attention shares: from the positions that generate the answer (teacher-forced), mean over "
                "layers, heads and prompts; each architecture's combined map (");
    for (int a = 0; a < na; a++) fprintf(fp, "%s%s", a ? "; " : "", da_arch_describe(c->archs[a]).map_note);
    fprintf(fp, ") divided by its absolute mass, so negative weights subtract (`diffattn eval attention --help`). "
                "Quantized logits: dynamic absmax per query row, symmetric. Every number is in report.json.\n");
    fprintf(fp, "\n![loss curves](loss_curves.png)\n\n![needle retrieval by depth](needle_by_depth.png)\n\n"
                "![needle retrieval by context](needle_by_context.png)\n\n"
                "![attention of the answer positions](attention_heatmap.png)\n\n![outliers](outliers.png)\n\n"
                "![quantized logits: loss](quant_logits.png)\n\n![quantized logits: retrieval](quant_needle.png)\n");
}

/* A new compare does not replace one silently. */
static da_status refuse_existing_compare(const char *out_dir, da_arch first) {
    char run[64];
    snprintf(run, sizeof run, "%s_seed1337/train_state.safetensors", da_arch_name(first));
    const char *const files[] = {"report.json", run};
    return da_refuse_existing(out_dir, "compare", files, 2);
}

static da_status compare_locked(const da_compare_config *cfg, int *lock_fd);

/* The whole comparison holds out_dir's lock (io/run_lock.h). */
da_status da_compare(const da_compare_config *cfg) {
    int lock_fd = -1;
    da_status st = compare_locked(cfg, &lock_fd);
    da_run_unlock(lock_fd);
    return st;
}

static da_status compare_locked(const da_compare_config *cfg, int *lock_fd) {
    da_compare_config cc = *cfg, *c = &cc;
    if (c->seeds < 1 || c->seeds > 16) return da_errorf("--seeds must be 1..16");
    if (c->n_archs < 1 || c->n_archs > DA_COMPARE_MAX_ARCHS)
        return da_errorf("compare: %d architectures (1..%d)", c->n_archs, DA_COMPARE_MAX_ARCHS);
    if (c->seq < 256) return da_errorf("--seq %d: needle prompts need at least 256", c->seq);
    if (c->needles < 1 || c->needles > 16 || c->queries < 1 || c->queries > c->needles)
        return da_errorf("--needles must be 1..16 and --queries 1..--needles");
    if (!(c->budget_minutes >= 0)) return da_errorf("--budget-minutes must be positive");
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.needles = c->needles, nc.queries = c->queries, nc.samples = 8;
    if (c->n_contexts > 0) {
        nc.n_contexts = c->n_contexts;
        for (int i = 0; i < c->n_contexts; i++) {
            nc.contexts[i] = c->contexts[i];
            if (c->contexts[i] < 128 || c->contexts[i] > c->seq - 64)
                return da_errorf("--needle-context %d: must lie in 128..seq - 64 = %d (room for the question and "
                                 "the answer)", c->contexts[i], c->seq - 64);
        }
    } else {
        nc.n_contexts = 0;
        if (c->seq / 2 - 64 >= 128) nc.contexts[nc.n_contexts++] = c->seq / 2 - 64;
        nc.contexts[nc.n_contexts++] = c->seq - 64;
    }
    da_status st = da_make_dirs(c->out_dir);
    if (st.code) return st;
    if ((st = da_run_lock(c->out_dir, lock_fd)).code) return st;
    if (!c->resume && !c->force && (st = refuse_existing_compare(c->out_dir, c->archs[0])).code) return st;
    char mix[4200];
    const char *data = c->data;
    if (!data) {
        snprintf(mix, sizeof mix, "%s/needle_mix.txt", c->out_dir);
        if ((st = da_needle_mix_write(mix, 4L << 20, c->seq, 1)).code) return st;
        data = mix;
    }
    da_train_config tc_default; /* run_arch trains with its val_fraction */
    da_train_config_default(&tc_default);
    /* --resume: the steps are the first run's (a budget is not timed again) */
    char first[4200];
    snprintf(first, sizeof first, "%s/%s_seed1337", c->out_dir, da_arch_name(c->archs[0]));
    da_config first_cfg;
    da_train_config first_tc;
    long first_done;
    const int have_first = c->resume && !da_train_state_peek(first, &first_cfg, &first_tc, &first_done).code;
    if (have_first && c->steps_given && c->steps != first_tc.steps) {
        if (!c->quiet)
            fprintf(stderr, "compare: resuming %s with steps %ld (the first run had %ld): every run continues to %ld\n",
                    c->out_dir, c->steps, first_tc.steps, c->steps);
    } else if (have_first) {
        c->steps = first_tc.steps;
        if (!c->quiet) fprintf(stderr, "compare: resuming %s: %ld steps per model\n", c->out_dir, c->steps);
    } else if (c->budget_minutes > 0 &&
               (st = steps_for_budget(c, data, tc_default.val_fraction, &nc, &c->steps)).code) {
        return st;
    }
    arch_result(*res)[16] = calloc(NA, sizeof *res); /* every arch and seed: about 1 MB */
    if (!res) return da_errorf("out of memory for the results");
    for (int s = 0; s < c->seeds && !st.code; s++)
        for (int a = 0; a < c->n_archs && !st.code; a++) {
            st = run_arch(c, c->archs[a], 1337 + (uint64_t)s, s == 0, data, &nc, &res[a][s]);
            if (!st.code && c->stop && *c->stop) {
                st = da_errorf("interrupted after evaluating %s (seed %d): run the same compare command with "
                               "--resume to continue (trained runs are kept; evaluations run again)",
                               da_arch_name(c->archs[a]), 1337 + s);
                st.code = DA_INTERRUPTED;
            }
        }

    char path[4200];
    da_atomic_file af;
    if (!st.code) {
        snprintf(path, sizeof path, "%s/report.json", c->out_dir);
        char *json = NULL;
        size_t json_n = 0;
        FILE *ms = open_memstream(&json, &json_n);
        if (ms) write_json(ms, c, data, &nc, res);
        if (!ms || fclose(ms)) st = da_errorf("%s: out of memory", path);
        else if (!(st = da_atomic_open(&af, path)).code)
            st = da_json_write_finite(af.fp, json) ? da_atomic_fail(&af, errno) : da_atomic_commit(&af);
        free(json);
    }
    if (!st.code) st = figures(c, &nc, res);
    if (!st.code) {
        snprintf(path, sizeof path, "%s/report.md", c->out_dir);
        if (!(st = da_atomic_open(&af, path)).code) {
            write_md(af.fp, c, data, &nc, res);
            st = da_atomic_commit(&af);
        }
    }
    for (int a = 0; a < NA; a++) free(res[a][0].map.map);
    free(res);
    return st;
}
