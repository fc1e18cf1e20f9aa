/* diffattn eval loss: the validation loss, by position, with distractors inserted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "eval/eval.h"

typedef struct {
    const char *model, *data, *ids, *distract, *rates;
    int seq, batch, json, by_position, span;
    long windows;
    float val_fraction;
    uint64_t seed;
} loss_flags;

enum { N_LOSS_OPTS = 13 };

static void loss_opts(loss_flags *f, cli_opt *opts) {
    cli_opt o[N_LOSS_OPTS] = {
        {"model", OPT_STR, &f->model, "model file: .safetensors, a GGUF (dequantized) or a Hugging Face folder", 0},
        {"data", OPT_STR, &f->data,
         "text file or folder (through the model's tokenizer; bytes when it has none), or a folder of token shards", 0},
        {"ids", OPT_STR, &f->ids, "instead of --data: one sequence of token ids (whitespace-separated)", 0},
        {"seq", OPT_INT, &f->seq, "window length (0 = the model's max_seq_len)", 0},
        {"windows", OPT_LONG, &f->windows, "validation windows, spread evenly over the validation split", 0},
        {"batch", OPT_INT, &f->batch, "windows per forward pass", 0},
        {"val-fraction", OPT_FLOAT, &f->val_fraction, "text only: the tail held out, as in train", 0},
        {"by-position", OPT_FLAG, &f->by_position,
         "the loss per position (--ids) or per power-of-two position bin with a 95% interval over windows (--data)",
         0},
        {"distract", OPT_STR, &f->distract,
         "text (or token shards) whose spans are inserted into each window; only the target text is scored", 0},
        {"distract-rate", OPT_STR, &f->rates,
         "share of each window's tokens that are distractors, in [0, 0.9]; a list (0,0.3) cycles over the windows", 0},
        {"distract-span", OPT_INT, &f->span, "distractor tokens per inserted span", 0},
        {"seed", OPT_U64, &f->seed, "seed of the distractors' places and spans (the same windows for every model)", 0},
        {"json", OPT_FLAG, &f->json, "print one JSON object", 0},
    };
    memcpy(opts, o, sizeof o);
}

/* 0 when the flags hold together; otherwise reports and returns 1. */
static int loss_flags_check(const loss_flags *f, const cli_opt *opts, da_distract_config *dc) {
    if (!f->data == !f->ids) return cli_fail("eval loss: give one of --data D (validation windows) or --ids F");
    if (f->ids && (cli_was_set(opts, N_LOSS_OPTS, "seq") || cli_was_set(opts, N_LOSS_OPTS, "windows")))
        return cli_fail("eval loss: --ids is one sequence of its own length: --seq and --windows need --data");
    if (!f->distract) {
        static const char *const needs[] = {"distract-rate", "distract-span", "seed"};
        for (int i = 0; i < 3; i++)
            if (cli_was_set(opts, N_LOSS_OPTS, needs[i])) {
                fprintf(stderr, "diffattn: eval loss: --%s needs --distract FILE\n", needs[i]);
                return 1;
            }
        return 0;
    }
    if (f->ids) return cli_fail("eval loss: --distract inserts spans into --data windows, not into --ids");
    if (!f->rates) return cli_fail("eval loss: --distract needs --distract-rate P (a share in [0, 0.9])");
    da_status st = da_distract_parse_rates(dc, f->rates);
    if (st.code) return cli_fail(st.msg);
    if (f->span < 1) return cli_fail("eval loss: --distract-span must be positive");
    dc->span = f->span;
    dc->seed = f->seed;
    return 0;
}

static void print_bins(const da_loss_position_result *r) {
    printf("  %-13s %10s %9s  %s\n", "positions", "tokens", "loss", "95% interval over windows");
    for (int k = 0; k < r->n_bins; k++) {
        char pos[32];
        snprintf(pos, sizeof pos, "%d-%d", r->bins[k].first, r->bins[k].last);
        printf("  %-13s %10ld %9.4f  [%.4f, %.4f]\n", pos, r->bins[k].tokens, r->bins[k].loss, r->bins[k].lo,
               r->bins[k].hi);
    }
}

static int print_positions(const loss_flags *f, const da_model *m, const da_loss_position_result *r) {
    if (f->json) return cli_print_json(da_loss_position_json(f->model, m->cfg.arch, r, f->data && f->by_position));
    printf("%s (%s): loss %.4f nats per target token (%ld target tokens, %ld windows of %d)\n", f->model,
           da_arch_name(m->cfg.arch), r->loss, r->target_tokens, r->windows, r->seq);
    if (f->ids && f->by_position)
        for (int t = 0; t < r->seq; t++) printf("  %d %.6f\n", t + 1, r->per_position[t]);
    if (f->data && f->by_position) print_bins(r);
    return 0;
}

/* --ids: one sequence, every position. */
static int loss_of_ids(const loss_flags *f) {
    da_model m;
    da_status st = da_model_load_any_with(&m, f->model, cli_load_opts());
    if (st.code) return cli_fail(st.msg);
    int *ids = NULL, n = 0;
    da_loss_position_result r = {0};
    if (!(st = da_ids_read(f->ids, m.cfg.vocab_size, &ids, &n)).code) st = da_eval_loss_ids(&m, ids, n, &r);
    const int code = st.code ? cli_fail(st.msg) : print_positions(f, &m, &r);
    da_loss_position_free(&r);
    free(ids);
    da_model_free(&m);
    return code;
}

/* --data with --by-position or --distract: windows observed by position. */
static int loss_by_position(const loss_flags *f, int seq, da_distract_config *dc) {
    da_model m;
    da_text_data d;
    da_status st = cli_eval_model_data(f->model, f->data, f->val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    da_distract *x = NULL;
    da_tokenizer *tok = NULL;
    if (f->distract && !(st = da_model_tokenizer(&m, &tok)).code)
        st = da_distract_open(&x, &d, f->distract, tok, dc);
    da_tokenizer_free(tok);
    da_loss_position_result r = {0};
    const da_loss_position_config c = {f->windows, seq, f->batch, x};
    if (!st.code) st = da_eval_loss_by_position(&m, &d, &c, &r);
    const int code = st.code ? cli_fail(st.msg) : print_positions(f, &m, &r);
    da_distract_free(x);
    da_text_data_free(&d);
    da_model_free(&m);
    return code;
}

static int loss_plain(const loss_flags *f, int seq) {
    da_model m;
    da_text_data d;
    da_eval_loss_result r;
    da_status st = cli_eval_model_data(f->model, f->data, f->val_fraction, &seq, &m, &d);
    if (st.code) return cli_fail(st.msg);
    st = da_eval_loss(&m, &d, seq, f->windows, f->batch, DA_ATTN_FLASH, &r);
    da_text_data_free(&d);
    int code = st.code ? cli_fail(st.msg) : 0;
    if (!st.code) {
        if (f->json) code = cli_print_json(da_eval_loss_json(f->model, m.cfg.arch, seq, &r));
        else
            printf("%s (%s): validation loss %.4f nats/token, perplexity %.3f (%ld windows of %d tokens)\n", f->model,
                   da_arch_name(m.cfg.arch), r.loss, r.ppl, r.windows, seq);
    }
    da_model_free(&m);
    return code;
}

int cmd_eval_loss(int argc, char **argv) {
    loss_flags f = {.batch = 8, .windows = 64, .val_fraction = 0.1f, .span = 32, .seed = 1};
    cli_opt opts[N_LOSS_OPTS];
    loss_opts(&f, opts);
    const char *req[] = {"model", NULL};
    int rc = cli_parse("eval loss",
                       "Mean next-token cross-entropy (nats per token) and perplexity on the validation split, over "
                       "fixed windows:\nthe same windows for every model, so runs and architectures compare. "
                       "--by-position: the loss at each\nposition (--ids) or per position bin 1, 2-3, 4-7, ... "
                       "(--data). --distract: spans of another text inserted\ninto each window, the loss counted on "
                       "the target text's tokens only.",
                       argc, argv, opts, N_LOSS_OPTS, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    da_distract_config dc = {0};
    if (loss_flags_check(&f, opts, &dc)) return 1;
    if (f.ids) return loss_of_ids(&f);
    if (f.by_position || f.distract) return loss_by_position(&f, f.seq, &dc);
    return loss_plain(&f, f.seq);
}
