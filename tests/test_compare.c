/* compare on a tiny budget: both archs trained and evaluated, report.json
 * parses and holds every number, report.md has the table; the built-in mix
 * asks only for needles present in the same document. */
#include <cairo.h>
#include <cjson/cJSON.h>
#include <unistd.h>

#include "diffattn.h"
#include "study/arch_column.h"
#include "experiments/task_study.h"
#include "experiments/compare.h"
#include "harness.h"

static int test_mix_answers_are_in_context(void) {
    char p[64]; /* the pid: suites of two builds may run at once */
    snprintf(p, sizeof p, "/tmp/da_mix_test_%ld.txt", (long)getpid());
    CHECK(!da_needle_mix_write(p, 20000, 512, 3).code);
    char *s = (char *)th_read_file(p, NULL);
    CHECK(s && strlen(s) >= 20000);
    int docs = 0;
    for (char *doc = s; *doc; docs++) {
        char *end = strstr(doc, "\n\n");
        CHECK(end);
        *end = 0;
        char *q = strrchr(doc, '\n'); /* the question line and its answer */
        CHECK(q);
        *q = 0;
        CHECK(strstr(doc, q + 1)); /* the asked sentence is in the document */
        doc = end + 2;
    }
    CHECK(docs > 20);
    free(s);
    unlink(p);
    return 0;
}

static int test_compare_tiny(void) {
    char dir[] = "/tmp/da_compare_XXXXXX";
    CHECK(mkdtemp(dir));
    da_compare_config c;
    da_compare_config_default(&c);
    c.shape.study.out_dir = dir, c.shape.steps = 10, c.shape.dim = 32, c.shape.layers = 1, c.shape.heads = 2, c.seq = 256, c.shape.batch = 2, c.shape.seeds = 2;
    c.shape.study.quiet = 1;
    da_status st = da_compare(&c);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    char p[128];
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = (char *)th_read_file(p, NULL);
    cJSON *root = cJSON_Parse(js);
    CHECK(root);
    const cJSON *cells = cJSON_GetObjectItem(root, "cells"); /* one cell without a grid */
    CHECK(cJSON_GetArraySize(cells) == 1);
    const cJSON *archs = cJSON_GetObjectItem(cells->child, "archs");
    static const char *const names[3] = {"diff", "diff2", "softmax"}; /* the default --archs, in order */
    CHECK(cJSON_GetArraySize(archs) == 3);
    for (int a = 0; a < 3; a++) {
        const cJSON *runs = cJSON_GetObjectItem(archs, names[a]);
        CHECK(cJSON_GetArraySize(runs) == 2);
        for (const cJSON *r = runs->child; r; r = r->next) {
            CHECK(cJSON_IsNumber(cJSON_GetObjectItem(r, "val_loss")));
            double nd = cJSON_GetObjectItem(r, "needle")->valuedouble;
            CHECK(nd >= 0 && nd <= 1);
            CHECK(cJSON_GetObjectItem(r, "attn_logit_top1")->valuedouble > 0);
            CHECK(cJSON_IsObject(cJSON_GetObjectItem(r, "quant_delta_loss")));
            const cJSON *qn = cJSON_GetObjectItem(r, "quant_needle");
            CHECK(cJSON_IsObject(qn) && cJSON_GetArraySize(qn) == 4);
            const cJSON *by = cJSON_GetObjectItem(r, "needle_by_context_depth");
            CHECK(cJSON_GetArraySize(by) == 1 && cJSON_GetArraySize(by->child) == 5);
            double dig = cJSON_GetObjectItem(r, "answer_digit_accuracy")->valuedouble;
            CHECK(dig >= 0 && dig <= 1);
            double ans = cJSON_GetObjectItem(r, "attention_answer")->valuedouble;
            double noise = cJSON_GetObjectItem(r, "attention_noise")->valuedouble;
            CHECK(fabs(ans) <= 1 && fabs(noise) <= 1 && fabs(ans) + fabs(noise) <= 1.0001 && noise != 0);
        }
    }
    /* equal parameters, up to DIFF's lambda vectors and head norm */
    long pd = (long)cJSON_GetObjectItem(cJSON_GetObjectItem(archs, "diff")->child, "n_params")->valuedouble;
    long ps = (long)cJSON_GetObjectItem(cJSON_GetObjectItem(archs, "softmax")->child, "n_params")->valuedouble;
    CHECK(pd > ps && pd - ps < 200);
    /* DIFF2: the second queries (dim x dim) and lambda_proj (4 heads x dim) of its one layer */
    long p2 = (long)cJSON_GetObjectItem(cJSON_GetObjectItem(archs, "diff2")->child, "n_params")->valuedouble;
    CHECK(p2 - ps == 32 * 32 + 4 * 32);
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = (char *)th_read_file(p, NULL);
    /* the table is recomputable from report.json: mean and sample sd of the seeds */
    const char *row = md ? strstr(md, "| needle accuracy, 4-bit logits | ") : NULL;
    CHECK(row);
    double mean_md[3], sd_md[3];
    CHECK(sscanf(row, "| needle accuracy, 4-bit logits | %lf ± %lf | %lf ± %lf | %lf ± %lf |", &mean_md[0], &sd_md[0],
                 &mean_md[1], &sd_md[1], &mean_md[2], &sd_md[2]) == 6);
    row = strstr(md, "| validation loss (nats/token) | ");
    CHECK(row && sscanf(row, "| validation loss (nats/token) | %lf ± %lf | %lf ± %lf | %lf ± %lf |", &mean_md[0],
                        &sd_md[0], &mean_md[1], &sd_md[1], &mean_md[2], &sd_md[2]) == 6);
    for (int a = 0; a < 3; a++) {
        const cJSON *runs = cJSON_GetObjectItem(archs, names[a]);
        double v0 = cJSON_GetObjectItem(runs->child, "val_loss")->valuedouble;
        double v1 = cJSON_GetObjectItem(runs->child->next, "val_loss")->valuedouble;
        double mean = (v0 + v1) / 2, sd = fabs(v0 - v1) / sqrt(2.0);
        CHECK(fabs(mean - mean_md[a]) < 1e-4 && fabs(sd - sd_md[a]) < 1e-4);
    }
    cJSON_Delete(root);
    free(js);
    CHECK(md && strstr(md, "| metric | DIFF | DIFF2 | softmax | DIFF vs softmax | DIFF2 vs softmax | paper") &&
          strstr(md, "needle retrieval accuracy"));
    CHECK(strstr(md, "attention on the answer span") && strstr(md, "needle accuracy, 4-bit logits"));
    CHECK(strstr(md, "| within noise |") || strstr(md, "| DIFF higher |") || strstr(md, "| DIFF lower |"));
    CHECK(strstr(md, "| DIFF2 higher |") || strstr(md, "| DIFF2 lower |") || strstr(md, "within noise | within noise"));
    /* every figure the report links is a valid PNG of the documented size */
    const char *figs[] = {"loss_curves.png", "needle_by_depth.png", "needle_by_context.png", "attention_heatmap.png",
                          "outliers.png", "quant_logits.png", "quant_needle.png"};
    for (int i = 0; i < 7; i++) {
        CHECK(strstr(md, figs[i]));
        snprintf(p, sizeof p, "%s/%s", dir, figs[i]);
        cairo_surface_t *img = cairo_image_surface_create_from_png(p);
        CHECK(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
        CHECK(cairo_image_surface_get_width(img) == 800 && cairo_image_surface_get_height(img) == 500);
        cairo_surface_destroy(img);
    }
    free(md);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    if (system(p)) {}
    return 0;
}

/* val_loss of each arch's first seed in DIR/report.json */
static int read_val_losses(const char *dir, double out[2]) {
    char p[160];
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = (char *)th_read_file(p, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    free(js);
    if (!root) return 1;
    const cJSON *cells = cJSON_GetObjectItem(root, "cells");
    const cJSON *archs = cells && cells->child ? cJSON_GetObjectItem(cells->child, "archs") : NULL;
    for (int a = 0; a < 2; a++) {
        const cJSON *runs = cJSON_GetObjectItem(archs, a ? "softmax" : "diff");
        out[a] = runs && runs->child ? cJSON_GetObjectItem(runs->child, "val_loss")->valuedouble : -1;
    }
    cJSON_Delete(root);
    return out[0] < 0 || out[1] < 0;
}

static long file_size(const char *p) {
    FILE *fp = fopen(p, "rb");
    if (!fp) return -1;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fclose(fp);
    return n;
}

/* Interrupted (the stop flag) during the first training run, then --resume:
 * the same report as an uninterrupted job; a second --resume keeps both
 * trained runs as they are. */
static int test_compare_resume(void) {
    char whole[] = "/tmp/da_compare_whole_XXXXXX", cut[] = "/tmp/da_compare_cut_XXXXXX";
    CHECK(mkdtemp(whole) && mkdtemp(cut));
    da_compare_config c;
    da_compare_config_default(&c);
    c.shape.steps = 20, c.shape.dim = 32, c.shape.layers = 1, c.shape.heads = 2, c.seq = 256, c.shape.batch = 2, c.shape.seeds = 1, c.shape.study.quiet = 1;
    CHECK(!da_study_parse_archs(&c.shape, "diff,softmax").code); /* two runs are enough to interrupt between */
    c.shape.study.out_dir = whole;
    CHECK(!da_compare(&c).code);
    double ref[2], got[2];
    CHECK(!read_val_losses(whole, ref));

    volatile int stop = 1; /* as if Ctrl-C came during the first run */
    c.shape.study.out_dir = cut, c.shape.study.stop = &stop;
    da_status st = da_compare(&c);
    CHECK(st.code == DA_INTERRUPTED && strstr(st.msg, "--resume"));
    char p[200];
    snprintf(p, sizeof p, "%s/runs/diff_seed1337/train_state.safetensors", cut);
    CHECK(file_size(p) > 0);
    stop = 0;
    c.shape.study.resume = 1, c.shape.steps = 999; /* the steps come from the interrupted run */
    st = da_compare(&c);
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code);
    CHECK(!read_val_losses(cut, got));
    printf("     val loss uninterrupted %.6f / %.6f, interrupted and resumed %.6f / %.6f\n", ref[0], ref[1], got[0],
           got[1]);
    CHECK(got[0] == ref[0] && got[1] == ref[1]);

    snprintf(p, sizeof p, "%s/runs/diff_seed1337/metrics.jsonl", cut);
    const long before = file_size(p);
    CHECK(!da_compare(&c).code); /* both runs finished: kept, evaluated again */
    CHECK(file_size(p) == before && !read_val_losses(cut, got) && got[0] == ref[0] && got[1] == ref[1]);

    c.shape.dim = 64; /* other flags than the first run's are refused */
    st = da_compare(&c);
    CHECK(st.code && strstr(st.msg, "--resume needs the flags of the first run"));
    snprintf(p, sizeof p, "rm -rf %s %s", whole, cut);
    if (system(p)) {}
    return 0;
}

/* --archs: names in the order given, each once; a bad list changes nothing */
static int test_parse_archs(void) {
    da_compare_config c;
    da_compare_config_default(&c);
    CHECK(c.shape.n_archs == 3 && c.shape.archs[0] == DA_ARCH_DIFF && c.shape.archs[1] == DA_ARCH_DIFF2 && c.shape.archs[2] == DA_ARCH_SOFTMAX);
    CHECK(!da_study_parse_archs(&c.shape, "softmax,diff2").code && c.shape.n_archs == 2 && c.shape.archs[0] == DA_ARCH_SOFTMAX &&
          c.shape.archs[1] == DA_ARCH_DIFF2);
    CHECK(da_study_parse_archs(&c.shape, "diff,diff").code);
    CHECK(c.shape.n_archs == 2 && c.shape.archs[0] == DA_ARCH_SOFTMAX && c.shape.archs[1] == DA_ARCH_DIFF2); /* kept on an error */
    CHECK(strstr(da_study_parse_archs(&c.shape, "diff,gpt").msg, "\"gpt\""));
    /* the message lists every architecture of the table */
    CHECK(strstr(da_study_parse_archs(&c.shape, "gpt").msg, "diff, softmax, diff2, nsa"));
    CHECK(da_study_parse_archs(&c.shape, "").code);
    CHECK(!da_study_parse_archs(&c.shape, "nsa,diff,diff2,softmax").code && c.shape.n_archs == 4 && c.shape.archs[0] == DA_ARCH_NSA);
    /* plain compare reads the columns of compare --task: swa needs its window, options make a column */
    CHECK(strstr(da_study_parse_archs(&c.shape, "diff,swa").msg, "--swa-window"));
    CHECK(c.shape.n_archs == 4 && c.shape.archs[0] == DA_ARCH_NSA);
    c.shape.swa_window = 32;
    CHECK(!da_study_parse_archs(&c.shape, "softmax,swa,diff:head-norm=off").code && c.shape.n_archs == 3 &&
          c.shape.archs[1] == DA_ARCH_SOFTMAX && c.shape.windows[1] == 32 && c.shape.windows[0] == 0 && c.shape.archs[2] == DA_ARCH_DIFF &&
          !strcmp(c.shape.columns[2], "diff:head-norm=off") && !c.shape.columns[0][0]);
    CHECK(strstr(da_study_parse_archs(&c.shape, "swa,swa").msg, "twice"));
    /* compare --task: the four-way comparison and swa, five columns */
    da_task_compare_config t;
    da_task_compare_config_default(&t);
    t.shape.swa_window = 16;
    CHECK(!da_study_parse_archs(&t.shape, "diff,diff2,softmax,swa,nsa").code && t.shape.n_archs == 5 && t.shape.archs[4] == DA_ARCH_NSA &&
          t.shape.windows[3] == 16 && t.shape.windows[4] == 0);
    /* a column may set a variant's own hyper-parameters, of that variant only, within its constraints */
    CHECK(!da_study_parse_archs(&t.shape, "nsa,nsa:nsa-select=32:nsa-topn=4:nsa-window=64").code && t.shape.n_archs == 2);
    da_config cfg;
    da_config_default(&cfg);
    cfg.arch = DA_ARCH_NSA;
    CHECK(!da_arch_column_apply(t.shape.columns[1], &cfg).code && cfg.nsa_select == 32 && cfg.nsa_topn == 4 &&
          cfg.nsa_window == 64 && cfg.nsa_block == 32);
    /* NSA with one shared K/V projection, a flag stored only when set, is a column option too */
    CHECK(!da_study_parse_archs(&t.shape, "nsa,nsa:nsa-shared-kv=1").code && t.shape.n_archs == 2);
    da_config_default(&cfg);
    cfg.arch = DA_ARCH_NSA;
    CHECK(!da_arch_column_apply(t.shape.columns[1], &cfg).code && cfg.nsa_shared_kv == 1);
    da_status st = da_study_parse_archs(&t.shape, "diff:nsa-topn=4");
    CHECK(st.code && strstr(st.msg, "not a hyper-parameter of --arch diff"));
    st = da_study_parse_archs(&t.shape, "softmax:nsa-shared-kv=1");
    CHECK(st.code && strstr(st.msg, "not a hyper-parameter of --arch softmax"));
    st = da_study_parse_archs(&t.shape, "nsa:nsa-topn=2");
    CHECK(st.code && strstr(st.msg, "nsa_topn"));
    return 0;
}

/* --match-params: every column of a study's kind (the sparse ones with their
 * extra projections, NSA with one shared pair, DIFF's lambdas) lands within 1%
 * of the largest, at a small and a wider shape; the largest is unchanged. */
static int test_match_params(void) {
    static const int dims[2] = {64, 256}, layers[2] = {2, 4};
    for (int k = 0; k < 2; k++) {
        da_config cfg[6], before[6];
        const da_arch archs[6] = {DA_ARCH_DIFF, DA_ARCH_SOFTMAX, DA_ARCH_DIFF2, DA_ARCH_NSA, DA_ARCH_NSA, DA_ARCH_MOBA};
        for (int i = 0; i < 6; i++) {
            da_config_default(&cfg[i]);
            cfg[i].arch = archs[i], cfg[i].dim = dims[k], cfg[i].n_layers = layers[k], cfg[i].n_heads = 1;
            cfg[i].n_kv_heads = 0, cfg[i].ffn_hidden = 0, cfg[i].vocab_size = 64, cfg[i].nsa_shared_kv = i == 4;
            CHECK(!da_config_from_diff_heads(&cfg[i]).code);
            before[i] = cfg[i];
        }
        da_match_params(cfg, 6);
        size_t most = 0, least = (size_t)-1;
        for (int i = 0; i < 6; i++) {
            const size_t p = da_config_param_count(&cfg[i]);
            most = p > most ? p : most, least = p < least ? p : least;
            CHECK(!da_config_validate(&cfg[i]).code && cfg[i].ffn_hidden >= before[i].ffn_hidden);
        }
        CHECK(da_config_param_count(&cfg[3]) == da_config_param_count(&before[3])); /* NSA: the largest */
        CHECK(cfg[1].ffn_hidden > before[1].ffn_hidden && cfg[4].ffn_hidden > before[4].ffn_hidden);
        if ((double)(most - least) > 0.01 * (double)most) {
            fprintf(stderr, "  dim %d: parameters %zu..%zu, more than 1%% apart\n", dims[k], least, most);
            return 1;
        }
    }
    return 0;
}

/* A column may set the RoPE scaling, and a model evaluated at a length past its training's (a curriculum's
 * --seq) runs with the scaled frequencies: the tables the forward builds at 4x the length are the unscaled
 * ones over the factor, and the logits there are not the unscaled twin's. */
static int test_rope_scaling_at_longer_length(void) {
    da_task_compare_config t;
    da_task_compare_config_default(&t);
    CHECK(!da_study_parse_archs(&t.shape, "softmax,softmax:rope-scaling=linear:rope-factor=4").code && t.shape.n_archs == 2);
    da_config cfg, plain;
    da_config_default(&cfg);
    cfg.arch = DA_ARCH_SOFTMAX, cfg.dim = 32, cfg.n_layers = 1, cfg.n_heads = 2, cfg.n_kv_heads = 2, cfg.vocab_size = 32;
    cfg.ffn_hidden = 64, cfg.max_seq_len = 256;
    plain = cfg;
    CHECK(!da_arch_column_apply(t.shape.columns[1], &cfg).code && cfg.rope_scaling == DA_ROPE_SCALE_LINEAR &&
          cfg.rope_factor == 4.0f);
    enum { T = 256, HALF = 8 };
    double inv[HALF];
    float cs[T * HALF], sn[T * HALF];
    da_rope_inv_freq_of(&plain, inv);
    da_rope_tables(&cfg, cs, sn, T);
    for (int j = 0; j < HALF; j++) /* position 255, far past a 64-token training length */
        if (fabs(cs[255 * HALF + j] - cos(255.0 * inv[j] / 4.0)) > 1e-5) {
            fprintf(stderr, "  cos table at 255, pair %d: %g, want %g\n", j, cs[255 * HALF + j], cos(255.0 * inv[j] / 4));
            return 1;
        }
    da_model a, b;
    CHECK(!da_model_create(&a, &cfg).code && !da_model_create(&b, &plain).code);
    da_model_init(&a, 5);
    memcpy(b.params, a.params, a.n_params * sizeof(float));
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 7 + 3) % 32;
    da_acts *xa, *xb;
    CHECK(!da_acts_create(&xa, &a.cfg, 1, T).code && !da_acts_create(&xb, &b.cfg, 1, T).code);
    da_forward(&a, xa, tok, NULL, 1, T);
    da_forward(&b, xb, tok, NULL, 1, T);
    const double differ = max_rel_error(da_acts_logits(xa), da_acts_logits(xb), (size_t)T * 32, 0);
    da_task_config task;
    da_task_config_default(&task, DA_TASK_MQAR);
    task.seq = T, task.vocab = 32, task.pairs = 4;
    double acc = -1;
    da_status st = da_task_answer_accuracy(&a, &task, 4, 1, 0, &acc); /* the length evaluation's path */
    da_acts_free(xa), da_acts_free(xb), da_model_free(&a), da_model_free(&b);
    CHECK(!st.code && acc >= 0 && acc <= 1);
    CHECK(differ > 1e-3);
    return 0;
}

/* a budget too small for 20 steps is refused before any training */
static int test_budget_too_small(void) {
    da_compare_config c;
    da_compare_config_default(&c);
    char dir[] = "/tmp/da_compare_budget_XXXXXX";
    CHECK(mkdtemp(dir));
    c.shape.study.out_dir = dir, c.shape.dim = 32, c.shape.layers = 1, c.shape.heads = 2, c.seq = 256, c.shape.batch = 2;
    c.budget_minutes = 1e-4, c.shape.study.quiet = 1;
    da_status st = da_compare(&c);
    CHECK(st.code && strstr(st.msg, "--budget-minutes"));
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm)) {}
    return 0;
}

/* compare --task mqar on a tiny sweep (2 sequence lengths x 2 seeds): every
 * run's curve is in report.json, the steps-to-threshold and final accuracy
 * agree with it, report.md has both tables with verdicts, and every figure it
 * links is a valid PNG. */
static int test_compare_task_sweep(void) {
    char dir[] = "/tmp/da_compare_task_XXXXXX";
    CHECK(mkdtemp(dir));
    da_task_compare_config c;
    da_task_compare_config_default(&c);
    c.shape.study.out_dir = dir, c.shape.steps = 6, c.eval_every = 3, c.eval_seqs = 8, c.shape.dim = 16, c.shape.layers = 2, c.shape.heads = 1;
    c.shape.batch = 4, c.shape.seeds = 2, c.shape.study.quiet = 1;
    c.task.vocab = 32, c.task.pairs = 4;
    c.n_seqs = 2, c.seqs[0] = 16, c.seqs[1] = 32;
    da_status st = da_task_compare(&c);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    char p[160];
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = (char *)th_read_file(p, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root);
    const cJSON *pts = cJSON_GetObjectItem(root, "cells");
    CHECK(cJSON_GetArraySize(pts) == 2);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(pts->child, "archs"), "diff2")) == 2); /* every arch */
    CHECK(cJSON_GetObjectItem(pts->child, "seq")->valueint == 16 && cJSON_GetObjectItem(pts->child->next, "seq")->valueint == 32);
    for (const cJSON *pt = pts->child; pt; pt = pt->next)
        for (int a = 0; a < 2; a++) {
            const cJSON *runs = cJSON_GetObjectItem(cJSON_GetObjectItem(pt, "archs"), a ? "softmax" : "diff");
            CHECK(cJSON_GetArraySize(runs) == 2);
            for (const cJSON *r = runs->child; r; r = r->next) {
                const cJSON *curve = cJSON_GetObjectItem(r, "curve");
                CHECK(cJSON_GetArraySize(curve) == 3); /* steps 0, 3, 6 */
                long steps[3];
                double acc[3];
                int i = 0;
                for (const cJSON *e = curve->child; e; e = e->next, i++) {
                    steps[i] = (long)cJSON_GetObjectItem(e, "step")->valuedouble;
                    acc[i] = cJSON_GetObjectItem(e, "accuracy")->valuedouble;
                    CHECK(acc[i] >= 0 && acc[i] <= 1 && steps[i] == 3 * i);
                    CHECK((a == 0) == (cJSON_IsArray(cJSON_GetObjectItem(e, "lambda")) != 0)); /* lambda: DIFF only */
                }
                CHECK(fabs(cJSON_GetObjectItem(r, "final_accuracy")->valuedouble - acc[2]) < 1e-4);
                CHECK((long)cJSON_GetObjectItem(r, "steps_to_50")->valuedouble == da_steps_to_threshold(steps, acc, 3, 0.5));
                const cJSON *q = cJSON_GetObjectItem(r, "quant_accuracy");
                CHECK(cJSON_GetArraySize(q) == 3);
                const double ans = cJSON_GetObjectItem(r, "attention_answer")->valuedouble;
                const double rest = cJSON_GetObjectItem(r, "attention_elsewhere")->valuedouble;
                CHECK(fabs(ans) + fabs(rest) <= 1.0001 && rest != 0);
                CHECK(cJSON_GetObjectItem(r, "attn_logit_top1")->valuedouble > 0);
            }
        }
    cJSON_Delete(root);
    free(js);
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = (char *)th_read_file(p, NULL);
    CHECK(md && strstr(md, "| pairs 4, seq 16 | DIFF |") && strstr(md, "| pairs 4, seq 32 | softmax |"));
    CHECK(strstr(md, "accuracy, 8-bit logits") && strstr(md, "attention on the answer pair"));
    CHECK(strstr(md, "within noise") || strstr(md, "better") || strstr(md, "worse") || strstr(md, "neither reached"));
    const char *figs[] = {"accuracy_0.png", "accuracy_1.png", "steps_to_90.png", "lambda.png"};
    for (int i = 0; i < 4; i++) {
        CHECK(strstr(md, figs[i]));
        snprintf(p, sizeof p, "%s/%s", dir, figs[i]);
        cairo_surface_t *img = cairo_image_surface_create_from_png(p);
        CHECK(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
        CHECK(cairo_image_surface_get_width(img) == 800 && cairo_image_surface_get_height(img) == 500);
        cairo_surface_destroy(img);
    }
    free(md);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    if (system(p)) {}
    return 0;
}

/* compare --task icl with --archs softmax,diff: only those two, in that
 * order; every run has its order figures in report.json (margin = best -
 * worst, best >= mean >= worst); report.md has the order table; the
 * permutation-margin figure is a valid PNG. */
static int test_compare_task_icl(void) {
    char dir[] = "/tmp/da_compare_icl_XXXXXX";
    CHECK(mkdtemp(dir));
    da_task_compare_config c;
    da_task_compare_config_default(&c);
    da_task_config_default(&c.task, DA_TASK_ICL);
    c.shape.study.out_dir = dir, c.shape.steps = 4, c.eval_every = 2, c.eval_seqs = 8, c.shape.dim = 16, c.shape.layers = 1, c.shape.heads = 1;
    c.shape.batch = 4, c.shape.seeds = 2, c.shape.study.quiet = 1, c.perms = 3, c.perm_episodes = 5;
    c.task.demos = 4, c.task.symbols = 6, c.task.classes = 3, c.task.vocab = 12;
    CHECK(!da_study_parse_archs(&c.shape, "softmax,diff").code);
    da_status st = da_task_compare(&c);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    char p[160];
    snprintf(p, sizeof p, "%s/report.json", dir);
    char *js = (char *)th_read_file(p, NULL);
    cJSON *root = js ? cJSON_Parse(js) : NULL;
    CHECK(root && !strcmp(cJSON_GetObjectItem(root, "task")->valuestring, "icl"));
    const cJSON *pt = cJSON_GetObjectItem(root, "cells")->child, *archs = cJSON_GetObjectItem(pt, "archs");
    CHECK(cJSON_GetObjectItem(pt, "seq")->valueint == 10 && cJSON_GetObjectItem(pt, "demos")->valueint == 4);
    CHECK(cJSON_GetObjectItem(pt, "perms")->valueint == 3 && cJSON_GetObjectItem(pt, "perm_episodes")->valueint == 5);
    CHECK(cJSON_GetArraySize(archs) == 2 && !strcmp(archs->child->string, "softmax") &&
          !strcmp(archs->child->next->string, "diff"));
    for (const cJSON *a = archs->child; a; a = a->next)
        for (const cJSON *r = a->child; r; r = r->next) {
            const cJSON *o = cJSON_GetObjectItem(r, "order");
            CHECK(cJSON_IsObject(o));
            const double mean = cJSON_GetObjectItem(o, "mean")->valuedouble, best = cJSON_GetObjectItem(o, "best")->valuedouble;
            const double worst = cJSON_GetObjectItem(o, "worst")->valuedouble;
            CHECK(worst >= 0 && worst <= mean + 1e-4 && mean <= best + 1e-4 && best <= 1);
            CHECK(fabs(cJSON_GetObjectItem(o, "margin")->valuedouble - (best - worst)) < 2e-4);
            const double g = cJSON_GetObjectItem(o, "grouped")->valuedouble, al = cJSON_GetObjectItem(o, "alternating")->valuedouble;
            CHECK(g >= 0 && g <= 1 && al >= 0 && al <= 1);
        }
    cJSON_Delete(root);
    free(js);
    snprintf(p, sizeof p, "%s/report.md", dir);
    char *md = (char *)th_read_file(p, NULL);
    CHECK(md && strstr(md, "## Order robustness") && strstr(md, "| demos 4, classes 3, symbols 6 | softmax |"));
    CHECK(strstr(md, "margin (best − worst)") && !strstr(md, "DIFF2"));
    const char *figs[] = {"permutation_margin.png", "accuracy.png", "lambda.png"}; /* one cell: no index */
    for (int i = 0; i < 3; i++) {
        CHECK(strstr(md, figs[i]));
        snprintf(p, sizeof p, "%s/%s", dir, figs[i]);
        cairo_surface_t *img = cairo_image_surface_create_from_png(p);
        CHECK(cairo_surface_status(img) == CAIRO_STATUS_SUCCESS);
        CHECK(cairo_image_surface_get_width(img) == 800 && cairo_image_surface_get_height(img) == 500);
        cairo_surface_destroy(img);
    }
    free(md);
    snprintf(p, sizeof p, "rm -rf %s", dir);
    if (system(p)) {}
    return 0;
}

/* Flags of the other task are refused, naming the flag. */
static int test_compare_task_refuses_wrong_flags(void) {
    da_task_compare_config c;
    da_task_compare_config_default(&c);
    char dir[] = "/tmp/da_compare_task_refused_XXXXXX";
    CHECK(mkdtemp(dir));
    c.shape.study.out_dir = dir, c.shape.study.quiet = 1;
    c.n_noises = 1, c.noises[0] = 0.2;
    da_status st = da_task_compare(&c);
    CHECK(st.code && strstr(st.msg, "--noise"));
    da_task_config_default(&c.task, DA_TASK_NOISY_RECALL);
    c.n_noises = 0, c.n_pairs = 1, c.pairs[0] = 4;
    st = da_task_compare(&c);
    CHECK(st.code && strstr(st.msg, "--pairs"));
    c.n_pairs = 0, c.task.noise = 1.5;
    st = da_task_compare(&c);
    CHECK(st.code && strstr(st.msg, "noise"));
    da_task_config_default(&c.task, DA_TASK_ICL);
    c.n_seqs = 1, c.seqs[0] = 64; /* icl's length follows from its demos */
    st = da_task_compare(&c);
    CHECK(st.code && strstr(st.msg, "--demos"));
    c.n_seqs = 0, c.perms = 1;
    st = da_task_compare(&c);
    CHECK(st.code && strstr(st.msg, "--perms"));
    char rm[64];
    snprintf(rm, sizeof rm, "rm -rf %s", dir);
    if (system(rm)) {}
    return 0;
}

/* A task run's result file is kept when its attention shares are negative
 * (a DIFF row takes attention away) and redone when one is out of [-1, 1]. */
static int test_task_run_negative_share_is_kept(void) {
    char dir[] = "/tmp/da_taskrun_XXXXXX", path[64];
    CHECK(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/result.bin", dir);
    task_run r, back;
    memset(&r, 0, sizeof r);
    r.n_evals = 1, r.n_params = 1000, r.ffn_hidden = 16, r.flops_per_token = 1e4;
    r.attn_answer = -0.25, r.attn_noise = 0.5, r.attn_noise_tokens = -0.1;
    CHECK(!task_run_save(path, "key", &r).code);
    CHECK(task_run_load(path, "key", &back, 0) == 0 && back.attn_answer == -0.25);
    r.attn_answer = -1.5;
    CHECK(!task_run_save(path, "key", &r).code);
    CHECK(task_run_load(path, "key", &back, 0) == -1);
    remove(path), rmdir(dir);
    return 0;
}

int main(void) {
    RUN(test_mix_answers_are_in_context);
    RUN(test_parse_archs);
    RUN(test_match_params);
    RUN(test_rope_scaling_at_longer_length);
    RUN(test_compare_tiny);
    RUN(test_compare_resume);
    RUN(test_task_run_negative_share_is_kept);
    RUN(test_budget_too_small);
    RUN(test_compare_task_sweep);
    RUN(test_compare_task_icl);
    RUN(test_compare_task_refuses_wrong_flags);
    TH_SUMMARY();
}
