/* da_quantize_file: calibrate (optional), AWQ (optional), calibrate again on
 * the scaled model for the static ranges, quantize, write the GGUF. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "infer/tokenizer_read.h"
#include "io/gguf.h"
#include "io/hf_model.h"
#include "quant/calib.h"
#include "quant/quantize.h"
#include "tok/tokenizer.h"
#include "diffattn/formats.h"

void da_quantize_opts_default(da_quantize_opts *o) {
    memset(o, 0, sizeof *o);
    o->type = "q8_0";
    o->act = "q8";
    o->calib_samples = 64;
    o->awq = 1;
    o->seed = 1234;
}

void da_quantize_report_free(da_quantize_report *r) {
    if (!r) return;
    free(r->alpha);
    r->alpha = NULL;
}

/* The static ranges of stats, summarised per site kind for the report. */
static void summarise_ranges(const da_qstats *stats, const float *absmax, int n_layers, da_quantize_report *r) {
    for (int k = 0; k < DA_SITES_PER_LAYER; k++) {
        float mx = 0;
        double ratio = 0;
        for (int l = 0; l < n_layers; l++) {
            const int site = DA_SITES_PER_LAYER * l + k;
            const size_t w = stats->chan_off[site + 1] - stats->chan_off[site];
            double mean = 0;
            for (size_t c = 0; c < w; c++) mean += stats->chan[stats->chan_off[site] + c];
            mean /= (double)w * (double)(stats->rows > 0 ? stats->rows : 1);
            if (absmax[site] > mx) mx = absmax[site];
            if (mean > 0 && absmax[site] / mean > ratio) ratio = absmax[site] / mean;
        }
        r->range_max[k] = mx;
        r->range_ratio[k] = (float)ratio;
    }
    r->head_range = absmax[DA_SITES_PER_LAYER * n_layers];
    r->has_ranges = 1;
}

/* AWQ on m (when asked and the type rounds), then the static ranges of the
 * model that will run: *absmax (DA_N_SITES) malloc'd. */
static da_status calibrate(da_model *m, const da_tokenizer *tok, const da_quantize_opts *o, int type, float **absmax,
                           da_quantize_report *r) {
    const int T = o->calib_seq ? o->calib_seq : m->cfg.max_seq_len, n_sites = DA_N_SITES(&m->cfg);
    da_text_data d;
    da_status st = da_text_data_load_tok(&d, o->calib_data, 0.1f, T, tok);
    if (!st.code && (st = da_text_data_check_vocab(&d, o->calib_data, m->cfg.vocab_size)).code) da_text_data_free(&d);
    if (st.code) return st;
    da_qstats stats;
    if (o->awq && type != DA_QT_F32) {
        const double t0 = da_now_s();
        r->alpha = calloc((size_t)n_sites, sizeof *r->alpha);
        if (!r->alpha) st = da_errorf("out of memory");
        if (!st.code && !(st = da_calibrate(m, &d, o->calib_samples, T, o->seed, &stats)).code) {
            st = da_awq_apply(m, &stats, type, r->alpha);
            da_qstats_free(&stats);
        }
        r->awq = !st.code;
        r->awq_seconds = da_now_s() - t0;
    }
    if (!st.code && !(st = da_calibrate(m, &d, o->calib_samples, T, o->seed + 1, &stats)).code) {
        *absmax = malloc((size_t)n_sites * sizeof **absmax);
        if (*absmax) {
            memcpy(*absmax, stats.absmax, (size_t)n_sites * sizeof **absmax);
            summarise_ranges(&stats, *absmax, m->cfg.n_layers, r);
        } else {
            st = da_errorf("out of memory");
        }
        da_qstats_free(&stats);
    }
    da_text_data_free(&d);
    return st;
}

static da_status parse_opts(const da_quantize_opts *o, da_quantize_types *types, da_act_mode *act) {
    da_qtype t;
    if (!o->type || da_qtype_parse(o->type, &t))
        return da_errorf("quantize: type \"%s\" is not one of q8_0, q4_0, q4_k, f16, bf16, f32",
                         o->type ? o->type : "(null)");
    types->type = t;
    types->output_type = -1;
    types->fallback_q8 = 0;
    if (o->fallback) {
        if (strcmp(o->fallback, "q8_0"))
            return da_errorf("quantize: fallback \"%s\" is not q8_0 (the one fallback type)", o->fallback);
        types->fallback_q8 = 1;
    }
    if (o->output_type) {
        if (!strcmp(o->output_type, "q6_k") || !strcmp(o->output_type, "q6_K")) t = DA_QT_Q6_K;
        else if (da_qtype_parse(o->output_type, &t))
            return da_errorf("quantize: output_type \"%s\" is not one of q6_k, q8_0, q4_0, q4_k, f16, bf16, f32",
                             o->output_type);
        types->output_type = t;
    }
    *act = DA_ACTQ_Q8;
    if (o->act && da_act_mode_parse(o->act, act))
        return da_errorf("quantize: act \"%s\" is not one of q8, int8-dynamic, int8-static, bf16, f32", o->act);
    if (*act == DA_ACTQ_INT8_STATIC && !o->calib_data)
        return da_errorf("quantize: act int8-static needs calibrated ranges: give calibration data");
    if (o->calib_data && o->calib_samples < 1)
        return da_errorf("quantize: calib_samples = %d must be positive", o->calib_samples);
    return da_ok();
}

/* The report's sizes and types from the plan of a streamed conversion. */
static void report_plan(const da_engine *q, const char *out_path, da_quantize_report *r) {
    r->n_layers = q->cfg.n_layers;
    r->n_params = da_config_param_count(&q->cfg);
    r->tokenizer_unnamed = q->tokenizer_json && !da_tokenizer_llama_pre(q->tokenizer_json, strlen(q->tokenizer_json));
    int head = da_engine_file_embed_type(q);
    for (int i = 0; i < q->n_tensors; i++)
        if (!strcmp(q->t[i].name, "output.weight")) head = q->t[i].type;
    snprintf(r->weight_type, sizeof r->weight_type, "%s", da_qtype_name(q->weight_type));
    snprintf(r->output_type, sizeof r->output_type, "%s", da_qtype_name(head));
    snprintf(r->act, sizeof r->act, "%s", da_act_mode_name(q->act));
    FILE *fp = da_fopen_regular(out_path, NULL);
    r->file_bytes = fp && !fseek(fp, 0, SEEK_END) ? ftell(fp) : -1;
    if (fp) fclose(fp);
}

static da_status quantize_folder(const char *dir, const char *out_path, const da_quantize_types *types,
                                 da_act_mode act, const da_quantize_opts *o, da_quantize_report *r) {
    da_config cfg;
    da_status st = da_hf_config_load(&cfg, dir);
    if (!st.code && (st = da_quantize_check(&cfg, types, &r->n_fallback)).code) st = da_errorf("%s: %s", dir, st.msg);
    da_engine plan;
    if (!st.code && !(st = da_quantize_folder(dir, out_path, types, act, !o->load.allow_nonfinite, &plan)).code) {
        report_plan(&plan, out_path, r);
        da_engine_release(&plan);
    }
    return st;
}

da_status da_quantize_file(const char *model_path, const char *out_path, const da_quantize_opts *o,
                           da_quantize_report *r) {
    da_quantize_report scratch;
    if (!r) r = &scratch;
    memset(r, 0, sizeof *r);
    da_quantize_types types;
    da_act_mode act;
    da_status st = parse_opts(o, &types, &act);
    if (st.code) return st;
    const char *inputs[2] = {model_path, o->calib_data};
    if ((st = da_check_outputs_not_inputs(&out_path, 1, inputs, 2)).code) return st;
    if (da_gguf_is_gguf(model_path))
        return da_errorf("%s: already a GGUF; quantize the full-precision .safetensors it came from", model_path);
    /* a folder without calibration is converted tensor by tensor (AWQ and the static ranges need the model) */
    if (da_hf_is_folder(model_path) && !o->calib_data) return quantize_folder(model_path, out_path, &types, act, o, r);
    /* calibration text goes through the model's tokenizer, as its training text did: the one every command
     * reads for a model path (a Hugging Face folder's tokenizer.json, else the one the model carries), read
     * before the model is loaded so that the two never sit in memory together */
    da_tokenizer *tok = NULL;
    if (o->calib_data && (st = da_tokenizer_read(model_path, &o->load, &tok)).code) return st;
    da_model m;
    if ((st = da_model_load_with(&m, model_path, &o->load)).code) {
        da_tokenizer_free(tok);
        return st;
    }
    r->n_layers = m.cfg.n_layers;
    r->n_params = m.n_params;
    r->few_calib_samples = o->calib_data && o->calib_samples < DA_CALIB_MIN_SEQUENCES;
    r->tokenizer_unnamed = m.tokenizer_json && !da_tokenizer_llama_pre(m.tokenizer_json, strlen(m.tokenizer_json));
    if ((st = da_quantize_check(&m.cfg, &types, &r->n_fallback)).code) { /* before any calibration */
        da_tokenizer_free(tok);
        da_model_free(&m);
        return da_errorf("%s: %s", model_path, st.msg);
    }
    float *absmax = NULL;
    if (o->calib_data) st = calibrate(&m, tok, o, types.type, &absmax, r);
    da_tokenizer_free(tok);
    da_engine q;
    if (!st.code && !(st = da_engine_quantize(&q, &m, &types)).code) {
        q.act = act;
        q.act_absmax = absmax;
        absmax = NULL;
        q.calib_samples = o->calib_data ? o->calib_samples : 0;
        q.awq = r->awq;
        if (!(st = da_engine_save_gguf(&q, out_path)).code) {
            snprintf(r->weight_type, sizeof r->weight_type, "%s", da_qtype_name(types.type));
            snprintf(r->output_type, sizeof r->output_type, "%s", da_qtype_name(q.output->type));
            snprintf(r->act, sizeof r->act, "%s", da_act_mode_name(act));
            FILE *fp = da_fopen_regular(out_path, NULL);
            r->file_bytes = fp && !fseek(fp, 0, SEEK_END) ? ftell(fp) : -1;
            if (fp) fclose(fp);
        }
        da_engine_release(&q);
    }
    free(absmax);
    da_model_free(&m);
    if (r == &scratch || st.code) da_quantize_report_free(r);
    return st;
}

da_status da_model_export_gguf(const da_model *m, const char *out_path, const char *type) {
    da_qtype t;
    if (!type || da_qtype_parse(type, &t) || (t != DA_QT_F32 && t != DA_QT_F16 && t != DA_QT_BF16))
        return da_errorf("export: type \"%s\" is not one of f32, f16, bf16 (quantized types: diffattn quantize)",
                         type ? type : "(null)");
    da_quantize_types types = {t, t, 0};
    da_engine q;
    da_status st = da_engine_quantize(&q, m, &types);
    if (st.code) return st;
    q.act = DA_ACTQ_F32;
    st = da_engine_save_gguf(&q, out_path);
    da_engine_release(&q);
    return st;
}

da_status da_folder_export_gguf(const char *dir, const char *out_path, const char *type, const da_load_opts *o,
                                da_config *cfg, int *tokenizer) {
    da_qtype t;
    if (!type || da_qtype_parse(type, &t) || (t != DA_QT_F32 && t != DA_QT_F16 && t != DA_QT_BF16))
        return da_errorf("export: type \"%s\" is not one of f32, f16, bf16 (quantized types: diffattn quantize)",
                         type ? type : "(null)");
    da_quantize_types types = {t, t, 0};
    const char *inputs[1] = {dir};
    da_status st = da_check_outputs_not_inputs(&out_path, 1, inputs, 1);
    da_engine plan;
    if (!st.code) st = da_quantize_folder(dir, out_path, &types, DA_ACTQ_F32, !(o && o->allow_nonfinite), &plan);
    if (st.code) return st;
    *cfg = plan.cfg;
    *tokenizer = !plan.tokenizer_json ? 0
                 : da_tokenizer_llama_pre(plan.tokenizer_json, strlen(plan.tokenizer_json)) ? 1 : 2;
    da_engine_release(&plan);
    return da_ok();
}
