/* GGUF: writer/reader round trip, quantized models saved and loaded, hostile
 * files (every truncation, random corruption, another architecture) refused
 * cleanly, and the quantized forward against the f32 one. */
#include <stdint.h>
#include <unistd.h>

#include "eval/eval.h"
#include "harness.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "quant/quantize.h"
#include "session_logits.h"

static char tmpdir[256];
static const char *tpath(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int write_file(const char *path, const unsigned char *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(b, 1, n, fp);
    fclose(fp);
    return w == n ? 0 : -1;
}

/* A small trained-looking model: the seeded init, matrices scaled up so the
 * logits are far from uniform. */
static int make_model_w(da_model *m, da_arch arch, int tie, int window) {
    da_config c;
    da_config_default(&c);
    c.arch = arch;
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = arch == DA_ARCH_DIFF ? 2 : 4;
    c.n_kv_heads = c.n_heads;
    c.ffn_hidden = 256;
    c.max_seq_len = 64;
    c.tie_embeddings = tie;
    c.window = window;
    if (da_model_create(m, &c).code) return -1;
    da_model_init(m, 7);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].ndim == 2)
            for (size_t k = 0; k < m->tensors[i].numel; k++) m->params[m->tensors[i].offset + k] *= 3.0f;
    return 0;
}

static int test_kv_roundtrip(void) {
    da_gguf_writer w;
    da_gguf_writer_init(&w);
    da_gguf_add_str(&w, "general.architecture", "test");
    da_gguf_add_u32(&w, "a.u32", 4000000000u);
    da_gguf_add_f32(&w, "a.f32", 1.5f);
    da_gguf_add_bool(&w, "a.bool", 1);
    float arr[3] = {1, 2, 3};
    da_gguf_add_f32_array(&w, "a.arr", arr, 3);
    float v[5] = {1, 2, 3, 4, 5};
    int64_t ne1[1] = {5};
    da_gguf_add_tensor(&w, "vec", DA_QT_F32, 1, ne1, v, sizeof v);
    block_q8_0 qb[4];
    float x[128];
    for (int i = 0; i < 128; i++) x[i] = (float)(i % 17) - 8.0f;
    da_quantize_row_q8_0(qb, x, 128);
    int64_t ne2[2] = {64, 2};
    da_gguf_add_tensor(&w, "mat", DA_QT_Q8_0, 2, ne2, qb, sizeof qb);
    da_status st = da_gguf_write(&w, tpath("kv.gguf"));
    da_gguf_writer_free(&w);
    CHECK(!st.code);
    da_gguf_file f;
    st = da_gguf_open(&f, tpath("kv.gguf"));
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code);
    int64_t iv;
    float fv;
    int bv;
    const char *sv;
    CHECK(!da_gguf_get_int(&f, "a.u32", &iv).code && iv == 4000000000ll);
    CHECK(!da_gguf_get_f32(&f, "a.f32", &fv).code && fv == 1.5f);
    CHECK(!da_gguf_get_bool(&f, "a.bool", &bv).code && bv == 1);
    CHECK(!da_gguf_get_str(&f, "general.architecture", &sv).code && !strcmp(sv, "test"));
    CHECK(!da_gguf_get_int(&f, "general.alignment", &iv).code && iv == 32);
    const da_gguf_kv *kv = da_gguf_kv_find(&f, "a.arr");
    CHECK(kv && kv->type == DA_GGUF_ARRAY && kv->arr_type == DA_GGUF_F32 && kv->arr_n == 3);
    CHECK(!memcmp(kv->arr_data, arr, sizeof arr));
    CHECK(da_gguf_get_int(&f, "a.f32", &iv).code); /* wrong type is an error */
    CHECK(da_gguf_get_int(&f, "absent", &iv).code);
    const da_gguf_tensor *t = da_gguf_tensor_find(&f, "mat");
    CHECK(t && t->type == DA_QT_Q8_0 && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == 2 && t->nbytes == sizeof qb);
    CHECK((f.data_offset + t->offset) % 32 == 0 && f.data_offset % 32 == 0);
    CHECK(!memcmp(da_gguf_data(&f, t), qb, sizeof qb));
    t = da_gguf_tensor_find(&f, "vec");
    CHECK(t && !memcmp(da_gguf_data(&f, t), v, sizeof v));
    da_gguf_close(&f);
    return 0;
}

static int make_model(da_model *m, da_arch arch, int tie) { return make_model_w(m, arch, tie, 0); }

/* Quantize, save, load: every byte and the config (a window too) come back; DIFF2's
 * lambda_proj stays f32. */
/* A reloaded engine's embedding against the in-memory engine q it was saved from: q holds it in f32,
 * rounded through the file's type (tied: its head copy is that tensor), and r keeps the file's type, so every
 * row r looks up is q's, bit for bit. */
static int same_embedding(const da_engine *q, const da_engine *r) {
    const da_qtensor *qe = &q->t[0], *re = &r->t[0];
    if (q->head_copy) {
        const da_qtensor *h = &q->t[q->n_tensors - 1];
        CHECK(re->type == h->type && !memcmp(re->data, h->data, h->row_bytes * (size_t)h->rows));
    } else {
        CHECK(re->type == q->embed_type);
    }
    float *row = malloc((size_t)re->cols * sizeof *row);
    CHECK(row);
    int same = 1;
    for (int v = 0; v < re->rows && same; v++) {
        da_engine_embed_row(r, v, row);
        same = !memcmp(row, (const float *)(const void *)qe->data + (size_t)v * qe->cols, (size_t)qe->cols * sizeof *row);
    }
    free(row);
    CHECK(same);
    return 0;
}

static int test_model_roundtrip(void) {
    const int types[] = {DA_QT_Q8_0, DA_QT_Q4_0, DA_QT_F16, DA_QT_Q4_0};
    const da_arch archs[] = {DA_ARCH_DIFF, DA_ARCH_SOFTMAX, DA_ARCH_DIFF, DA_ARCH_DIFF2};
    for (int k = 0; k < 4; k++) {
        da_model m;
        CHECK(!make_model_w(&m, archs[k], k == 2, k == 3 ? 13 : 0));
        da_engine q, r;
        da_quantize_types o = {types[k], -1, 1};
        CHECK(!da_engine_quantize(&q, &m, &o).code);
        da_status st = da_engine_save_gguf(&q, tpath("m.gguf"));
        CHECK(!st.code);
        st = da_engine_load_gguf(&r, tpath("m.gguf"));
        if (st.code) fprintf(stderr, "  %s\n", st.msg);
        CHECK(!st.code);
        CHECK(!memcmp(&r.cfg, &q.cfg, sizeof r.cfg) && r.n_tensors == q.n_tensors - q.head_copy &&
              r.weight_type == types[k]);
        CHECK(r.cfg.window == (k == 3 ? 13 : 0));
        CHECK(!same_embedding(&q, &r));
        int lambda_proj = 0;
        for (int i = 1; i < r.n_tensors; i++) {
            if (strstr(q.t[i].name, "lambda_proj")) {
                CHECK(q.t[i].type == DA_QT_F32);
                lambda_proj++;
            }
            CHECK(r.t[i].type == q.t[i].type && r.t[i].row_bytes == q.t[i].row_bytes);
            CHECK(!memcmp(r.t[i].data, q.t[i].data, q.t[i].row_bytes * (size_t)q.t[i].rows));
        }
        CHECK(lambda_proj == (archs[k] == DA_ARCH_DIFF2 ? m.cfg.n_layers : 0));
        da_engine_release(&q);
        da_engine_release(&r);
        da_model_free(&m);
    }
    return 0;
}

/* NSA through a q8_0 GGUF: its hyper-parameters as diffattn.nsa_* keys (and
 * no other arch's file has them), the compression and gate tensors f32, every
 * byte and the config back, and the f32 engine's logits of a prompt equal to
 * da_forward's. */
static int test_nsa_roundtrip(void) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_NSA, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_hidden = 256;
    c.max_seq_len = 64, c.nsa_block = 8, c.nsa_stride = 4, c.nsa_select = 16, c.nsa_topn = 3, c.nsa_window = 20;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 9);
    da_engine q, r;
    da_quantize_types o = {DA_QT_Q8_0, -1, 1};
    CHECK(!da_engine_quantize(&q, &m, &o).code);
    CHECK(!da_engine_save_gguf(&q, tpath("nsa.gguf")).code);
    da_status st = da_engine_load_gguf(&r, tpath("nsa.gguf"));
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code && !memcmp(&r.cfg, &q.cfg, sizeof r.cfg) && r.cfg.nsa_select == 16 && r.n_tensors == q.n_tensors);
    CHECK(!same_embedding(&q, &r));
    int f32 = 0;
    for (int i = 1; i < q.n_tensors; i++) {
        if (strstr(q.t[i].name, "cmp_") || strstr(q.t[i].name, "gate.")) f32 += q.t[i].type == DA_QT_F32;
        CHECK(r.t[i].type == q.t[i].type && !memcmp(r.t[i].data, q.t[i].data, q.t[i].row_bytes * (size_t)q.t[i].rows));
    }
    CHECK(f32 == 6 * c.n_layers);
    da_gguf_file f;
    CHECK(!da_gguf_open(&f, tpath("nsa.gguf")).code);
    CHECK(da_gguf_kv_find(&f, "diffattn.nsa_topn") && da_gguf_kv_find(&f, "diffattn.nsa_window"));
    CHECK(!da_gguf_kv_find(&f, "diffattn.nsa_shared_kv")); /* written only when set */
    da_gguf_close(&f);
    da_engine_release(&q);
    da_engine_release(&r);
    enum { T = 48 };
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 37 + 11) % 256;
    da_acts *a;
    CHECK(!da_acts_create(&a, &m.cfg, 1, T).code);
    da_forward(&m, a, tok, NULL, 1, T);
    const size_t n = (size_t)T * m.cfg.vocab_size;
    float *got = malloc(n * sizeof(float));
    da_quantize_types o32 = {DA_QT_F32, DA_QT_F32, 1};
    CHECK(got && !da_engine_quantize(&q, &m, &o32).code);
    CHECK(!session_logits(&q, DA_ACTQ_F32, 0, tok, T, got));
    int rc = expect_close_rel("nsa f32 engine vs da_forward", got, da_acts_logits(a), n, 1e-4, 1e-3);
    da_engine_release(&q);
    free(got);
    da_acts_free(a);
    da_model_free(&m);
    /* another arch's file has none of NSA's keys */
    CHECK(!make_model(&m, DA_ARCH_SOFTMAX, 0));
    CHECK(!da_engine_quantize(&q, &m, &o).code && !da_engine_save_gguf(&q, tpath("sm.gguf")).code);
    CHECK(!da_gguf_open(&f, tpath("sm.gguf")).code);
    CHECK(!da_gguf_kv_find(&f, "diffattn.nsa_block"));
    da_gguf_close(&f);
    da_engine_release(&q);
    da_model_free(&m);
    return rc;
}

/* NSA with one shared K/V projection: the flag as a bool key, back into the
 * config, and the f32 engine's logits equal to da_forward's. */
static int test_nsa_shared_kv_roundtrip(void) {
    da_config c;
    da_config_default(&c);
    c.arch = DA_ARCH_NSA, c.dim = 64, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.ffn_hidden = 256;
    c.max_seq_len = 64, c.nsa_block = 8, c.nsa_stride = 4, c.nsa_select = 16, c.nsa_topn = 3, c.nsa_window = 20;
    c.nsa_shared_kv = 1;
    da_model m;
    CHECK(!da_model_create(&m, &c).code);
    da_model_init(&m, 10);
    da_engine q, r;
    da_quantize_types o32 = {DA_QT_F32, DA_QT_F32, 1};
    CHECK(!da_engine_quantize(&q, &m, &o32).code);
    CHECK(!da_engine_save_gguf(&q, tpath("nsa_shared.gguf")).code);
    da_status st = da_engine_load_gguf(&r, tpath("nsa_shared.gguf"));
    if (st.code) fprintf(stderr, "  %s\n", st.msg);
    CHECK(!st.code && !memcmp(&r.cfg, &q.cfg, sizeof r.cfg) && r.cfg.nsa_shared_kv == 1);
    da_gguf_file f;
    CHECK(!da_gguf_open(&f, tpath("nsa_shared.gguf")).code);
    int on = 0;
    CHECK(!da_gguf_get_bool(&f, "diffattn.nsa_shared_kv", &on).code && on == 1);
    da_gguf_close(&f);
    enum { T = 40 };
    int tok[T];
    for (int i = 0; i < T; i++) tok[i] = (i * 29 + 3) % 256;
    da_acts *a;
    CHECK(!da_acts_create(&a, &m.cfg, 1, T).code);
    da_forward(&m, a, tok, NULL, 1, T);
    const size_t n = (size_t)T * m.cfg.vocab_size;
    float *got = malloc(n * sizeof(float));
    CHECK(got && !session_logits(&r, DA_ACTQ_F32, 0, tok, T, got));
    int rc = expect_close_rel("nsa shared kv f32 engine vs da_forward", got, da_acts_logits(a), n, 1e-4, 1e-3);
    free(got);
    da_acts_free(a);
    da_engine_release(&q);
    da_engine_release(&r);
    da_model_free(&m);
    return rc;
}

/* |got - ref|_2 / |ref|_2 <= tol (a random network's few near-zero head
 * outputs make the max-element error a poor measure). */
static int expect_rms_close(const char *what, const float *got, const float *ref, size_t n, double tol) {
    double e = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    const double rel = sqrt(e / r);
    printf("     %s: relative rms error %.5f\n", what, rel);
    if (!(rel <= tol)) {
        fprintf(stderr, "  %s: relative rms error %.5f > %.5f\n", what, rel, tol);
        return 1;
    }
    return 0;
}

/* q8_0 weights with q8 activations stay close to the f32 model; the f32
 * build of the same code matches da_forward. */
static int test_q8_0_logits_close(void) {
    const da_arch archs[] = {DA_ARCH_DIFF, DA_ARCH_SOFTMAX, DA_ARCH_DIFF2};
    for (int arch = 0; arch < 3; arch++) {
        da_model m;
        CHECK(!make_model(&m, archs[arch], 0));
        enum { T = 48 };
        int tok[T];
        for (int i = 0; i < T; i++) tok[i] = (i * 37 + 11) % 256;
        da_acts *a;
        CHECK(!da_acts_create(&a, &m.cfg, 1, T).code);
        da_forward(&m, a, tok, NULL, 1, T);
        const size_t n = (size_t)T * m.cfg.vocab_size;
        float *ref = malloc(n * sizeof(float)), *got = malloc(n * sizeof(float));
        memcpy(ref, da_acts_logits(a), n * sizeof(float));
        da_engine q;
        da_quantize_types o32 = {DA_QT_F32, DA_QT_F32, 1}, o8 = {DA_QT_Q8_0, -1, 1};
        CHECK(!da_engine_quantize(&q, &m, &o32).code);
        CHECK(!session_logits(&q, DA_ACTQ_F32, 0, tok, T, got));
        int rc = expect_close_rel("f32 qforward vs da_forward", got, ref, n, 1e-4, 1e-3);
        da_engine_release(&q);
        CHECK(!da_engine_quantize(&q, &m, &o8).code);
        CHECK(!session_logits(&q, DA_ACTQ_Q8, 0, tok, T, got));
        rc |= expect_rms_close("q8_0 logits vs f32", got, ref, n, 0.03);
        CHECK(!session_logits(&q, DA_ACTQ_Q8, 1, tok, T, got));
        rc |= expect_rms_close("q8_0 + int8 KV logits vs f32", got, ref, n, 0.03);
        /* the dequantized model (what eval loss etc. load) agrees with the f32-activation run */
        CHECK(!da_engine_save_gguf(&q, tpath("q8.gguf")).code);
        da_model dm;
        CHECK(!da_model_load_any(&dm, tpath("q8.gguf")).code); /* a GGUF, dequantized */
        da_forward(&dm, a, tok, NULL, 1, T);
        CHECK(!session_logits(&q, DA_ACTQ_F32, 0, tok, T, got));
        rc |= expect_close_rel("dequantized da_forward vs q8_0 with f32 activations", da_acts_logits(a), got, n,
                               1e-4, 1e-3);
        da_model_free(&dm);
        da_engine_release(&q);
        da_acts_free(a);
        free(ref);
        free(got);
        da_model_free(&m);
        if (rc) return rc;
    }
    return 0;
}

/* An engine loaded where the level packs Q8_0 (da_engine_pack) against the same file unpacked: the same
 * logits bit for bit with int8 and with float activations (a tied head, whose rows are also the embedding,
 * and an untied one), the same dequantized model, and saved again, the same file byte for byte. */
static int test_packed_engine(void) {
    const int want_packed = da_ops_of(da_exec_default().isa)->q8_0_r16;
    for (int tie = 0; tie < 2; tie++) {
        da_model m;
        CHECK(!make_model(&m, DA_ARCH_DIFF, tie));
        da_engine q;
        da_quantize_types o8 = {DA_QT_Q8_0, -1, 1};
        CHECK(!da_engine_quantize(&q, &m, &o8).code && !da_engine_save_gguf(&q, tpath("p.gguf")).code);
        da_engine_release(&q);
        da_engine *pk = NULL, plain;
        CHECK(!da_engine_load(&pk, tpath("p.gguf")).code && !da_engine_load_gguf(&plain, tpath("p.gguf")).code);
        int packed = 0;
        for (int i = 0; i < pk->n_tensors; i++) packed += pk->t[i].packed;
        CHECK(packed == (want_packed ? 7 * m.cfg.n_layers + 1 : 0)); /* q, k, v, o, w1-w3 a layer; the head */
        CHECK((pk->output->packed != 0) == want_packed && (pk->t[0].packed != 0) == (want_packed && tie));
        enum { T = 20 };
        int tok[T];
        for (int i = 0; i < T; i++) tok[i] = (i * 53 + 7) % 256;
        const size_t n = (size_t)T * m.cfg.vocab_size;
        float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
        for (int act = 0; act < 2; act++) {
            const da_act_mode mode = act ? DA_ACTQ_F32 : DA_ACTQ_Q8;
            CHECK(!session_logits(pk, mode, 0, tok, T, a) && !session_logits(&plain, mode, 0, tok, T, b));
            CHECK(!memcmp(a, b, n * sizeof(float)));
        }
        da_model ma, mb;
        CHECK(!da_engine_to_model(pk, &ma).code && !da_engine_to_model(&plain, &mb).code);
        CHECK(!memcmp(ma.params, mb.params, ma.n_params * sizeof(float)));
        CHECK(!da_engine_save_gguf(pk, tpath("p2.gguf")).code);
        size_t n1 = 0, n2 = 0;
        unsigned char *f1 = th_read_file(tpath("p.gguf"), &n1), *f2 = th_read_file(tpath("p2.gguf"), &n2);
        CHECK(f1 && f2 && n1 == n2 && !memcmp(f1, f2, n1));
        free(f1), free(f2), free(a), free(b);
        da_model_free(&ma), da_model_free(&mb), da_model_free(&m);
        da_engine_free(pk);
        da_engine_release(&plain);
    }
    return 0;
}

/* Token by token through the cache (int8 dots) gives the batched logits. Up
 * to 15 tokens the batch also takes int8 dots: equal to float rounding. From
 * 16 it dequantizes weights and activations into one sgemm: the same products
 * summed in another order, and an activation of a later layer that lands on a
 * rounding boundary can quantize one step differently, so the bound is looser. */
static int decode_matches_batch(int wtype, da_act_mode act, int T, double tol) {
    da_model m;
    CHECK(!make_model(&m, DA_ARCH_DIFF, 0));
    da_engine q;
    da_quantize_types o = {wtype, -1, 1};
    CHECK(!da_engine_quantize(&q, &m, &o).code);
    int tok[32];
    for (int i = 0; i < T; i++) tok[i] = (i * 53 + 5) % 256;
    const int V = q.cfg.vocab_size;
    float *batch = malloc((size_t)T * V * sizeof(float)), *step = malloc((size_t)T * V * sizeof(float));
    CHECK(!session_logits(&q, act, 1, tok, T, batch));
    da_session *s;
    da_session_opts ro = da_session_opts_default();
    ro.act = act;
    ro.kv_int8 = 1;
    ro.max_T = T;
    ro.max_batch = 1;
    CHECK(!da_session_create(&s, &q, &ro).code);
    const float *lg;
    for (int i = 0; i < T; i++) {
        CHECK(!da_session_feed(s, &tok[i], 1, 0, &lg).code);
        memcpy(step + (size_t)i * V, lg, (size_t)V * sizeof(float));
    }
    int over = da_session_feed(s, &tok[0], 1, 0, &lg).code; /* the cache is full */
    da_session_free(s);
    char what[96];
    snprintf(what, sizeof what, "token-by-token vs batched, %d tokens", T);
    int rc = expect_close_rel(what, step, batch, (size_t)T * V, tol, 1e-3);
    free(batch);
    free(step);
    da_engine_release(&q);
    da_model_free(&m);
    CHECK(over);
    return rc;
}

static int test_decode_matches_batch(void) {
    return decode_matches_batch(DA_QT_Q4_0, DA_ACTQ_INT8_DYNAMIC, 12, 1e-5) |
           decode_matches_batch(DA_QT_Q8_0, DA_ACTQ_Q8, 12, 1e-5) |
           decode_matches_batch(DA_QT_Q4_0, DA_ACTQ_INT8_DYNAMIC, 20, 1e-3) |
           decode_matches_batch(DA_QT_Q8_0, DA_ACTQ_Q8, 20, 1e-3);
}

static int saved_model(size_t *n, unsigned char **bytes) {
    da_model m;
    if (make_model(&m, DA_ARCH_DIFF, 0)) return -1;
    da_engine q;
    da_quantize_types o = {DA_QT_Q4_K, DA_QT_Q8_0, 1};
    m.cfg.ffn_hidden = 256;
    int rc = da_engine_quantize(&q, &m, &o).code || da_engine_save_gguf(&q, tpath("h.gguf")).code;
    da_engine_release(&q);
    da_model_free(&m);
    if (rc) return -1;
    *bytes = th_read_file(tpath("h.gguf"), n);
    return *bytes ? 0 : -1;
}

/* The header length (data offset) of a valid GGUF image; 0 if it does not parse. */
static size_t header_bytes(const unsigned char *b, size_t n) {
    da_gguf_file f;
    unsigned char *copy = malloc(n);
    memcpy(copy, b, n);
    if (da_gguf_parse(&f, "full", copy, n).code) return 0;
    const size_t header = f.data_offset;
    da_gguf_close(&f);
    return header;
}

/* Every prefix of a valid file up to the end of its header, and a spread of
 * longer ones, is refused with a message (ASan checks the reads). */
static int test_every_truncation_fails(void) {
    size_t n;
    unsigned char *b;
    CHECK(!saved_model(&n, &b));
    da_gguf_file f;
    const size_t header = header_bytes(b, n);
    CHECK(header > 0);
    for (size_t len = 0; len < n; len += len < header + 64 ? 1 : 997) {
        unsigned char *p = malloc(len ? len : 1);
        memcpy(p, b, len);
        da_status st = da_gguf_parse(&f, "trunc", p, len);
        if (!st.code) {
            fprintf(stderr, "  truncated to %zu of %zu bytes, yet it parsed\n", len, n);
            da_gguf_close(&f);
            free(b);
            return 1;
        }
    }
    /* and through the model loader, which names the file */
    CHECK(!write_file(tpath("t.gguf"), b, n / 2));
    da_engine q;
    da_status st = da_engine_load_gguf(&q, tpath("t.gguf"));
    CHECK(st.code && strstr(st.msg, "t.gguf"));
    free(b);
    return 0;
}

/* Random byte corruptions of the header: each file loads or is refused, never a crash. */
static int test_random_corruption(void) {
    size_t n;
    unsigned char *b;
    CHECK(!saved_model(&n, &b));
    const size_t header = header_bytes(b, n);
    CHECK(header > 0);
    uint64_t r = 12345;
    int refused = 0, trials = 400;
    for (int t = 0; t < trials; t++) {
        unsigned char *p = malloc(n);
        memcpy(p, b, n);
        for (int k = 0; k < 1 + t % 4; k++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            const size_t at = (size_t)(r >> 33) % header;
            const int kind = (int)(r >> 20) % 3;
            p[at] = kind == 0 ? (unsigned char)(r >> 8) : kind == 1 ? 0xFF : 0x00;
        }
        CHECK(!write_file(tpath("c.gguf"), p, n));
        free(p);
        da_engine q;
        da_status st = da_engine_load_gguf(&q, tpath("c.gguf"));
        if (st.code) refused++;
        else {
            /* a load that passes must run */
            da_session *s;
            da_session_opts o = da_session_opts_default();
            o.act = DA_ACTQ_Q8;
            o.max_T = 4;
            if (!da_session_create(&s, &q, &o).code) {
                int tok[4] = {1, 2, 3, 4};
                const float *lg;
                (void)da_session_feed(s, tok, 4, 0, &lg);
                da_session_free(s);
            }
            da_engine_release(&q);
        }
    }
    free(b);
    printf("     %d of %d corrupted files refused\n", refused, trials);
    CHECK(refused > trials / 4);
    return 0;
}

/* A GGUF of another family, or one lacking a key or with a wrong shape, is
 * refused with a message naming what is wrong. */
static int test_wrong_files(void) {
    da_gguf_writer w;
    da_gguf_writer_init(&w);
    da_gguf_add_str(&w, "general.architecture", "falcon");
    da_gguf_add_u32(&w, "falcon.block_count", 2);
    CHECK(!da_gguf_write(&w, tpath("falcon.gguf")).code);
    da_gguf_writer_free(&w);
    da_engine q;
    da_status st = da_engine_load_gguf(&q, tpath("falcon.gguf"));
    CHECK(st.code && strstr(st.msg, "\"falcon\"") && strstr(st.msg, "llama"));
    da_model m;
    st = da_model_load_any(&m, tpath("falcon.gguf"));
    CHECK(st.code && strstr(st.msg, "falcon"));
    /* llama.cpp's layout lacking a hyperparameter: the key is named */
    da_gguf_writer_init(&w);
    da_gguf_add_str(&w, "general.architecture", "llama");
    da_gguf_add_u32(&w, "llama.block_count", 2);
    CHECK(!da_gguf_write(&w, tpath("llama.gguf")).code);
    da_gguf_writer_free(&w);
    st = da_engine_load_gguf(&q, tpath("llama.gguf"));
    CHECK(st.code && strstr(st.msg, "llama.context_length"));
    st = da_model_load_any(&m, tpath("llama.gguf"));
    CHECK(st.code && strstr(st.msg, "llama"));

    /* a diffattn file whose q_proj has the wrong shape */
    da_model src;
    CHECK(!make_model(&src, DA_ARCH_DIFF, 0));
    da_engine good;
    da_quantize_types o = {DA_QT_Q8_0, -1, 1};
    CHECK(!da_engine_quantize(&good, &src, &o).code);
    good.t[2].rows = 32; /* layers.0.attn.q_proj: 32 rows instead of 64 */
    CHECK(!da_engine_save_gguf(&good, tpath("shape.gguf")).code);
    good.t[2].rows = 64;
    st = da_engine_load_gguf(&q, tpath("shape.gguf"));
    CHECK(st.code && strstr(st.msg, "blk.0.attn_q.weight"));
    da_engine_release(&good);
    da_model_free(&src);

    /* not a GGUF at all, and a missing file */
    unsigned char junk[64] = "GGUF\x02\0\0\0";
    CHECK(!write_file(tpath("v2.gguf"), junk, sizeof junk));
    st = da_engine_load_gguf(&q, tpath("v2.gguf"));
    CHECK(st.code && strstr(st.msg, "version 2"));
    st = da_engine_load_gguf(&q, tpath("absent.gguf"));
    CHECK(st.code && strstr(st.msg, "absent.gguf"));
    return 0;
}

/* GGUF files written before llama.cpp's layout (general.architecture
 * "diffattn", diffattn's tensor names; tests/fixtures/legacy, made by
 * tools/make_legacy_gguf.sh with that version) still load and give the
 * logits that version wrote (to q8 rounding). */
static int test_legacy_files_load(void) {
    const char *names[] = {"diff_mha", "softmax_tied", "diff2_mha"};
    for (int i = 0; i < 3; i++) {
        char model[256], ids[256], ref_path[256];
        snprintf(model, sizeof model, "tests/fixtures/legacy/%s.q8_0.gguf", names[i]);
        snprintf(ids, sizeof ids, "tests/fixtures/%s.ids.txt", names[i]);
        snprintf(ref_path, sizeof ref_path, "tests/fixtures/legacy/%s.q8_0.logits.npy", names[i]);
        da_status st = da_eval_write_logits(model, ids, tpath("legacy.npy"), NULL);
        if (st.code) printf("     %s\n", st.msg);
        CHECK(!st.code);
        float *got, *ref;
        int nd_got, nd_ref;
        int64_t sh_got[DA_NPY_MAX_DIMS], sh_ref[DA_NPY_MAX_DIMS];
        CHECK(!da_npy_read_f32(tpath("legacy.npy"), &got, &nd_got, sh_got).code);
        CHECK(!da_npy_read_f32(ref_path, &ref, &nd_ref, sh_ref).code);
        CHECK(nd_got == 2 && nd_ref == 2 && sh_got[0] == sh_ref[0] && sh_got[1] == sh_ref[1]);
        /* within q8 activations' rounding, not bit for bit: the int8 kernels may change between versions */
        int rc = expect_rms_close(names[i], got, ref, (size_t)(sh_ref[0] * sh_ref[1]), 0.03);
        free(got);
        free(ref);
        CHECK(!rc);
    }
    return 0;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/da_test_gguf_%d", (int)getpid());
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmpdir);
    if (system(cmd)) return 1;
    RUN(test_kv_roundtrip);
    RUN(test_model_roundtrip);
    RUN(test_nsa_roundtrip);
    RUN(test_nsa_shared_kv_roundtrip);
    RUN(test_q8_0_logits_close);
    RUN(test_packed_engine);
    RUN(test_decode_matches_batch);
    RUN(test_every_truncation_fails);
    RUN(test_random_corruption);
    RUN(test_wrong_files);
    RUN(test_legacy_files_load);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) return 1;
    TH_SUMMARY();
}
