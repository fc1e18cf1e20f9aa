/* The benchmarks' results as JSON lines (diffattn bench --json), through the
 * one writer of io/json_out.h. */
#include <omp.h>
#include <stdlib.h>

#include "bench/bench.h"
#include "io/json_out.h"

char *da_bench_json(const char *bench, const char *kernel, const da_config *c, int batch, int seq, const da_exec *x,
                    const da_bench_result *r) {
    cJSON *o = cJSON_CreateObject();
    da_json_str(o, "bench", bench);
    da_json_str(o, "arch", da_arch_name(c->arch));
    da_json_str(o, "kernel", kernel);
    da_json_int(o, "dim", c->dim);
    da_json_int(o, "layers", c->n_layers);
    da_json_int(o, "n_heads", c->n_heads);
    da_json_bool(o, "bf16", x->bf16_matmul);
    da_json_str(o, "isa", da_isa_name(x->isa));
    da_json_int(o, "n_kv_heads", c->n_kv_heads);
    da_json_int(o, "ffn_hidden", c->ffn_hidden);
    da_json_int(o, "vocab", c->vocab_size);
    da_json_int(o, "seq", seq);
    da_json_int(o, "batch", batch);
    da_json_int(o, "threads", omp_get_max_threads());
    da_json_int(o, "n_params", (long long)r->n_params);
    da_json_int(o, "steps", r->steps);
    da_json_fixed(o, "tok_per_s", r->tok_per_s, 1);
    da_json_fixed(o, "ms_per_step", r->ms_min, 3);
    da_json_fixed(o, "ms_per_step_median", r->ms_median, 3);
    da_json_fixed(o, "gflops", r->gflops, 2);
    da_json_fixed(o, "peak_gflops", r->peak_gflops, 2);
    da_json_fixed(o, "peak_bf16_gflops", r->peak_bf16_gflops, 2);
    da_json_fixed(o, "mfu", r->mfu, 4);
    da_json_fixed(o, "peak_rss_mb", r->peak_rss_mb, 1);
    if (x->prof_s) {
        cJSON *p = cJSON_AddObjectToObject(o, "profile_ms_per_step");
        for (int i = 0; i < DA_PROF_N; i++) da_json_fixed(p, da_prof_name(i), x->prof_s[i] * 1e3 / r->steps, 3);
    }
    return da_json_finish(o);
}

char *da_bench_generate_json(const char *path, const da_bench_generate_opts *o, const da_bench_generate_result *r,
                             const da_bench_generate_result *first, double loadavg, double bandwidth_gbs) {
    const char *wait = getenv("OMP_WAIT_POLICY");
    cJSON *j = cJSON_CreateObject();
    da_json_str(j, "model", path);
    da_json_str(j, "weights", r->weight_type);
    da_json_str(j, "path", "engine");
    da_json_str(j, "act", r->act);
    da_json_str(j, "kv", r->kv_int8 ? "int8" : r->kv_f16 ? "f16" : "f32");
    da_json_int(j, "prompt_tokens", o->prompt);
    da_json_int(j, "decode_tokens", o->gen);
    da_json_fixed(j, "prompt_tok_per_s", r->best_prompt, 2);
    da_json_fixed(j, "decode_tok_per_s", r->best_decode, 2);
    da_json_int(j, "file_bytes", r->file_bytes);
    da_json_fixed(j, "decode_speedup_vs_first", r->best_decode / first->best_decode, 3);
    da_json_fixed(j, "prompt_speedup_vs_first", r->best_prompt / first->best_prompt, 3);
    da_json_int(j, "threads", omp_get_max_threads());
    da_json_str(j, "isa", r->dots);
    da_json_str(j, "wait_policy", wait ? wait : "default");
    da_json_fixed(j, "loadavg", loadavg, 2);
    da_json_fixed(j, "decode_bytes_per_token", r->decode_bytes, 0);
    da_json_fixed(j, "copy_bandwidth_gbs", bandwidth_gbs, 2);
    da_json_fixed(j, "bandwidth_fraction",
                  bandwidth_gbs > 0 ? r->best_decode * r->decode_bytes / 1e9 / bandwidth_gbs : 0.0, 3);
    return da_json_finish(j);
}
