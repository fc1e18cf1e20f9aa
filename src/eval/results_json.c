/* Each evaluation's result as one JSON object (the --json lines of
 * diffattn eval), through the one writer of io/json_out.h. */
#include "eval/eval.h"
#include "diffattn/train.h"
#include "io/json_out.h"

/* The fields every result begins with. */
static cJSON *head(const char *model, da_arch arch) {
    cJSON *o = cJSON_CreateObject();
    da_json_str(o, "model", model);
    da_json_str(o, "arch", da_arch_name(arch));
    return o;
}

char *da_eval_loss_json(const char *model, da_arch arch, int seq, const da_eval_loss_result *r) {
    cJSON *o = head(model, arch);
    da_json_fixed(o, "loss", r->loss, 6);
    da_json_fixed(o, "ppl", r->ppl, 4);
    da_json_int(o, "windows", r->windows);
    da_json_int(o, "seq", seq);
    da_json_int(o, "tokens", r->tokens);
    return da_json_finish(o);
}

static void outlier_stats(cJSON *o, const char *key, const da_outlier_stats *s) {
    static const char *const top[5] = {"top1", "top2", "top3", "top10", "top100"};
    cJSON *x = cJSON_AddObjectToObject(o, key);
    for (int i = 0; i < 5; i++) da_json_fixed(x, top[i], s->top[i], 4);
    da_json_fixed(x, "median", s->median, 4);
    da_json_int(x, "count", (long long)s->count);
}

char *da_outliers_json(const char *model, da_arch arch, const da_outliers_result *r) {
    cJSON *o = head(model, arch);
    da_json_int(o, "tokens", r->tokens);
    outlier_stats(o, "attention_logits", &r->logits);
    outlier_stats(o, "hidden_states", &r->hidden);
    cJSON *lambda = r->n_lambda ? cJSON_AddArrayToObject(o, "lambda") : NULL;
    for (int l = 0; l < r->n_lambda; l++) {
        cJSON *x = da_json_push(lambda);
        da_json_fixed(x, "mean", r->lambda_mean[l], 6);
        da_json_fixed(x, "std", r->lambda_std[l], 6);
        da_json_fixed(x, "min", r->lambda_min[l], 6);
        da_json_fixed(x, "max", r->lambda_max[l], 6);
    }
    return da_json_finish(o);
}

char *da_quant_logits_json(const char *model, da_arch arch, const da_quant_logits_config *c,
                           const da_quant_logits_result *r) {
    cJSON *o = head(model, arch);
    da_json_fixed(o, "exact_loss", r->exact_loss, 6);
    if (c->needle) da_json_fixed(o, "needle_exact", r->needle_exact, 4);
    cJSON *bits = cJSON_AddArrayToObject(o, "bits");
    for (int i = 0; i < c->n_bits; i++) {
        cJSON *x = da_json_push(bits);
        da_json_int(x, "bits", c->bits[i]);
        da_json_fixed(x, "loss", r->loss[i], 6);
        da_json_fixed(x, "delta", r->loss[i] - r->exact_loss, 6);
        if (c->needle) da_json_fixed(x, "needle", r->needle[i], 4);
    }
    return da_json_finish(o);
}

/* A new entry of arr for the prompts of (context i, depth j). */
static cJSON *cell(cJSON *arr, const da_needle_config *c, int i, int j) {
    cJSON *x = da_json_push(arr);
    da_json_int(x, "context", c->contexts[i]);
    da_json_int(x, "depth", c->depths[j]);
    return x;
}

char *da_needle_json(const char *model, da_arch arch, const da_needle_config *c, const da_needle_result *r) {
    cJSON *o = head(model, arch);
    da_json_int(o, "needles", c->needles);
    da_json_int(o, "queries", c->queries);
    da_json_fixed(o, "overall", r->overall, 4);
    da_json_int(o, "asked", r->asked);
    cJSON *res = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < c->n_contexts; i++)
        for (int j = 0; j < c->n_depths; j++) da_json_fixed(cell(res, c, i, j), "accuracy", r->acc[i][j], 4);
    return da_json_finish(o);
}

char *da_needle_attention_json(const char *model, const da_config *cfg, const da_needle_config *c,
                               const da_needle_attention_result *r) {
    cJSON *o = head(model, cfg->arch);
    da_json_int(o, "needles", c->needles);
    da_json_int(o, "prompts", r->prompts);
    da_json_fixed(o, "answer", r->answer_all, 4);
    da_json_fixed(o, "noise", r->noise_all, 4);
    da_json_fixed(o, "answer_digit_accuracy", r->digits_all, 4);
    cJSON *res = cJSON_AddArrayToObject(o, "results");
    for (int i = 0; i < c->n_contexts; i++)
        for (int j = 0; j < c->n_depths; j++) {
            cJSON *x = cell(res, c, i, j);
            da_json_fixed(x, "answer", r->answer[i][j], 4);
            da_json_fixed(x, "noise", r->noise[i][j], 4);
            da_json_fixed(x, "answer_digit_accuracy", r->digits[i][j], 4);
        }
    cJSON *layers = cJSON_AddArrayToObject(o, "by_layer");
    for (int l = 0; l < cfg->n_layers && l < DA_ATTN_MAX_LAYERS; l++) {
        cJSON *x = da_json_push(layers);
        da_json_int(x, "layer", l);
        da_json_fixed(x, "answer", r->answer_by_layer[l], 4);
        da_json_fixed(x, "noise", r->noise_by_layer[l], 4);
    }
    return da_json_finish(o);
}

static const char *kv_name(const da_session_opts *o) {
    return o->kv_int8 ? "int8" : o->kv_f16 ? "f16" : "f32";
}

char *da_ppl_json(const char *model, const char *base, const da_engine *q, const da_ppl_config *c,
                  const da_ppl_result *r) {
    const da_config *cfg = da_engine_config(q);
    cJSON *o = cJSON_CreateObject();
    da_json_str(o, "model", model);
    da_json_str(o, "base", base);
    da_json_str(o, "arch", da_arch_name(cfg->arch));
    da_json_str(o, "weights", da_engine_weight_type(q));
    da_json_str(o, "act", da_act_mode_name(r->act));
    da_json_str(o, "kv", kv_name(&c->run));
    da_json_fixed(o, "ppl", r->ppl, 6);
    da_json_fixed(o, "base_ppl", r->base_ppl, 6);
    da_json_fixed(o, "delta_ppl_pct", r->delta_ppl_pct, 4);
    da_json_fixed(o, "kld", r->kld, 6);
    da_json_fixed(o, "same_top1", r->same_top1, 6);
    da_json_int(o, "chunks", r->chunks);
    da_json_int(o, "n_ctx", c->n_ctx ? c->n_ctx : cfg->max_seq_len);
    da_json_int(o, "scored", r->scored);
    return da_json_finish(o);
}
