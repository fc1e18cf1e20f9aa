/* diffattn eval ppl: a quantized model's perplexity against its base. */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "commands.h"
#include "diffattn/quant.h"
#include "eval/eval.h"

int cmd_eval_ppl(int argc, char **argv) {
    const char *model = NULL, *base = NULL, *data = NULL, *act_s = NULL, *kv_s = NULL, *cache = NULL;
    int ctx = 0, json = 0;
    long chunks = 100;
    float val_fraction = 0.1f;
    cli_opt opts[] = {
        {"model", OPT_STR, &model, "quantized model (.gguf; a .safetensors runs in f32 through the same code)", 0},
        {"base", OPT_STR, &base, "the full-precision model it came from (.safetensors)", 0},
        {"data", OPT_STR, &data, "text file or folder, or token shards (the validation split is used)", 0},
        {"ctx", OPT_INT, &ctx, "chunk length n_ctx (0 = the model's max_seq_len)", 0},
        {"chunks", OPT_LONG, &chunks, "chunks to score (0 = the whole validation split)", 0},
        {"act", OPT_STR, &act_s, "activations: q8, int8-dynamic, int8-static, bf16, f32 (default: the file's)", 0},
        {"kv", OPT_STR, &kv_s, "KV cache: f32 (default), f16 or int8", 0},
        {"val-fraction", OPT_FLOAT, &val_fraction, "text only: the tail held out, as in train", 0},
        {"base-cache", OPT_STR, &cache,
         "file caching the base model's logits across runs (recomputed when n_ctx, chunks or the base differ)", 0},
        {"json", OPT_FLAG, &json, "print one JSON object", 0},
    };
    const char *req[] = {"model", "base", "data", NULL};
    int rc = cli_parse("eval ppl",
                       "Perplexity of a quantized model and of its full-precision base, llama.cpp's protocol: "
                       "non-overlapping chunks of\nn_ctx validation tokens, the second half of each scored; with the "
                       "mean KL divergence KL(base || quantized)\nand the share of tokens whose top-1 prediction "
                       "agrees.",
                       argc, argv, opts, 10, req);
    if (rc) return rc == CLI_HELP ? 0 : 1;
    if (chunks < 0) return cli_fail("--chunks must be >= 0");
    da_ppl_config pc = {ctx, chunks, da_session_opts_default(), cache, 0};
    if (cli_parse_run_opts(act_s, kv_s, &pc.run)) return 1;
    da_engine *qe = NULL, *be = NULL;
    da_text_data d;
    da_ppl_result r;
    da_status st = da_engine_load_with(&qe, model, cli_load_opts());
    if (!st.code && !(st = da_engine_load_with(&be, base, cli_load_opts())).code) pc.base_file_bytes = (long)da_engine_file_bytes(be);
    const da_config *c = qe ? da_engine_config(qe) : NULL;
    if (!st.code && !(st = da_eval_data_load(&d, data, val_fraction, ctx ? ctx : c->max_seq_len, model,
                                             da_engine_tokenizer(qe), c->vocab_size))
                         .code) {
        st = da_eval_ppl(qe, be, &d, &pc, &r);
        da_text_data_free(&d);
    }
    int code = st.code ? cli_fail(st.msg) : 0;
    if (!st.code && json) code = cli_print_json(da_ppl_json(model, base, qe, &pc, &r));
    else if (!st.code)
        printf("%s (%s, %s weights, %s activations, %s KV): ppl %.4f vs base %.4f (%+.3f%%), KLD %.6f, same top-1 "
               "%.2f%% (%ld chunks, %ld tokens scored)\n",
               model, da_arch_name(c->arch), da_engine_weight_type(qe), da_act_mode_name(r.act),
               pc.run.kv_int8 ? "int8" : pc.run.kv_f16 ? "f16" : "f32", r.ppl, r.base_ppl, r.delta_ppl_pct, r.kld,
               100 * r.same_top1, r.chunks, r.scored);
    da_engine_free(be);
    da_engine_free(qe);
    return code;
}
