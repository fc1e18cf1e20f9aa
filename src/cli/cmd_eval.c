/* diffattn eval: evaluations of a model file. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "eval/eval_loss.h"
#include "attn/attention.h"
#include "eval/compare.h"
#include "eval/needle.h"
#include "eval/outliers.h"
#include <stdlib.h>

/* The model and its validation data, with --seq 0 meaning the model's
 * context. On failure nothing is left allocated. */
static da_status load_model_data(const char *model, const char *data, float val_fraction, int *seq, da_model *m,
                                 da_text_data *d) {
    da_status st = da_model_load(m, model);
    if (st.code) return st;
    if (*seq == 0) *seq = m->cfg.max_seq_len;
    if (*seq <= 0) st = da_errorf("--seq must be positive");
    if (!st.code) st = da_text_data_load(d, data, val_fraction, *seq);
    if (st.code) da_model_free(m);
    return st;
}

static int eval_loss(int argc, char **argv) {
    const char *model = NULL, *data = NULL;
    int seq = 0, batch = 8, json = 0;
    long windows = 64;
    float val_fraction = 0.1f;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"data", OPT_STR, &data, "text file or folder (bytes), or a folder of token shards", 0},
        {"seq", OPT_INT, &seq, "window length (0 = the model's max_seq_len)", 0},
        {"windows", OPT_LONG, &windows, "validation windows, spread evenly over the validation split", 0},
        {"batch", OPT_INT, &batch, "windows per forward pass", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", "data", NULL};
    int rc = cli_parse("eval loss",
                       "Mean next-token cross-entropy (nats per token) and perplexity on the validation split, over "
                       "fixed windows:\nthe same windows for every model, so runs and architectures compare.",
                       argc, argv, opts, 7, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_model m;
    da_text_data d;
    da_eval_loss_result r;
    da_status st = load_model_data(model, data, val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    st = da_eval_loss(&m, &d, seq, windows, batch, DA_ATTN_FLASH, &r);
    da_text_data_free(&d);
    if (!st.code) {
        if (json)
            printf("{\"model\":\"%s\",\"arch\":\"%s\",\"loss\":%.6f,\"ppl\":%.4f,\"windows\":%ld,\"seq\":%d,"
                   "\"tokens\":%ld}\n",
                   model, da_arch_name(m.cfg.arch), r.loss, r.ppl, r.windows, seq, r.tokens);
        else
            printf("%s (%s): validation loss %.4f nats/token, perplexity %.3f (%ld windows of %d tokens)\n", model,
                   da_arch_name(m.cfg.arch), r.loss, r.ppl, r.windows, seq);
    }
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}

static void print_stats(const char *what, const da_outlier_stats *s, int json, int last) {
    if (json)
        printf("\"%s\":{\"top1\":%.4f,\"top2\":%.4f,\"top3\":%.4f,\"top10\":%.4f,\"top100\":%.4f,\"median\":%.4f,"
               "\"count\":%zu}%s",
               what, s->top[0], s->top[1], s->top[2], s->top[3], s->top[4], s->median, s->count, last ? "" : ",");
    else
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
        {"data", OPT_STR, &data, "text file or folder (bytes), or a folder of token shards", 0},
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
    da_status st = load_model_data(model, data, val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    st = da_eval_outliers(&m, &d, seq, windows, &r);
    da_text_data_free(&d);
    if (!st.code) {
        if (json) {
            printf("{\"model\":\"%s\",\"arch\":\"%s\",\"tokens\":%ld,", model, da_arch_name(m.cfg.arch), r.tokens);
            print_stats("attention_logits", &r.logits, 1, 0);
            print_stats("hidden_states", &r.hidden, 1, 1);
            printf("}\n");
        } else {
            printf("%s (%s), %ld tokens:\n", model, da_arch_name(m.cfg.arch), r.tokens);
            print_stats("attention logits", &r.logits, 0, 0);
            print_stats("hidden states", &r.hidden, 0, 1);
        }
    }
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}

static int eval_quant_logits(int argc, char **argv) {
    const char *model = NULL, *data = NULL, *bits_list = "16,8,6,4";
    int seq = 0, batch = 4, json = 0;
    long windows = 32;
    float val_fraction = 0.1f;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors)", 0},
        {"data", OPT_STR, &data, "text file or folder (bytes), or a folder of token shards", 0},
        {"bits", OPT_STR, &bits_list, "comma-separated bit widths of the attention logits", 0},
        {"seq", OPT_INT, &seq, "window length (0 = the model's max_seq_len)", 0},
        {"windows", OPT_LONG, &windows, "validation windows", 0},
        {"batch", OPT_INT, &batch, "windows per forward pass", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", "data", NULL};
    int rc = cli_parse("eval quant-logits",
                       "Validation loss with the attention logits fake-quantized before the softmax (dynamic absmax "
                       "per map, symmetric),\nper bit width, against the exact model (the paper's Figure 8, loss "
                       "side). Uses the reference attention kernel.",
                       argc, argv, opts, 8, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    int bits[16], n_bits = 0;
    for (const char *p = bits_list; *p && n_bits < 16;) {
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b < 2 || b > 24 || (*end && *end != ',')) {
            fprintf(stderr, "diffattn eval quant-logits: --bits \"%s\": expected widths in 2..24, like 16,8,6,4\n",
                    bits_list);
            return 1;
        }
        bits[n_bits++] = (int)b;
        p = *end ? end + 1 : end;
    }
    da_model m;
    da_text_data d;
    da_eval_loss_result exact, q[16];
    da_status st = load_model_data(model, data, val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    {
        da_attn_logit_bits = 0;
        st = da_eval_loss(&m, &d, seq, windows, batch, DA_ATTN_REFERENCE, &exact);
        for (int i = 0; i < n_bits && !st.code; i++) {
            da_attn_logit_bits = bits[i];
            st = da_eval_loss(&m, &d, seq, windows, batch, DA_ATTN_REFERENCE, &q[i]);
        }
        da_attn_logit_bits = 0;
        da_text_data_free(&d);
    }
    if (!st.code) {
        if (json) {
            printf("{\"model\":\"%s\",\"arch\":\"%s\",\"exact_loss\":%.6f,\"bits\":[", model,
                   da_arch_name(m.cfg.arch), exact.loss);
            for (int i = 0; i < n_bits; i++)
                printf("%s{\"bits\":%d,\"loss\":%.6f,\"delta\":%.6f}", i ? "," : "", bits[i], q[i].loss,
                       q[i].loss - exact.loss);
            printf("]}\n");
        } else {
            printf("%s (%s): exact validation loss %.4f\n", model, da_arch_name(m.cfg.arch), exact.loss);
            for (int i = 0; i < n_bits; i++)
                printf("  %2d-bit logits: loss %.4f (%+.4f)\n", bits[i], q[i].loss, q[i].loss - exact.loss);
        }
    }
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}

/* "1024,2048" -> ints; 0 ok, -1 on a bad list. */
static int parse_ints(const char *s, int *out, int max, int *n, int lo, int hi) {
    *n = 0;
    for (const char *p = s; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || (*end && *end != ',') || *n == max) return -1;
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    return *n ? 0 : -1;
}

static int eval_needle(int argc, char **argv) {
    const char *model = NULL, *contexts = "1024", *depths = "0,25,50,75,100";
    int json = 0;
    da_needle_config c;
    da_needle_config_default(&c);
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "model file (.safetensors); byte-level", 0},
        {"needles", OPT_INT, &c.needles, "needle sentences per prompt (1..16)", 0},
        {"queries", OPT_INT, &c.queries, "needles asked for per prompt", 0},
        {"context", OPT_STR, &contexts, "comma-separated prompt lengths in bytes", 0},
        {"depths", OPT_STR, &depths, "comma-separated depths (percent) of the asked needles", 0},
        {"samples", OPT_INT, &c.samples, "prompts per (context, depth)", 0},
        {"seed", OPT_U64, &c.seed, "prompt seed (the same prompts for every model)", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", NULL};
    int rc = cli_parse("eval needle",
                       "Multi-needle retrieval: N \"The special magic {key} number is: {value}.\" sentences in filler "
                       "text, R asked for\nat the end; the score is the exact match of the greedily generated value.",
                       argc, argv, opts, 8, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (parse_ints(contexts, c.contexts, DA_NEEDLE_MAX_CONTEXTS, &c.n_contexts, 128, 1 << 20))
        return cli_fail("--context: expected lengths >= 128, like 1024,2048");
    if (parse_ints(depths, c.depths, DA_NEEDLE_MAX_DEPTHS, &c.n_depths, 0, 100))
        return cli_fail("--depths: expected percentages 0..100, like 0,25,50,75,100");
    if (c.samples < 1) return cli_fail("--samples must be positive");
    da_model m;
    da_status st = da_model_load(&m, model);
    if (st.code) return cli_fail(st.msg);
    da_needle_model nm = {&m, 10};
    da_needle_result r;
    st = da_needle_eval(&c, da_needle_predict_model, &nm, &r);
    if (!st.code) {
        if (json) {
            printf("{\"model\":\"%s\",\"arch\":\"%s\",\"needles\":%d,\"queries\":%d,\"overall\":%.4f,\"asked\":%ld,"
                   "\"results\":[",
                   model, da_arch_name(m.cfg.arch), c.needles, c.queries, r.overall, r.asked);
            for (int i = 0; i < c.n_contexts; i++)
                for (int j = 0; j < c.n_depths; j++)
                    printf("%s{\"context\":%d,\"depth\":%d,\"accuracy\":%.4f}", i || j ? "," : "", c.contexts[i],
                           c.depths[j], r.acc[i][j]);
            printf("]}\n");
        } else {
            printf("%s (%s): N=%d needles, R=%d asked, %d samples each; accuracy by context (rows) and depth %%\n",
                   model, da_arch_name(m.cfg.arch), c.needles, c.queries, c.samples);
            printf("%8s", "");
            for (int j = 0; j < c.n_depths; j++) printf(" %6d", c.depths[j]);
            printf("\n");
            for (int i = 0; i < c.n_contexts; i++) {
                printf("%8d", c.contexts[i]);
                for (int j = 0; j < c.n_depths; j++) printf(" %6.2f", r.acc[i][j]);
                printf("\n");
            }
            printf("overall %.3f (%ld answers)\n", r.overall, r.asked);
        }
    }
    da_model_free(&m);
    return st.code ? cli_fail(st.msg) : 0;
}

int cmd_eval(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "needle")) return eval_needle(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "quant-logits")) return eval_quant_logits(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "outliers")) return eval_outliers(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "loss")) return eval_loss(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "ppl")) return cmd_eval_ppl(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: diffattn eval loss|outliers|quant-logits --model M --data D [--seq T --windows N --json]\n\n"
               "  loss       validation loss and perplexity\n"
               "  outliers   top and median |attention logits| and |hidden states|\n"
               "  quant-logits   validation loss with the attention logits quantized to fewer bits\n"
               "  needle     multi-needle retrieval accuracy (eval needle --model M [--context ...])\n"
               "  ppl        perplexity and KL divergence of a quantized model against its base (eval ppl --model Q "
               "--base M --data D)\n"
               "Every --model may be a GGUF from diffattn quantize as well as a .safetensors.\n");
        return 0;
    }
    fprintf(stderr, "diffattn eval: expected 'loss', 'outliers', 'quant-logits', 'needle' or 'ppl' (see diffattn eval --help)\n");
    return 1;
}

int cmd_compare(int argc, char **argv) {
    da_compare_config c;
    da_compare_config_default(&c);
    cli_opt opts[] = {
        {"out", OPT_STR, &c.out_dir, "folder for the runs, report.md and report.json", 0},
        {"data", OPT_STR, &c.data, "training text or shards (default: the built-in needle mix)", 0},
        {"steps", OPT_LONG, &c.steps, "training steps per model", 0},
        {"seeds", OPT_INT, &c.seeds, "seeds per architecture (mean and spread are reported)", 0},
        {"dim", OPT_INT, &c.dim, "model width", 0},
        {"layers", OPT_INT, &c.layers, "blocks", 0},
        {"heads", OPT_INT, &c.heads, "DIFF heads (the baseline gets twice as many, for equal parameters)", 0},
        {"seq", OPT_INT, &c.seq, "context length (needle prompts use seq - 64 bytes)", 0},
        {"batch", OPT_INT, &c.batch, "sequences per step", 0},
        {"quiet", OPT_FLAG, &c.quiet, "no progress display", 0},
    };
    int rc = cli_parse("compare",
                       "Trains DIFF and the softmax baseline at equal parameters, tokens, data and seed, runs the same "
                       "evaluations on both\n(validation loss, needle retrieval, outliers, quantized logits) and writes "
                       "report.md and report.json.",
                       argc, argv, opts, 10, NULL);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_status st = da_compare(&c);
    if (st.code) return cli_fail(st.msg);
    char path[4200];
    snprintf(path, sizeof path, "%s/report.md", c.out_dir);
    FILE *fp = fopen(path, "r");
    char line[1024];
    while (fp && fgets(line, sizeof line, fp)) fputs(line, stdout);
    if (fp) fclose(fp);
    return 0;
}
