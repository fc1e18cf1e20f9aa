/* The family table (src/io/family.c): every row's tensor names map both ways,
 * lookups by Hugging Face model_type and GGUF general.architecture find the
 * right row and variant, export picks the row the variant table's Hugging
 * Face columns promise, and each row names every key its readers and
 * writers ask for. */
#include <stdio.h>
#include <string.h>

#include "attn/variant.h"
#include "harness.h"
#include "io/family.h"

/* native -> file -> native is the identity for every named tensor of every row, at layer 3 and outside layers */
static int test_names_round_trip(void) {
    int n;
    const da_family *f = da_family_all(&n);
    CHECK(n >= 4);
    for (int i = 0; i < n; i++) {
        const da_family_name *lists[3] = {f[i].globals, f[i].layer, f[i].layer_own};
        for (int k = 0; k < 3; k++)
            for (const da_family_name *r = lists[k]; r && r->native; r++) {
                char native[160], file[160], back[160], want[160];
                if (k) snprintf(native, sizeof native, "layers.3.%s", r->native);
                else snprintf(native, sizeof native, "%s", r->native);
                if (da_family_to_file(&f[i], native, file, sizeof file) ||
                    da_family_from_file(&f[i], file, back, sizeof back) || strcmp(back, native)) {
                    fprintf(stderr, "  %s: %s -> %s -> %s\n", f[i].name, native, file, back);
                    return 1;
                }
                if (k) snprintf(want, sizeof want, f[i].layer_prefix, 3);
                else want[0] = 0;
                strncat(want, r->file, sizeof want - strlen(want) - 1);
                CHECK(!strcmp(file, want));
            }
    }
    return 0;
}

/* the names the formats are known by, and names outside a row */
static int test_known_names(void) {
    const da_family *hf = da_family_hf("diffllama"), *gg = da_family_gguf("llama", &(da_arch){0});
    CHECK(hf && gg);
    char out[160];
    CHECK(!da_family_to_file(hf, "layers.0.attn.out_proj.weight", out, sizeof out));
    CHECK(!strcmp(out, "model.layers.0.self_attn.o_proj.weight"));
    CHECK(!da_family_to_file(hf, "output.weight", out, sizeof out) && !strcmp(out, "lm_head.weight"));
    CHECK(!da_family_to_file(gg, "layers.12.feed_forward.w2.weight", out, sizeof out));
    CHECK(!strcmp(out, "blk.12.ffn_down.weight"));
    /* an attention tensor llama.cpp has no name for keeps the variant's own after the block prefix */
    CHECK(!da_family_to_file(gg, "layers.1.attn.gate_proj.weight", out, sizeof out));
    CHECK(!strcmp(out, "blk.1.attn.gate_proj.weight"));
    CHECK(!da_family_from_file(gg, "blk.1.attn.gate_proj.weight", out, sizeof out));
    CHECK(!strcmp(out, "layers.1.attn.gate_proj.weight"));
    /* Hugging Face has no such rule, nor a name for another variant's tensor */
    CHECK(da_family_to_file(hf, "layers.1.attn.gate_proj.weight", out, sizeof out) == -1);
    CHECK(da_family_to_file(da_family_hf("llama"), "layers.0.attn.lambda_q1", out, sizeof out) == -1);
    /* Motif's PolyNorm weights and learned head norm */
    CHECK(!da_family_to_file(da_family_hf("motif"), "layers.2.feed_forward.poly.bias", out, sizeof out));
    CHECK(!strcmp(out, "model.layers.2.mlp.act_fn.bias"));
    CHECK(!da_family_from_file(da_family_hf("motif"), "model.layers.0.self_attn.subln.weight", out, sizeof out));
    CHECK(!strcmp(out, "layers.0.attn.subln.weight"));
    CHECK(da_family_from_file(gg, "blk.x.attn_q.weight", out, sizeof out) == -1);
    CHECK(da_family_from_file(gg, "layers.0.attn_q.weight", out, sizeof out) == -1);
    CHECK(da_family_to_file(gg, "tok_embeddings", out, sizeof out) == -1);
    return 0;
}

static int test_lookups(void) {
    da_arch a = DA_ARCH_N;
    const da_family *f = da_family_hf("diffllama");
    CHECK(f && !da_family_variant(f, &a) && a == DA_ARCH_DIFF && f->heads_per_native == 2 && f->folds_head_norm);
    f = da_family_hf("llama");
    CHECK(f && !da_family_variant(f, &a) && a == DA_ARCH_SOFTMAX && f->heads_per_native == 1);
    f = da_family_hf("motif"); /* Motif's heads map one to one; its config keys are its rule's (hf_motif.c) */
    CHECK(f && !da_family_variant(f, &a) && a == DA_ARCH_GDA && f->heads_per_native == 1 && f->hf_rule);
    CHECK(!da_family_hf("mistral") && !da_family_hf("diffattn-diff"));
    CHECK((f = da_family_gguf("llama", &a)) && a == DA_ARCH_SOFTMAX && f->plain_only);
    CHECK((f = da_family_gguf("diffattn-diff2", &a)) && a == DA_ARCH_DIFF2 && !f->plain_only);
    CHECK((f = da_family_gguf("diffattn-nsa", &a)) && a == DA_ARCH_NSA);
    CHECK(!da_family_gguf("diffattn-nope", &a) && !da_family_gguf("diffllama", &a));
    /* the older layout: diffattn's own names, the variant in a key, never written */
    char out[160];
    CHECK((f = da_family_gguf("diffattn", &a)) && f->names_native && f->read_only);
    CHECK(!da_family_to_file(f, "layers.2.attn.subln.weight", out, sizeof out) && !strcmp(out, "layers.2.attn.subln.weight"));
    return 0;
}

/* export: the GGUF architecture of each configuration, and the Hugging Face row the variant table promises */
static int test_export_rows(void) {
    da_config c;
    char arch[64];
    da_config_default(&c);
    c.arch = DA_ARCH_SOFTMAX;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "llama"));
    c.window = 8; /* llama.cpp's llama has no sliding window */
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-softmax"));
    c.window = 0;
    c.head_norm = DA_HEAD_NORM_ON;
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-softmax"));
    c.head_norm = DA_HEAD_NORM_DEFAULT;
    c.arch = DA_ARCH_DIFF; /* the older layout is read, never written */
    CHECK(da_family_gguf_of(&c, arch, sizeof arch) && !strcmp(arch, "diffattn-diff"));
    for (int a = 0; a < DA_ARCH_N; a++) {
        da_config_default(&c);
        c.arch = (da_arch)a;
        const attn_variant *v = da_attn_variant_of(c.arch);
        const da_family *f = da_family_hf_of(&c);
        CHECK(da_family_gguf_of(&c, arch, sizeof arch));
        if (!!f != !!v->hf || (f && strcmp(f->hf_class, v->hf_class))) {
            fprintf(stderr, "  %s: variant table hf %d (%s), family %s\n", v->name, v->hf,
                    v->hf_class ? v->hf_class : "-", f ? f->hf_class : "none");
            return 1;
        }
    }
    return 0;
}

/* every quantity the readers and writers look up has a key in each row of its container */
static int test_keys(void) {
    static const char *const hf[] = {"dim",        "n_layers",   "n_heads",     "n_kv_heads", "head_dim",
                                     "ffn_hidden", "vocab_size", "max_seq_len", "norm_eps",   "rope_theta",
                                     "tie_embeddings"};
    static const char *const gguf[] = {"max_seq_len", "dim",        "n_layers",     "ffn_hidden",   "n_heads",
                                       "n_kv_heads",  "rope_dims",  "key_length",   "value_length", "rope_theta",
                                       "rope_scaling", "rope_factor", "norm_eps",   "vocab_size",   "window",
                                       "rope_scale_linear", "rope_original_max_pos"};
    int n;
    const da_family *f = da_family_all(&n);
    char buf[128];
    for (int i = 0; i < n; i++) {
        if (f[i].container == DA_FAMILY_NATIVE) continue; /* its keys are da_config_fields' own */
        const int is_hf = f[i].container == DA_FAMILY_HF;
        const char *const *q = is_hf ? hf : gguf;
        const size_t nq = is_hf ? sizeof hf / sizeof hf[0] : sizeof gguf / sizeof gguf[0];
        for (size_t k = 0; k < nq; k++)
            if (!da_family_key_of(&f[i], q[k], "llama", buf, sizeof buf)) {
                fprintf(stderr, "  %s has no key for %s\n", f[i].name, q[k]);
                return 1;
            }
    }
    CHECK(!strcmp(da_family_key_of(da_family_hf("llama"), "dim", NULL, NULL, 0), "hidden_size"));
    const char *k = da_family_key_of(da_family_gguf("llama", &(da_arch){0}), "n_layers", "diffattn-diff", buf, sizeof buf);
    CHECK(k && !strcmp(k, "diffattn-diff.block_count"));
    CHECK(!da_family_key_of(da_family_hf("llama"), "no_such_quantity", NULL, NULL, 0));
    return 0;
}

int main(void) {
    RUN(test_names_round_trip);
    RUN(test_known_names);
    RUN(test_lookups);
    RUN(test_export_rows);
    RUN(test_keys);
    TH_SUMMARY();
}
