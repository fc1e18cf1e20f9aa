/* DIFF against the baseline, side by side (see compare.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/text_data.h"
#include "eval/compare.h"
#include "eval/eval_loss.h"
#include "eval/needle.h"
#include "eval/outliers.h"
#include "eval/plot.h"
#include "attn/attention.h"
#include "io/atomic_file.h"

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
}

da_status da_needle_mix_write(const char *path, long bytes, int context, uint64_t seed) {
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.needles = 3, nc.queries = 1, nc.n_contexts = 1, nc.n_depths = 11;
    for (int i = 0; i <= 10; i++) nc.depths[i] = 10 * i;
    nc.seed = seed ^ 0x6d6978ULL; /* other prompts than the evaluation's */
    long written = 0;
    for (int s = 0; written < bytes && !st.code; s++) {
        nc.contexts[0] = context / 2 + (int)((unsigned)(s * 2654435761u) % (unsigned)(context / 2 - 64));
        uint8_t *text;
        size_t n;
        char keys[16][16], values[16][16];
        st = da_needle_prompt(&nc, 0, s % 11, s, &text, &n, keys, values);
        if (st.code) break;
        fwrite(text, 1, n, af.fp);
        written += (long)n + fprintf(af.fp, "\nThe special magic %s number is: %s.\n\n", keys[0], values[0]);
        free(text);
    }
    if (st.code) {
        da_atomic_abort(&af);
        return st;
    }
    return da_atomic_commit(&af);
}

typedef struct {
    double final_val, eval_loss, needle, needle_by_depth[DA_NEEDLE_MAX_DEPTHS];
    da_outliers_result out;
    double quant[4]; /* delta loss at 16, 8, 6, 4 bits */
    size_t n_params;
} arch_result;

static const int QBITS[4] = {16, 8, 6, 4};

static void on_log(void *ctx, const da_train_log *g) {
    (void)ctx;
    fprintf(stderr, "\r  step %ld/%ld", g->step, g->steps);
    if (g->train_loss == g->train_loss) fprintf(stderr, "  loss %.4f", (double)g->train_loss);
    if (g->val_loss == g->val_loss) fprintf(stderr, "  val %.4f", (double)g->val_loss);
    if (g->step > 0) fprintf(stderr, "  %.0f tok/s  ETA %.0fs   ", (double)g->tok_per_s, g->eta_s);
    if (g->step == g->steps) fprintf(stderr, "\n");
    fflush(stderr);
}

static da_status run_arch(const da_compare_config *c, da_arch arch, uint64_t seed, const char *data,
                          const da_needle_config *nc, arch_result *r) {
    char dir[4096], model_path[4200];
    snprintf(dir, sizeof dir, "%s/%s_seed%llu", c->out_dir, da_arch_name(arch), (unsigned long long)seed);
    da_config cfg;
    da_config_default(&cfg);
    cfg.arch = arch;
    cfg.dim = c->dim;
    cfg.n_layers = c->layers;
    int mult = arch == DA_ARCH_SOFTMAX ? 2 : 1; /* equal parameters: twice the heads of half the size */
    cfg.n_heads = cfg.n_kv_heads = c->heads * mult;
    cfg.ffn_hidden = da_default_ffn_hidden(c->dim);
    cfg.max_seq_len = c->seq;
    da_train_config tc;
    da_train_config_default(&tc);
    tc.steps = c->steps;
    tc.warmup = c->steps / 10;
    tc.batch = c->batch;
    tc.seq = c->seq;
    tc.seed = seed;
    tc.eval_every = c->steps / 5 > 0 ? c->steps / 5 : 0;
    tc.save_every = 0;
    if (!c->quiet) fprintf(stderr, "compare: training %s (seed %llu) for %ld steps\n", da_arch_name(arch),
                           (unsigned long long)seed, c->steps);
    da_train_hooks hooks = {on_log, NULL, NULL, 0};
    da_status st = da_train(&cfg, &tc, data, dir, 0, c->quiet ? NULL : &hooks);
    if (st.code) return st;
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    da_model m;
    if ((st = da_model_load(&m, model_path)).code) return st;
    r->n_params = m.n_params;
    da_text_data d;
    if ((st = da_text_data_load(&d, data, tc.val_fraction, c->seq)).code) goto done;
    da_eval_loss_result el;
    if ((st = da_eval_loss(&m, &d, c->seq, 64, 4, DA_ATTN_FLASH, &el)).code) goto data_done;
    r->eval_loss = el.loss;
    da_eval_loss_result exact;
    da_attn_logit_bits = 0;
    if ((st = da_eval_loss(&m, &d, c->seq, 32, 4, DA_ATTN_REFERENCE, &exact)).code) goto data_done;
    for (int i = 0; i < 4 && !st.code; i++) {
        da_eval_loss_result q;
        da_attn_logit_bits = QBITS[i];
        st = da_eval_loss(&m, &d, c->seq, 32, 4, DA_ATTN_REFERENCE, &q);
        r->quant[i] = q.loss - exact.loss;
    }
    da_attn_logit_bits = 0;
    if (!c->quiet) fprintf(stderr, "compare: evaluating %s\n", da_arch_name(arch));
    if (!st.code) st = da_eval_outliers(&m, &d, c->seq, 4, &r->out);
    if (!st.code) {
        da_needle_model nm = {&m, 10};
        da_needle_result nr;
        st = da_needle_eval(nc, da_needle_predict_model, &nm, &nr);
        r->needle = nr.overall;
        for (int j = 0; j < nc->n_depths; j++) r->needle_by_depth[j] = nr.acc[0][j];
    }
data_done:
    da_text_data_free(&d);
done:
    da_model_free(&m);
    return st;
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

static da_status figures(const da_compare_config *c, const da_needle_config *nc, arch_result res[2][16]) {
    char p[4200];
    da_status st;
    /* loss curves, first seed */
    enum { CAP = 4096 };
    static double step[2][CAP], tr[2][CAP], va[2][CAP];
    int n[2];
    for (int a = 0; a < 2; a++) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s_seed1337", c->out_dir, a ? "softmax" : "diff");
        n[a] = read_curves(dir, step[a], tr[a], va[a], CAP);
    }
    da_series ls[4] = {{"DIFF train", step[0], tr[0], n[0]}, {"softmax train", step[1], tr[1], n[1]},
                       {"DIFF validation", step[0], va[0], n[0]}, {"softmax validation", step[1], va[1], n[1]}};
    snprintf(p, sizeof p, "%s/loss_curves.png", c->out_dir);
    if ((st = da_plot_lines(p, "Loss (first seed)", "step", "loss (nats/token)", ls, 4)).code) return st;
    /* needle accuracy by depth, mean over seeds */
    const char *groups[2] = {"DIFF", "softmax"};
    char labels[DA_NEEDLE_MAX_DEPTHS][16];
    const char *cats[DA_NEEDLE_MAX_DEPTHS];
    double acc[2][DA_NEEDLE_MAX_DEPTHS];
    for (int j = 0; j < nc->n_depths; j++) {
        snprintf(labels[j], sizeof labels[j], "%d%%", nc->depths[j]);
        cats[j] = labels[j];
        for (int a = 0; a < 2; a++) {
            acc[a][j] = 0;
            for (int s = 0; s < c->seeds; s++) acc[a][j] += res[a][s].needle_by_depth[j] / c->seeds;
        }
    }
    const double *av[2] = {acc[0], acc[1]};
    snprintf(p, sizeof p, "%s/needle_by_depth.png", c->out_dir);
    if ((st = da_plot_bars(p, "Needle retrieval accuracy by depth", "accuracy", cats, nc->n_depths, groups, av, 2)).code)
        return st;
    /* outliers, mean over seeds */
    const char *ocats[4] = {"top-1 |logit|", "top-10 |logit|", "top-1 |hidden|", "top-10 |hidden|"};
    double ov[2][4] = {{0}};
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < c->seeds; s++) {
            const da_outliers_result *o = &res[a][s].out;
            ov[a][0] += o->logits.top[0] / c->seeds, ov[a][1] += o->logits.top[3] / c->seeds;
            ov[a][2] += o->hidden.top[0] / c->seeds, ov[a][3] += o->hidden.top[3] / c->seeds;
        }
    const double *ovp[2] = {ov[0], ov[1]};
    snprintf(p, sizeof p, "%s/outliers.png", c->out_dir);
    if ((st = da_plot_bars(p, "Largest attention logits and hidden states", "|value|", ocats, 4, groups, ovp, 2)).code)
        return st;
    /* loss cost of quantized attention logits */
    static const double bits_x[4] = {16, 8, 6, 4};
    double qd[2][4] = {{0}};
    for (int a = 0; a < 2; a++)
        for (int s = 0; s < c->seeds; s++)
            for (int i = 0; i < 4; i++) qd[a][i] += res[a][s].quant[i] / c->seeds;
    da_series qs[2] = {{"DIFF", bits_x, qd[0], 4}, {"softmax", bits_x, qd[1], 4}};
    snprintf(p, sizeof p, "%s/quant_logits.png", c->out_dir);
    return da_plot_lines(p, "Validation loss increase with quantized attention logits", "bits", "loss increase (nats)",
                         qs, 2);
}

static void mean_sd(const double *x, int n, double *mean, double *sd) {
    double s = 0, ss = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (int i = 0; i < n; i++) ss += (x[i] - *mean) * (x[i] - *mean);
    *sd = n > 1 ? sqrt(ss / (n - 1)) : 0;
}

da_status da_compare(const da_compare_config *c) {
    if (c->seeds < 1 || c->seeds > 16) return da_errorf("--seeds must be 1..16");
    if (c->seq < 256) return da_errorf("--seq %d: needle prompts need at least 256", c->seq);
    da_status st = da_make_dirs(c->out_dir);
    if (st.code) return st;
    char mix[4200];
    const char *data = c->data;
    if (!data) {
        snprintf(mix, sizeof mix, "%s/needle_mix.txt", c->out_dir);
        if ((st = da_needle_mix_write(mix, 4L << 20, c->seq, 1)).code) return st;
        data = mix;
    }
    da_needle_config nc;
    da_needle_config_default(&nc);
    nc.needles = 3, nc.queries = 1, nc.samples = 8;
    nc.contexts[0] = c->seq - 64; /* room for the question and the answer */
    arch_result res[2][16];
    for (int s = 0; s < c->seeds && !st.code; s++)
        for (int a = 0; a < 2 && !st.code; a++)
            st = run_arch(c, a ? DA_ARCH_SOFTMAX : DA_ARCH_DIFF, 1337 + (uint64_t)s, data, &nc, &res[a][s]);
    if (st.code) return st;

    /* report.json: every number; report.md: the side-by-side table */
    char path[4200];
    snprintf(path, sizeof path, "%s/report.json", c->out_dir);
    da_atomic_file af;
    if ((st = da_atomic_open(&af, path)).code) return st;
    FILE *fp = af.fp;
    fprintf(fp, "{\"data\":\"%s\",\"steps\":%ld,\"dim\":%d,\"layers\":%d,\"diff_heads\":%d,\"seq\":%d,\"batch\":%d,"
                "\"seeds\":%d,\"needle\":{\"needles\":%d,\"queries\":%d,\"context\":%d,\"samples\":%d},\"archs\":{",
            data, c->steps, c->dim, c->layers, c->heads, c->seq, c->batch, c->seeds, nc.needles, nc.queries,
            nc.contexts[0], nc.samples);
    for (int a = 0; a < 2; a++) {
        fprintf(fp, "%s\"%s\":[", a ? "," : "", a ? "softmax" : "diff");
        for (int s = 0; s < c->seeds; s++) {
            const arch_result *r = &res[a][s];
            fprintf(fp, "%s{\"seed\":%d,\"n_params\":%zu,\"val_loss\":%.6f,\"needle\":%.4f,\"needle_by_depth\":[", s ? "," : "",
                    1337 + s, r->n_params, r->eval_loss, r->needle);
            for (int j = 0; j < nc.n_depths; j++) fprintf(fp, "%s%.4f", j ? "," : "", r->needle_by_depth[j]);
            fprintf(fp, "],\"attn_logit_top1\":%.4f,\"attn_logit_median\":%.4f,\"hidden_top1\":%.4f,"
                        "\"hidden_median\":%.4f,\"quant_delta_loss\":{\"16\":%.6f,\"8\":%.6f,\"6\":%.6f,\"4\":%.6f}}",
                    r->out.logits.top[0], r->out.logits.median, r->out.hidden.top[0], r->out.hidden.median, r->quant[0],
                    r->quant[1], r->quant[2], r->quant[3]);
        }
        fprintf(fp, "]");
    }
    fprintf(fp, "}}\n");
    if ((st = da_atomic_commit(&af)).code) return st;

    if ((st = figures(c, &nc, res)).code) return st;
    snprintf(path, sizeof path, "%s/report.md", c->out_dir);
    if ((st = da_atomic_open(&af, path)).code) return st;
    fp = af.fp;
    fprintf(fp, "# DIFF against the softmax baseline\n\nEqual parameters, tokens, data and seed: dim %d, %d layers, "
                "%d DIFF heads (the baseline has %d), %ld steps of %d x %d tokens, %d seed(s). Data: %s.\n\n",
            c->dim, c->layers, c->heads, 2 * c->heads, c->steps, c->batch, c->seq, c->seeds, data);
    fprintf(fp, "| metric | DIFF | softmax |\n|---|---|---|\n");
#define ROW(label, expr, fmt)                                                                  \
    do {                                                                                       \
        double v[2][16], mean[2], sd[2];                                                       \
        for (int a = 0; a < 2; a++) {                                                          \
            for (int s = 0; s < c->seeds; s++) {                                               \
                const arch_result *r = &res[a][s];                                             \
                v[a][s] = (expr);                                                              \
            }                                                                                  \
            mean_sd(v[a], c->seeds, &mean[a], &sd[a]);                                         \
        }                                                                                      \
        fprintf(fp, "| %s | " fmt " ± " fmt " | " fmt " ± " fmt " |\n", label, mean[0], sd[0], mean[1], sd[1]); \
    } while (0)
    ROW("validation loss (nats/token)", r->eval_loss, "%.4f");
    ROW("needle retrieval accuracy", r->needle, "%.3f");
    ROW("top-1 \\|attention logit\\|", r->out.logits.top[0], "%.2f");
    ROW("median \\|attention logit\\|", r->out.logits.median, "%.3f");
    ROW("top-1 \\|hidden state\\|", r->out.hidden.top[0], "%.2f");
    ROW("Δ loss, 8-bit logits", r->quant[1], "%.4f");
    ROW("Δ loss, 6-bit logits", r->quant[2], "%.4f");
    ROW("Δ loss, 4-bit logits", r->quant[3], "%.4f");
#undef ROW
    fprintf(fp, "\nValues are mean ± sample standard deviation over seeds (± 0 with one seed: no spread measured). "
                "Where the two columns differ by less than their spread, or with a single seed, treat the difference as "
                "noise. Needle prompts: %d needles, %d asked, %d bytes of context, %d samples per depth at depths "
                "0..100%%; every number is in report.json.\n",
            nc.needles, nc.queries, nc.contexts[0], nc.samples);
    fprintf(fp, "\n![loss curves](loss_curves.png)\n\n![needle retrieval by depth](needle_by_depth.png)\n\n"
                "![outliers](outliers.png)\n\n![quantized logits](quant_logits.png)\n");
    return da_atomic_commit(&af);
}
