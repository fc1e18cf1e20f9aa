/* diffattn eval: evaluations of a model file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "eval/eval.h"
#include "study/plot.h"

static const char *const DATA_HELP =
    "text file or folder (through the model's tokenizer; bytes when it has none), or a folder of token shards";

static void print_stats(const char *what, const da_outlier_stats *s) {
    printf("  %-16s top-1 %9.3f  top-2 %9.3f  top-3 %9.3f  top-10 %9.3f  top-100 %9.3f  median %8.4f  (%zu values)\n",
           what, s->top[0], s->top[1], s->top[2], s->top[3], s->top[4], s->median, s->count);
}

static int eval_outliers(int argc, char **argv) {
    const char *model = NULL, *data = NULL;
    int seq = 0, json = 0;
    long windows = 8;
    float val_fraction = 0.1f;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"data", OPT_STR, &data, DATA_HELP, 0},
        {"seq", OPT_INT, &seq, "window length (0 = the model's max_seq_len)", 0},
        {"windows", OPT_LONG, &windows, "validation windows (tokens = windows x seq)", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", "data", NULL};
    int rc = cli_parse("eval outliers",
                       "Top-1, 2, 3, 10, 100 and median of |attention logits| (q.k/sqrt(d) over every causal pair; "
                       "for DIFF both maps'\nq1.k1 and q2.k2) and of |hidden states| (every layer's output), on "
                       "validation windows.",
                       argc, argv, opts, 6, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_model m;
    da_text_data d;
    da_outliers_result r;
    da_status st = cli_eval_model_data(model, data, val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    st = da_eval_outliers(&m, &d, seq, windows, &r);
    da_text_data_free(&d);
    int code = st.code ? cli_fail(st.msg) : 0;
    if (!st.code) {
        if (json) code = cli_print_json(da_outliers_json(model, m.cfg.arch, &r));
        else {
            printf("%s (%s), %ld tokens:\n", model, da_arch_name(m.cfg.arch), r.tokens);
            print_stats("attention logits", &r.logits);
            print_stats("hidden states", &r.hidden);
            for (int l = 0; l < r.n_lambda; l++)
                printf("  lambda, layer %d: mean %.4f, std %.4f, min %.4f, max %.4f%s\n", l, r.lambda_mean[l],
                       r.lambda_std[l], r.lambda_min[l], r.lambda_max[l],
                       da_arch_describe(m.cfg.arch).lambda_note);
        }
    }
    da_model_free(&m);
    return code;
}

/* The needle-prompt flags shared by eval needle, eval attention and
 * eval quant-logits: they fill opts[0..NEEDLE_OPTS) and are checked by
 * needle_flags_check. */
enum { NEEDLE_OPTS = 6 };
typedef struct {
    da_needle_config c;
    const char *contexts, *depths;
} needle_flags;

static void needle_flags_init(needle_flags *f, cli_opt *opts, const char *contexts) {
    da_needle_config_default(&f->c);
    f->contexts = contexts;
    f->depths = "0,25,50,75,100";
    cli_opt o[NEEDLE_OPTS] = {
        {"needles", OPT_INT, &f->c.needles, "needle sentences per prompt (1..16)", 0},
        {"queries", OPT_INT, &f->c.queries, "needles asked for per prompt", 0},
        {"context", OPT_STR, &f->contexts, "comma-separated prompt lengths in bytes", 0},
        {"depths", OPT_STR, &f->depths, "comma-separated depths (percent) of the asked needles", 0},
        {"samples", OPT_INT, &f->c.samples, "prompts per (context, depth)", 0},
        {"seed", OPT_U64, &f->c.seed, "prompt seed (the same prompts for every model)", 0},
    };
    memcpy(opts, o, sizeof o);
}

/* 0 when the flags hold; otherwise reports and returns 1. */
static int needle_flags_check(needle_flags *f) {
    if (cli_parse_ints("context", f->contexts, f->c.contexts, DA_NEEDLE_MAX_CONTEXTS, &f->c.n_contexts, 128, 1 << 20,
                       "lengths", "1024,2048") ||
        cli_parse_ints("depths", f->depths, f->c.depths, DA_NEEDLE_MAX_DEPTHS, &f->c.n_depths, 0, 100, "percentages",
                       "0,25,50,75,100"))
        return 1;
    if (f->c.samples < 1) return cli_fail("--samples must be positive");
    if (f->c.needles < 1 || f->c.needles > 16) return cli_fail("--needles must be 1..16");
    if (f->c.queries < 1 || f->c.queries > f->c.needles) return cli_fail("--queries must be 1..--needles");
    return 0;
}

/* A progress line on a terminal: the step under way, redrawn in place. */
static void progress_line(void *ctx, const char *step, int done, int total) {
    (void)ctx;
    if (!isatty(2)) return;
    if (done == total) fprintf(stderr, "\r\033[K");
    else fprintf(stderr, "\r\033[K  [%d/%d] %s", done + 1, total, step);
    fflush(stderr);
}

static void print_quant_logits(const char *model, const char *arch, const da_quant_logits_config *qc,
                               const da_quant_logits_result *r) {
    printf("%s (%s): exact validation loss %.4f", model, arch, r->exact_loss);
    if (qc->needle)
        printf(", needle accuracy %.3f (N=%d, R=%d, %d bytes, %d samples x %d depths)", r->needle_exact,
               r->needles.needles, r->needles.queries, r->needles.contexts[0], r->needles.samples, r->needles.n_depths);
    printf("\n");
    for (int i = 0; i < qc->n_bits; i++) {
        printf("  %2d-bit logits: loss %.4f (%+.4f)", qc->bits[i], r->loss[i], r->loss[i] - r->exact_loss);
        if (qc->needle) printf("  needle %.3f", r->needle[i]);
        printf("\n");
    }
}

static int eval_quant_logits(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *bits_list = "16,8,6,4";
    int seq = 0, json = 0, no_needle = 0;
    long windows = 32;
    float val_fraction = 0.1f;
    needle_flags f;
    enum { N_OPTS = 8 + NEEDLE_OPTS };
    cli_opt opts[N_OPTS] = {
        {"model", OPT_STR, &model, "model file (.safetensors or .gguf)", 0},
        {"data", OPT_STR, &data, DATA_HELP, 0},
        {"bits", OPT_STR, &bits_list, "comma-separated bit widths of the attention logits", 0},
        {"seq", OPT_INT, &seq, "window length (0 = the model's max_seq_len)", 0},
        {"windows", OPT_LONG, &windows, "validation windows", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"no-needle", OPT_FLAG, &no_needle, "skip needle retrieval (for models that are not byte-level)", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    needle_flags_init(&f, opts + 8, "auto");
    for (int i = 8; i < N_OPTS; i++) /* by name: an index silently lands on another flag when the table changes */
        if (!strcmp(opts[i].name, "context"))
            opts[i].help = "comma-separated needle prompt lengths in bytes (auto: max_seq_len - 64, at most 1024)";
    const char *req[] = {"model", "data", NULL};
    int rc = cli_parse("eval quant-logits",
                       "The attention logits fake-quantized before the softmax (dynamic absmax per query row of each "
                       "map, symmetric),\nper bit width, against the exact model: validation loss and needle retrieval "
                       "accuracy (the paper's Figure 8).\nBoth run through the inference engine, each window and "
                       "prompt from an empty KV cache.",
                       argc, argv, opts, N_OPTS, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_quant_logits_config qc = {seq,     windows, {0}, 0, !no_needle, f.c, cli_was_set(opts, N_OPTS, "needles"),
                                 progress_line, NULL};
    if (cli_parse_ints("bits", bits_list, qc.bits, DA_QL_MAX_BITS, &qc.n_bits, 2, 24, "widths", "16,8,6,4")) return 1;
    const int auto_context = !strcmp(f.contexts, "auto");
    if (auto_context) f.contexts = "1024"; /* checked now; the library fits it to the model */
    if (!no_needle && needle_flags_check(&f)) return 1;
    qc.needles = f.c;
    if (auto_context) qc.needles.contexts[0] = 0;
    da_engine *e = NULL;
    da_text_data d;
    da_quant_logits_result r;
    da_status st = da_engine_load_with(&e, model, cli_load_opts());
    if (!st.code && !(st = da_eval_data_load(&d, data, val_fraction, seq ? seq : da_engine_config(e)->max_seq_len,
                                             model, da_engine_tokenizer(e), da_engine_config(e)->vocab_size))
                         .code) {
        st = da_eval_quant_logits(e, &d, &qc, &r);
        da_text_data_free(&d);
    }
    int code = st.code ? cli_fail(st.msg) : 0;
    if (!st.code && json) code = cli_print_json(da_quant_logits_json(model, da_engine_config(e)->arch, &qc, &r));
    else if (!st.code) print_quant_logits(model, da_arch_name(da_engine_config(e)->arch), &qc, &r);
    da_engine_free(e);
    return code;
}

static void print_needle(const char *model, const char *arch, const da_needle_config *c, const da_needle_result *r) {
    printf("%s (%s): N=%d needles, R=%d asked, %d samples each; accuracy by context (rows) and depth %%\n", model, arch,
           c->needles, c->queries, c->samples);
    printf("%8s", "");
    for (int j = 0; j < c->n_depths; j++) printf(" %6d", c->depths[j]);
    printf("\n");
    for (int i = 0; i < c->n_contexts; i++) {
        printf("%8d", c->contexts[i]);
        for (int j = 0; j < c->n_depths; j++) printf(" %6.2f", r->acc[i][j]);
        printf("\n");
    }
    printf("overall %.3f (%ld answers)\n", r->overall, r->asked);
}

static int eval_needle(int argc, char **argv) {
    const char *model = NULL;
    int json = 0;
    needle_flags f;
    cli_opt opts[NEEDLE_OPTS + 2] = {{"model", OPT_STR, &model, "model file (.safetensors); byte-level", 0}};
    needle_flags_init(&f, opts + 1, "1024");
    opts[NEEDLE_OPTS + 1] = (cli_opt){"json", OPT_FLAG, &json, "print one JSON object", 0};
    const char *req[] = {"model", NULL};
    int rc = cli_parse("eval needle",
                       "Multi-needle retrieval: N \"The special magic {key} number is: {value}.\" sentences in filler "
                       "text, R asked for\nat the end; the score is the exact match of the greedily generated value.",
                       argc, argv, opts, NEEDLE_OPTS + 2, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (needle_flags_check(&f)) return 1;
    const da_needle_config c = f.c;
    da_model m;
    da_status st = da_model_load_any_with(&m, model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    da_needle_result r;
    st = da_needle_eval_model(&m, &c, 0, &r);
    int code = st.code ? cli_fail(st.msg) : 0;
    if (!st.code && json) code = cli_print_json(da_needle_json(model, m.cfg.arch, &c, &r));
    else if (!st.code) print_needle(model, da_arch_name(m.cfg.arch), &c, &r);
    da_model_free(&m);
    return code;
}

/* The answer-row band of one prompt for the figure: context 0, the middle
 * depth, sample 0. */
static da_status attention_band(da_model *m, const da_needle_config *c, const char *name, da_needle_attention_map *mp,
                                da_attention_band *band) {
    da_status st = da_needle_attention_map_of(m, c, 0, c->n_depths / 2, 0, mp);
    if (st.code) return st;
    *band = (da_attention_band){name, mp->map, mp->rows, mp->cols, mp->span_begin, mp->span_end, mp->needle_begin,
                                mp->needle_end};
    return da_ok();
}

/* The heatmap of --png: model m's band, and beside it the band of the model at other (NULL: none). */
static da_status attention_png(da_model *m, const char *model, const char *other, const da_needle_config *c,
                               const char *png) {
    da_model m2;
    int have2 = 0;
    da_needle_attention_map maps[2] = {{0}};
    da_attention_band bands[2];
    char names[2][256];
    snprintf(names[0], sizeof names[0], "%s (%s)", model, da_arch_name(m->cfg.arch));
    da_status st = attention_band(m, c, names[0], &maps[0], &bands[0]);
    if (!st.code && other) {
        st = da_model_load_any_with(&m2, other, cli_load_opts());
        have2 = !st.code;
        if (!st.code) {
            snprintf(names[1], sizeof names[1], "%s (%s)", other, da_arch_name(m2.cfg.arch));
            st = attention_band(&m2, c, names[1], &maps[1], &bands[1]);
        }
    }
    if (!st.code)
        st = da_plot_attention_bands(png, "Attention of the answer positions over one needle prompt", bands,
                                     other ? 2 : 1);
    free(maps[0].map), free(maps[1].map);
    if (have2) da_model_free(&m2);
    return st;
}

static void print_attention(const char *model, const char *arch, const da_needle_config *c,
                            const da_needle_attention_result *r) {
    printf("%s (%s): attention from the answer positions, %ld prompts (N=%d needles)\n", model, arch, r->prompts,
           c->needles);
    printf("%8s %6s %8s %8s %8s\n", "context", "depth", "answer", "noise", "digits");
    for (int i = 0; i < c->n_contexts; i++)
        for (int j = 0; j < c->n_depths; j++)
            printf("%8d %5d%% %8.4f %8.4f %8.3f\n", c->contexts[i], c->depths[j], r->answer[i][j], r->noise[i][j],
                   r->digits[i][j]);
    printf("%15s %8.4f %8.4f %8.3f\n", "overall", r->answer_all, r->noise_all, r->digits_all);
    printf("answer: attention share on the answer span; noise: on the context outside the needle; digits: "
           "answer digits\nthe model's top prediction gets right, teacher-forced (chance 0.1)\n");
}

static int eval_attention(int argc, char **argv) {
    const char *model = NULL, *other = NULL, *png = NULL;
    int json = 0;
    needle_flags f;
    enum { N_OPTS = 4 + NEEDLE_OPTS };
    cli_opt opts[N_OPTS] = {
        {"model", OPT_STR, &model, "model file (.safetensors); byte-level", 0},
        {"png", OPT_STR, &png, "write a heatmap of the answer rows' attention over one prompt (Figure 1)", 0},
        {"vs", OPT_STR, &other, "a second model drawn beside the first in --png (e.g. the baseline)", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    needle_flags_init(&f, opts + 4, "1024");
    const char *req[] = {"model", NULL};
    int rc = cli_parse("eval attention",
                       "Where attention goes on needle prompts (the paper's Table 3): from the positions that generate "
                       "the answer\n(teacher-forced), the share of attention on the answer span and on the irrelevant "
                       "context (outside the\nasked needle), mean over those positions, heads, layers and prompts. For "
                       "DIFF the map is A1 - lambda A2 and a\nshare is sum(P over the set) / sum(|P| over the row): "
                       "negative weights subtract from a share.",
                       argc, argv, opts, N_OPTS, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (needle_flags_check(&f)) return 1;
    if (other && !png) return cli_fail("--vs draws a second model in the --png figure; pass --png FILE too");
    const da_needle_config c = f.c;
    da_model m;
    da_status st = da_model_load_any_with(&m, model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    da_needle_attention_result r;
    st = da_eval_needle_attention(&m, &c, &r);
    int code = 0;
    if (!st.code && json) code = cli_print_json(da_needle_attention_json(model, &m.cfg, &c, &r));
    else if (!st.code) print_attention(model, da_arch_name(m.cfg.arch), &c, &r);
    if (!st.code && png && !(st = attention_png(&m, model, other, &c, png)).code && !json) printf("wrote %s\n", png);
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : code;
}

int cmd_eval(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "needle")) return eval_needle(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "quant-logits")) return eval_quant_logits(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "outliers")) return eval_outliers(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "loss")) return cmd_eval_loss(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "attention")) return eval_attention(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "ppl")) return cmd_eval_ppl(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: diffattn eval SUBCOMMAND --model M [flags]   (diffattn eval SUBCOMMAND --help for each)\n\n"
               "  loss          validation loss and perplexity (--data D), by position, with distractors\n"
               "  outliers      top and median |attention logits| and |hidden states| (--data D)\n"
               "  quant-logits  loss and needle retrieval with the attention logits quantized to fewer bits (--data D)\n"
               "  needle        multi-needle retrieval accuracy\n"
               "  attention     attention on the answer span and on the irrelevant context, with a heatmap\n"
               "  ppl           perplexity and KL divergence of a quantized model against its base (--base M --data D)\n"
               "Every --model may be a GGUF from diffattn quantize as well as a .safetensors.\n");
        return 0;
    }
    fprintf(stderr, "diffattn eval: expected 'loss', 'outliers', 'quant-logits', 'needle', 'attention' or 'ppl' (see "
                    "diffattn eval --help)\n");
    return 1;
}
