/* diffattn encode / decode: text <-> token ids with a byte-level BPE tokenizer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "commands.h"
#include "diffattn/data.h"
#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"

static const char *TOK_HELP = "tokenizer.json (Hugging Face byte-level BPE), GPT-2's encoder.json (vocab.bpe beside it), "
                              "or a folder holding either";

static const char *MODEL_HELP = "a model file: use the tokenizer it carries (default when --tokenizer is not given)";

/* --tokenizer, or the one --model carries; with both, they must be the same. */
static da_status open_tokenizer(const char *tok_path, const char *model, da_tokenizer **out) {
    *out = NULL;
    if (!tok_path && !model) return da_errorf("give --tokenizer, or --model for the tokenizer a model carries");
    da_status st = tok_path ? da_tokenizer_load(out, tok_path) : da_ok();
    if (st.code || !model) return st;
    da_engine *e = NULL;
    if ((st = da_engine_load_with(&e, model, cli_load_opts())).code) {
        da_tokenizer_free(*out);
        *out = NULL;
        return st;
    }
    const da_tokenizer *own = da_engine_tokenizer(e);
    if (!own && !*out)
        st = da_errorf("%s carries no tokenizer (a byte-level model, or a file from before tokenizers were embedded): "
                       "give --tokenizer",
                       model);
    else if (own && *out && !da_tokenizer_same(own, *out))
        st = da_errorf("--tokenizer %s (%d tokens) differs from the tokenizer %s carries (%d tokens)", tok_path,
                       da_tokenizer_vocab_size(*out), model, da_tokenizer_vocab_size(own));
    else if (own && !*out) {
        size_t n;
        const char *json = da_tokenizer_json(own, &n);
        st = da_tokenizer_from_json(out, json, n, model);
    }
    da_engine_free(e);
    if (st.code) {
        da_tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}

static da_status read_all(const char *path, uint8_t **data, size_t *n) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return da_errorf("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 20, len = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb) free(buf);
            buf = nb;
        }
    }
    int err = ferror(fp);
    fclose(fp);
    if (!buf) return da_errorf("%s: out of memory", path);
    if (err) {
        free(buf);
        return da_errorf("%s: read error (is it a folder?)", path);
    }
    *data = buf;
    *n = len;
    return da_ok();
}

int cmd_encode(int argc, char **argv) {
    const char *tok_path = NULL, *model = NULL, *in = NULL, *out = NULL;
    int timing = 0, plain = 0;
    cli_opt opts[] = {
        {"tokenizer", OPT_STR, &tok_path, TOK_HELP, 0},
        {"model", OPT_STR, &model, MODEL_HELP, 0},
        {"in", OPT_STR, &in, "text file to encode (any bytes)", 0},
        {"out", OPT_STR, &out, "write the ids here instead of standard output", 0},
        {"time", OPT_FLAG, &timing, "report the encoding speed on standard error", 0},
        {"no-add-special-tokens", OPT_FLAG, &plain,
         "the text's ids only, without the tokens the tokenizer.json's post_processor adds around them (a template's "
         "BOS): Hugging Face's add_special_tokens=False",
         0},
    };
    const char *req[] = {"in", NULL};
    int rc = cli_parse("encode",
                       "Prints the token ids of a file, whitespace-separated, as Hugging Face's encode(text) gives "
                       "them by default (with the tokens the post_processor adds, such as a template's BOS).",
                       argc, argv, opts, 6, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    const char *inputs[3] = {in, tok_path, model};
    da_status st = da_check_outputs_not_inputs(&out, out ? 1 : 0, inputs, 3);
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *t;
    if ((st = open_tokenizer(tok_path, model, &t)).code) return cli_fail(st.msg);
    uint8_t *text = NULL;
    int *ids = NULL;
    size_t n = 0, n_ids = 0, cap = 0;
    if (!(st = read_all(in, &text, &n)).code && n == 0) st = da_errorf("%s: the file is empty; nothing to encode", in);
    if (!st.code) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = plain ? da_tokenizer_encode(t, text, n, &ids, &n_ids, &cap)
                   : da_tokenizer_encode_add_special(t, text, n, &ids, &n_ids, &cap);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (!st.code && timing)
            fprintf(stderr, "%zu bytes -> %zu ids in %.3f s = %.2f MB/s\n", n, n_ids, s, (double)n / s / 1e6);
    }
    if (!st.code && out) st = da_ids_write(out, ids, n_ids); /* atomic: a failed write keeps the old file */
    if (!st.code && !out) {
        for (size_t i = 0; i < n_ids; i++) printf(i + 1 < n_ids ? "%d " : "%d", ids[i]);
        putchar('\n');
        if (fflush(stdout)) st = da_errorf("write error on standard output: %s", strerror(errno));
    }
    free(text);
    free(ids);
    da_tokenizer_free(t);
    return st.code ? cli_fail(st.msg) : 0;
}

int cmd_decode(int argc, char **argv) {
    const char *tok_path = NULL, *model = NULL, *ids_path = NULL, *out = NULL;
    cli_opt opts[] = {
        {"tokenizer", OPT_STR, &tok_path, TOK_HELP, 0},
        {"model", OPT_STR, &model, MODEL_HELP, 0},
        {"ids", OPT_STR, &ids_path, "file of whitespace-separated token ids", 0},
        {"out", OPT_STR, &out, "write the bytes here instead of standard output", 0},
    };
    const char *req[] = {"ids", NULL};
    int rc = cli_parse("decode", "Writes the bytes that token ids stand for (the inverse of encode).", argc, argv, opts,
                       4, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    const char *inputs[3] = {ids_path, tok_path, model};
    da_status st = da_check_outputs_not_inputs(&out, out ? 1 : 0, inputs, 3);
    if (st.code) return cli_fail(st.msg);
    da_tokenizer *t;
    if ((st = open_tokenizer(tok_path, model, &t)).code) return cli_fail(st.msg);
    int *ids = NULL, n = 0;
    uint8_t *bytes = NULL;
    size_t nb = 0, cap = 0;
    st = da_ids_read(ids_path, da_tokenizer_vocab_size(t), &ids, &n);
    if (!st.code) st = da_tokenizer_decode(t, ids, (size_t)n, &bytes, &nb, &cap);
    if (!st.code && out) st = da_bytes_write(out, bytes, nb); /* atomic: a failed write keeps the old file */
    else if (!st.code && (fwrite(bytes, 1, nb, stdout) != nb || fflush(stdout)))
        st = da_errorf("standard output: write failed: %s", strerror(errno));
    free(ids);
    free(bytes);
    da_tokenizer_free(t);
    return st.code ? cli_fail(st.msg) : 0;
}

int cmd_tokenizer(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "train")) {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            printf("usage: diffattn tokenizer train --vocab-size N --in FILES... --out tokenizer.json\n");
            return 0;
        }
        fprintf(stderr, "diffattn tokenizer: expected 'train' (see diffattn tokenizer --help)\n");
        return 1;
    }
    da_bpe_train_config c = {8192, 2, 0};
    const char *out = NULL, *first_in = NULL;
    cli_opt opts[] = {
        {"vocab-size", OPT_INT, &c.vocab_size, "tokens in all: 256 bytes, the merges, and <|endoftext|> last", 0},
        {"in", OPT_STR, &first_in, "text files and folders to learn from, one or more", 0},
        {"out", OPT_STR, &out, "tokenizer.json to write (Hugging Face format, byte-level BPE)", 0},
        {"min-frequency", OPT_INT, &c.min_frequency, "stop when the most frequent pair is rarer than this", 0},
        {"quiet", OPT_FLAG, &c.quiet, "no progress display", 0},
    };
    /* --in takes every argument up to the next flag */
    char **rest = malloc(sizeof(char *) * (size_t)(argc + 1));
    const char **inputs = malloc(sizeof(char *) * (size_t)(argc + 1));
    if (!rest || !inputs) return cli_fail("out of memory");
    int n_rest = 0, n_in = 0;
    rest[n_rest++] = argv[1];
    for (int i = 2; i < argc; i++) {
        rest[n_rest++] = argv[i];
        if (!strcmp(argv[i], "--in")) {
            int j = i + 1;
            while (j < argc && strncmp(argv[j], "--", 2)) inputs[n_in++] = argv[j++];
            rest[n_rest++] = j > i + 1 ? argv[i + 1] : (char *)"";
            i = j - 1;
        }
    }
    const char *req[] = {"in", "out", NULL};
    int rc = cli_parse("tokenizer train",
                       "Learns a byte-level BPE tokenizer (GPT-2 pre-tokenisation) and writes it as tokenizer.json.",
                       n_rest, rest, opts, 5, req);
    int code = 0;
    if (rc) code = rc == CLI_HELP ? 0 : 1;
    else if (n_in == 0) code = cli_fail("--in needs at least one file or folder");
    else {
        da_bpe_train_stats s;
        da_status st = da_check_outputs_not_inputs(&out, 1, inputs, n_in);
        if (!st.code) st = da_bpe_train(inputs, n_in, out, &c, &s);
        if (st.code) code = cli_fail(st.msg);
        else
            printf("%.1f MB, %ld distinct pre-tokens, %d merges in %.1f s: wrote %s\n", s.bytes / 1e6, s.unique_words,
                   s.merges, s.seconds, out);
    }
    free(rest);
    free(inputs);
    return code;
}
