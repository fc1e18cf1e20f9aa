/* llama.cpp's own `llama` GGUF files (docs/formats.md): the configuration of
 * the family's keys (gguf_config.h), as llama.cpp reads them.
 *
 * RoPE: llama.cpp's converter permutes Hugging Face's q and k rows so that
 * each head rotates the pairs (2i, 2i+1) (LLAMA_ROPE_TYPE_NORM) at
 * theta^(-2i/d); that is diffattn's layout with the Llama frequency rule, so
 * the rows are taken as they are. A missing `output` is a tied head, which
 * reads token_embd's bytes in their own type, as llama.cpp does. Rope
 * scaling: linear keys, or the rope_freqs tensor of Llama 3's scaling. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/family.h"
#include "io/gguf_config.h"
#include "ops/ops.h"

/* The key of quantity q in the family's layout (family.h). */
#define K(q) da_family_key_of(fam, q, fam->tag, k, sizeof k)

#define MAX_HALF 512 /* pairs of the largest head config.c accepts */

static da_status llama_int(const da_gguf_file *f, const char *key, int required, int lo, int hi, int *out) {
    if (!required && !da_gguf_kv_find(f, key)) return da_ok();
    int64_t v;
    da_status st = da_gguf_get_int(f, key, &v);
    if (st.code) return st;
    if (v < lo || v > hi) return da_errorf("%s: %s = %lld is out of range (%d..%d)", f->path, key, (long long)v, lo, hi);
    *out = (int)v;
    return da_ok();
}

/* llama.rope.scaling.*: none, or linear (every frequency / factor); YaRN is refused. */
static da_status llama_rope_scaling(const da_gguf_file *f, const da_family *fam, da_config *c) {
    char k[128];
    const char *type = "linear"; /* llama.cpp's default when only a factor is given */
    float factor = 0.0f;
    da_status st;
    if (da_gguf_kv_find(f, K("rope_scaling")) && (st = da_gguf_get_str(f, K("rope_scaling"), &type)).code)
        return st;
    if (da_gguf_kv_find(f, K("rope_factor"))) {
        if ((st = da_gguf_get_f32(f, K("rope_factor"), &factor)).code) return st;
    } else if (da_gguf_kv_find(f, K("rope_scale_linear"))) {
        if ((st = da_gguf_get_f32(f, K("rope_scale_linear"), &factor)).code) return st;
    }
    if (strcmp(type, "none") && strcmp(type, "linear"))
        return da_errorf("%s: llama.rope.scaling.type \"%s\" is not supported (none or linear)", f->path, type);
    if (!strcmp(type, "none") || factor == 0.0f || factor == 1.0f) return da_ok();
    if (!(factor > 0.0f) || !isfinite(factor))
        return da_errorf("%s: llama.rope.scaling.factor = %g must be positive", f->path, (double)factor);
    c->rope_scaling = DA_ROPE_SCALE_LINEAR;
    c->rope_factor = factor;
    return da_ok();
}

/* Llama 3's rope scaling from per-pair factors r (llama.cpp divides pair j's
 * frequency by r[j]): with x = 1 / wavelength, Hugging Face's rule is
 * 1/r = (1 - s)/F + s with s = clamp((O x - L) / (H - L), 0, 1), a line in x.
 * F is the largest factor; the line comes from the pairs strictly between 1
 * and F, or from the neighbours of the step when fewer; O is the file's
 * original context (8192 when absent). *ok = 0 when no parameters fit. */
static void llama3_from_factors(const float *r, const double *x, int half, int O, da_config *c, int *ok) {
    double F = 1.0, xs[2] = {0, 0}, ss[2] = {0, 0}, x_one = -1, x_full = -1;
    int n = 0;
    for (int j = 0; j < half; j++) F = fmax(F, r[j]);
    for (int j = 0; j < half; j++) { /* x decreases with j */
        if (r[j] <= 1.0f) x_one = x[j];
        else if (r[j] >= F * (1 - 1e-7)) { if (x_full < 0) x_full = x[j]; }
        else { /* the first and the last pair of the blend */
            const int k = n ? 1 : 0;
            xs[k] = x[j], ss[k] = (1 / r[j] - 1 / F) / (1 - 1 / F);
            n = k + 1;
        }
    }
    if (n < 2 && x_one >= 0) xs[n] = x_one, ss[n++] = 1.0;
    if (n < 2 && x_full >= 0) xs[n] = x_full, ss[n++] = 0.0;
    *ok = n == 2 && xs[0] != xs[1];
    if (!*ok) return;
    const double A = (ss[1] - ss[0]) / (xs[1] - xs[0]), B = ss[0] - A * xs[0];
    const double range = O / A, L = -B * range;
    c->rope_scaling = DA_ROPE_SCALE_LLAMA3;
    c->rope_factor = (float)F;
    c->rope_low_freq_factor = (float)L;
    c->rope_high_freq_factor = (float)(L + range);
    c->rope_original_max_pos = O;
    *ok = A > 0 && L > 0;
}

/* rope_freqs: all ones is no scaling, one value F everywhere linear scaling
 * by F, and otherwise Llama 3's scaling when its parameters reproduce every
 * factor (checked through the same da_rope_inv_freq the engine uses). */
static da_status llama_rope_freqs(const da_gguf_file *f, const da_family *fam, da_config *c) {
    char k[128];
    const da_gguf_tensor *t = da_gguf_tensor_find(f, "rope_freqs.weight");
    if (!t) return da_ok();
    const int half = da_head_dim(c) / 2, d = 2 * half;
    if (half > MAX_HALF) return da_errorf("%s: head size %d is too large", f->path, d);
    if (t->type != DA_QT_F32 || t->n_dims != 1 || t->ne[0] != half)
        return da_errorf("%s: tensor \"rope_freqs.weight\" must be f32 [%d] (head size / 2)", f->path, half);
    if (c->rope_scaling != DA_ROPE_SCALE_NONE)
        return da_errorf("%s: tensor \"rope_freqs.weight\" and llama.rope.scaling together are not supported", f->path);
    const float *r = (const float *)(const void *)da_gguf_data(f, t);
    double x[MAX_HALF], base[MAX_HALF], got[MAX_HALF];
    int all_one = 1, all_same = 1;
    for (int j = 0; j < half; j++) {
        if (!(r[j] >= 1.0f) || !isfinite(r[j]))
            return da_errorf("%s: rope_freqs[%d] = %g (expected finite factors >= 1)", f->path, j, (double)r[j]);
        base[j] = pow(c->rope_theta, -2.0 * j / d);
        x[j] = base[j] / 6.283185307179586;
        all_one &= r[j] == 1.0f;
        all_same &= r[j] == r[0];
    }
    if (all_one) return da_ok();
    int ok = 1, O = 8192;
    da_status st;
    if ((st = llama_int(f, K("rope_original_max_pos"), 0, 1, 1 << 20, &O)).code) return st;
    if (all_same) c->rope_scaling = DA_ROPE_SCALE_LINEAR, c->rope_factor = r[0];
    else llama3_from_factors(r, x, half, O, c, &ok);
    da_rope_inv_freq_of(c, got); /* c->rope_freq is Llama's rule (da_gguf_config_llama_cpp) */
    for (int j = 0; ok && j < half; j++) ok = fabs(got[j] * r[j] / base[j] - 1) < 1e-5;
    if (!ok)
        return da_errorf("%s: tensor \"rope_freqs.weight\" holds per-pair rope factors that neither linear nor "
                         "Llama 3 rope scaling reproduces",
                         f->path);
    return da_ok();
}

da_status da_gguf_config_llama_cpp(const da_gguf_file *f, const da_family *fam, da_config *c) {
    da_config_default(c);
    da_family_variant(fam, &c->arch);
    char k[128];
    c->rope_freq = DA_ROPE_FREQ_LLAMA;
    c->rope_scaling = DA_ROPE_SCALE_NONE;
    c->window = 0;
    da_status st;
    const struct { const char *quantity; int *dst; int required; } ints[] = {
        {"max_seq_len", &c->max_seq_len, 1}, {"dim", &c->dim, 1},         {"n_layers", &c->n_layers, 1},
        {"ffn_hidden", &c->ffn_hidden, 1},   {"n_heads", &c->n_heads, 1}, {"n_kv_heads", &c->n_kv_heads, 0},
    };
    c->n_kv_heads = 0;
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((st = llama_int(f, K(ints[i].quantity), ints[i].required, 1, 1 << 30, ints[i].dst)).code) return st;
    if (!c->n_kv_heads) c->n_kv_heads = c->n_heads;
    /* the vocabulary: llama.vocab_size, else token_embd's rows */
    const da_gguf_tensor *emb = da_gguf_tensor_find(f, "token_embd.weight");
    if (!emb || emb->n_dims != 2) return da_errorf("%s: tensor \"token_embd.weight\" is missing or not 2-D", f->path);
    c->vocab_size = (int)emb->ne[1];
    if ((st = llama_int(f, K("vocab_size"), 0, 1, 1 << 30, &c->vocab_size)).code) return st;
    c->rope_theta = 10000.0f;
    if (da_gguf_kv_find(f, K("rope_theta")) && (st = da_gguf_get_f32(f, K("rope_theta"), &c->rope_theta)).code)
        return st;
    if ((st = da_gguf_get_f32(f, K("norm_eps"), &c->norm_eps)).code) return st;
    c->tie_embeddings = da_gguf_tensor_find(f, "output.weight") == NULL;
    if ((st = llama_rope_scaling(f, fam, c)).code) return st;
    if (c->n_heads) {
        /* key_length, when given, may differ from embedding_length / head_count: diffattn's head_dim */
        const int d0 = c->dim % c->n_heads ? 0 : c->dim / c->n_heads;
        int key_len = d0, value_len, rope_dims;
        if ((st = llama_int(f, K("key_length"), !d0, 1, 1 << 20, &key_len)).code) return st;
        value_len = rope_dims = key_len;
        if ((st = llama_int(f, K("value_length"), 0, 1, 1 << 20, &value_len)).code ||
            (st = llama_int(f, K("rope_dims"), 0, 1, 1 << 20, &rope_dims)).code)
            return st;
        if (value_len != key_len)
            return da_errorf("%s: llama.attention.value_length %d != key_length %d; diffattn's heads have one size",
                             f->path, value_len, key_len);
        if (rope_dims != key_len)
            return da_errorf("%s: llama.rope.dimension_count %d != the head size %d; diffattn rotates whole heads",
                             f->path, rope_dims, key_len);
        c->head_dim = key_len == d0 ? 0 : key_len;
    }
    if ((st = da_config_validate(c)).code || (st = llama_rope_freqs(f, fam, c)).code || (st = da_config_validate(c)).code)
        return !strncmp(st.msg, f->path, strlen(f->path)) ? st /* already names the file (rope_freqs) */
                                                            : da_errorf("%s: impossible configuration: %s", f->path, st.msg);
    return da_ok();
}
