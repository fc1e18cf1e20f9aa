/* Motif's config.json (MotifForCausalLM: Motif-2.6B, Motif-2-12.7B), the
 * hf-motif row's rule (family.h: hf_rule; hf_model.h).
 *
 * The heads: num_attention_heads H query heads in G = num_noise_heads groups
 * striped [s_1 .. s_gr, n] (gr = H/G - 1), over num_key_value_heads K/V
 * heads forming interleaved pairs (K head 2p the signal maps' key of pair p,
 * 2p+1 the noise maps'; V heads 2p, 2p+1 the 2d-wide value). No
 * num_noise_heads is Motif-2.6B's DIFF V1, G = H/2. diffattn's GDA
 * (src/attn/gda.c) keeps exactly that layout: n_heads = H - G signal heads,
 * gda_noise_heads = G, n_kv_heads = pairs, so the tensors only need the
 * common RoPE row permutation.
 *
 * subln, the head norm, has eps attn_rms_norm_eps where diffattn's is 1e-5:
 * RMSNorm(s x, eps) = RMSNorm(x, eps / s^2) and the norm's input is linear in
 * v, so v_proj is scaled by s = sqrt(1e-5 / attn_rms_norm_eps) on the way in
 * (exact but for one rounding of v's weights; none at Motif's 1e-5), and
 * export writes attn_rms_norm_eps = 1e-5. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attn/attention.h"
#include "io/hf_model.h"

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int absent(const cJSON *v) { return !v || cJSON_IsNull(v); }

/* A key that turns a feature on when true: refused then, naming it and what it means. */
static da_status refuse_true(const char *path, const cJSON *root, const char *key, const char *what) {
    const cJSON *v = get(root, key);
    if (absent(v) || cJSON_IsFalse(v)) return da_ok();
    if (!cJSON_IsBool(v)) return da_errorf("%s: \"%s\" must be true or false", path, key);
    return da_errorf("%s: %s is true (%s); diffattn's Motif does not implement it", path, key, what);
}

/* An optional positive integer; 0 when absent or null. */
static da_status opt_int(const char *path, const cJSON *root, const char *key, int *out) {
    const cJSON *v = get(root, key);
    *out = 0;
    if (absent(v)) return da_ok();
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9)
        return da_errorf("%s: \"%s\" must be a positive integer or null", path, key);
    *out = (int)v->valuedouble;
    return da_ok();
}

/* Keys whose "on" value changes the maths diffattn runs. */
static da_status refuse_features(const char *path, const cJSON *root) {
    da_status st;
    if ((st = refuse_true(path, root, "use_bias", "biases on every projection")).code) return st;
    if ((st = refuse_true(path, root, "qkv_bias", "biases on q_proj, k_proj, v_proj")).code) return st;
    if ((st = refuse_true(path, root, "use_sliding_window", "sliding-window attention")).code) return st;
    const cJSON *causal = get(root, "is_causal");
    if (!absent(causal) && !cJSON_IsTrue(causal))
        return da_errorf("%s: is_causal is not true (bidirectional attention); diffattn's Motif is causal", path);
    const cJSON *kr = get(root, "k_ratio");
    if (!absent(kr) && !(cJSON_IsNumber(kr) && kr->valuedouble == 1.0))
        return da_errorf("%s: k_ratio must be 1 (a key width other than the query's is not implemented)", path);
    return da_ok();
}

/* 1 when config.json gives num_noise_heads (else V1's G = H/2 was derived). */
static int noise_heads_given(const cJSON *root) { return !absent(get(root, "num_noise_heads")); }

static da_status motif_read(const char *path, const cJSON *root, da_config *c, da_hf_shape *hs) {
    const int H = hs->H, KV = hs->Hkv, d = hs->d;
    da_status st = refuse_features(path, root);
    if (st.code) return st;
    const cJSON *act = get(root, "hidden_act");
    if (absent(act) || (cJSON_IsString(act) && !strcmp(act->valuestring, "poly_norm"))) c->mlp = DA_MLP_POLYNORM;
    else if (cJSON_IsString(act) && !strcmp(act->valuestring, "silu")) c->mlp = DA_MLP_SWIGLU;
    else
        return da_errorf("%s: hidden_act \"%s\" is not supported (Motif's MLP: \"poly_norm\" or \"silu\")", path,
                         cJSON_IsString(act) ? act->valuestring : "(not a string)");
    int G;
    if ((st = opt_int(path, root, "num_noise_heads", &G)).code) return st;
    if (!G) { /* Motif-2.6B: DIFF V1, every even head a signal map and the next its noise map */
        if (H % 2) return da_errorf("%s: num_attention_heads %d is odd and num_noise_heads is not given (DIFF V1 "
                                    "pairs heads 2j, 2j+1)", path, H);
        G = H / 2;
    }
    if (H % G || H / G < 2)
        return da_errorf("%s: num_noise_heads %d must divide num_attention_heads %d into groups of at least one "
                         "signal head and one noise head", path, G, H);
    int ratio;
    if ((st = opt_int(path, root, "grouped_ratio", &ratio)).code) return st;
    if (ratio && ratio != H / G - 1)
        return da_errorf("%s: grouped_ratio %d disagrees with num_attention_heads %d and num_noise_heads %d (%d signal "
                         "heads per group)", path, ratio, H, G, H / G - 1);
    if (KV % 2 || G % (KV / 2))
        return da_errorf("%s: num_key_value_heads %d must be an even number of K/V heads (pairs) whose pair count "
                         "divides num_noise_heads %d%s", path, KV, G, noise_heads_given(root) ? "" : " (not given: H/2)");
    double eps = DA_SUBLN_EPS;
    const cJSON *e = get(root, "attn_rms_norm_eps");
    if (!absent(e)) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble >= 1e-10 && e->valuedouble < 1))
            return da_errorf("%s: attn_rms_norm_eps must be a number in [1e-10, 1)", path);
        eps = e->valuedouble;
    }
    c->n_heads = H - G;
    c->gda_noise_heads = G;
    c->n_kv_heads = KV / 2;
    c->head_dim = d;
    hs->A = 2 * (H - G) * d;
    hs->v_scale = (float)sqrt((double)DA_SUBLN_EPS / eps);
    return da_ok();
}

/* key = v, replacing a key the common writer set. */
static int put(cJSON *o, const char *key, cJSON *v) {
    if (!v) return -1;
    if (get(o, key)) return cJSON_ReplaceItemInObjectCaseSensitive(o, key, v) ? 0 : (cJSON_Delete(v), -1);
    return cJSON_AddItemToObject(o, key, v) ? 0 : (cJSON_Delete(v), -1);
}

static int motif_write(cJSON *o, const da_config *c) {
    const int S = c->n_heads, G = c->gda_noise_heads > 0 ? c->gda_noise_heads : S;
    int bad = put(o, "num_attention_heads", cJSON_CreateNumber(S + G));
    bad |= put(o, "num_key_value_heads", cJSON_CreateNumber(2 * c->n_kv_heads));
    /* DIFF V1 as Motif-2.6B writes it: no num_noise_heads */
    if (G != S) bad |= put(o, "num_noise_heads", cJSON_CreateNumber(G));
    bad |= put(o, "attn_rms_norm_eps", cJSON_CreateRaw("1e-05"));
    bad |= put(o, "hidden_act", cJSON_CreateString(c->mlp == DA_MLP_POLYNORM ? "poly_norm" : "silu"));
    bad |= put(o, "use_bias", cJSON_CreateBool(0));
    return bad ? -1 : 0;
}

const da_hf_config_rule da_hf_motif_rule = {.read = motif_read, .write = motif_write};
