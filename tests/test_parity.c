/* Parity with the PyTorch reference (tools/reference.py): logits and every
 * parameter gradient of the committed fixtures, tests/fixtures/NAME.*. */
#include "data/ids_file.h"
#include "diffattn.h"
#include "harness.h"
#include "io/npy.h"
#include "io/safetensors.h"

static int check_config_kernel(const char *name, da_attn_kernel kernel) {
    char path[256];
    da_model m;
    snprintf(path, sizeof path, "tests/fixtures/%s.model.safetensors", name);
    da_status st = da_model_load(&m, path);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    int *ids, T;
    snprintf(path, sizeof path, "tests/fixtures/%s.ids.txt", name);
    st = da_ids_read(path, m.cfg.vocab_size, &ids, &T);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    int fail = 0;
    da_acts *a;
    CHECK(!da_acts_create_ex(&a, &m.cfg, 1, T, kernel, NULL).code);

    /* logits over all T ids */
    float *want;
    int ndim;
    int64_t shape[8];
    snprintf(path, sizeof path, "tests/fixtures/%s.logits.npy", name);
    CHECK(!da_npy_read_f32(path, &want, &ndim, shape).code);
    CHECK(ndim == 2 && shape[0] == T && shape[1] == m.cfg.vocab_size);
    da_forward(&m, a, ids, NULL, 1, T);
    char what[160];
    snprintf(what, sizeof what, "%s logits", name);
    fail |= expect_close_rel(what, da_acts_logits(a), want, (size_t)T * m.cfg.vocab_size, 1e-4, 0);
    double logit_err = max_rel_error(da_acts_logits(a), want, (size_t)T * m.cfg.vocab_size, 0), grad_err = 0;
    free(want);

    /* loss and gradients of predicting ids[1..T-1] from ids[0..T-2] */
    da_st_file g;
    snprintf(path, sizeof path, "tests/fixtures/%s.grads.safetensors", name);
    st = da_st_open(&g, path);
    if (st.code) { fprintf(stderr, "  %s\n", st.msg); return 1; }
    CHECK(!da_model_alloc_grads(&m).code);
    da_model_zero_grads(&m);
    float loss = da_forward(&m, a, ids, ids + 1, 1, T - 1);
    da_backward(&m, a);
    float ref_loss;
    const da_st_tensor *lt = da_st_find(&g, "loss");
    CHECK(lt && !da_st_read_f32(&g, lt, &ref_loss).code);
    if (fabsf(loss - ref_loss) > 1e-4f * fabsf(ref_loss)) {
        fprintf(stderr, "  %s loss %.7f, reference %.7f\n", name, loss, ref_loss);
        fail = 1;
    }
    for (int i = 0; i < m.n_tensors; i++) {
        const da_tensor *t = &m.tensors[i];
        const da_st_tensor *gt = da_st_find(&g, t->name);
        if (!gt || gt->numel != t->numel) {
            fprintf(stderr, "  %s: reference lacks gradient %s\n", name, t->name);
            fail = 1;
            continue;
        }
        float *ref = malloc(t->numel * sizeof(float));
        CHECK(!da_st_read_f32(&g, gt, ref).code);
        snprintf(what, sizeof what, "%s grad %s", name, t->name);
        /* NSA's pe_k shifts every compressed logit of a query alike: its gradient is exactly 0, and float32
         * leaves rounding noise (~1e-8) that only an absolute floor can judge */
        const double floor = strstr(t->name, ".cmp_pe_k") ? 1e-4 : 0;
        fail |= expect_close_rel(what, m.grads + t->offset, ref, t->numel, 1e-3, floor);
        double e = max_rel_error(m.grads + t->offset, ref, t->numel, floor);
        if (e > grad_err) grad_err = e;
        free(ref);
    }
    printf("     %s (%s): loss %.6f (reference %.6f), logits rel err %.2e, worst grad rel err %.2e\n", name,
           kernel == DA_ATTN_FLASH ? "flash" : "reference", loss, ref_loss, logit_err, grad_err);
    da_st_close(&g);
    da_acts_free(a);
    free(ids);
    da_model_free(&m);
    return fail;
}

static int check_config(const char *name) {
    return check_config_kernel(name, DA_ATTN_FLASH) | check_config_kernel(name, DA_ATTN_REFERENCE);
}

static int test_diff_mha(void) { return check_config("diff_mha"); }
static int test_diff_gqa(void) { return check_config("diff_gqa"); }
static int test_diff_gqa_h4kv2(void) { return check_config("diff_gqa_h4kv2"); }
static int test_softmax_untied(void) { return check_config("softmax_untied"); }
static int test_softmax_tied(void) { return check_config("softmax_tied"); }
static int test_softmax_gqa_h4kv2(void) { return check_config("softmax_gqa_h4kv2"); }
static int test_diff2_mha(void) { return check_config("diff2_mha"); }
static int test_diff2_gqa_rep2(void) { return check_config("diff2_gqa_rep2"); }
static int test_diff2_gqa_rep4(void) { return check_config("diff2_gqa_rep4"); }
static int test_diff2_tied(void) { return check_config("diff2_tied"); }
/* sliding window 37 over 200 ids, the PyTorch reference masking keys before t-36 */
static int test_diff_window(void) { return check_config("diff_window"); }
static int test_diff2_window(void) { return check_config("diff2_window"); }
static int test_softmax_window(void) { return check_config("softmax_window"); }
/* the model options of the paper's Table 6 ablations */
static int test_diff_head_norm_off(void) { return check_config("diff_head_norm_off"); }
static int test_diff_lambda_init_08(void) { return check_config("diff_lambda_init_08"); }
static int test_diff_lambda_init_05(void) { return check_config("diff_lambda_init_05"); }
static int test_diff_off_lambda_05(void) { return check_config("diff_off_lambda_05"); }
static int test_softmax_head_norm_on(void) { return check_config("softmax_head_norm_on"); }
/* mid-ramp (--lambda-ramp): the second map weighs (1 - lambda_hold) lambda; convert's preserve shape (an
 * explicit head_dim, the head norm off, held back); softmax with an explicit head_dim */
static int test_diff_hold_06(void) { return check_config("diff_hold_06"); }
static int test_diff2_hold_03(void) { return check_config("diff2_hold_03"); }
static int test_diff_head_dim_hold(void) { return check_config("diff_head_dim_hold"); }
static int test_softmax_head_dim(void) { return check_config("softmax_head_dim"); }
/* NSA: n_rep 1, 2 and 4, T < l, and one K/V projection for the three branches */
static int test_nsa_mha(void) { return check_config("nsa_mha"); }
static int test_nsa_gqa_rep2(void) { return check_config("nsa_gqa_rep2"); }
static int test_nsa_gqa_rep4(void) { return check_config("nsa_gqa_rep4"); }
static int test_nsa_short(void) { return check_config("nsa_short"); }
static int test_nsa_shared_kv(void) { return check_config("nsa_shared_kv"); }
/* MoBA: n_rep 1 and 2 with T not a multiple of B, and T < B k */
static int test_moba_mha(void) { return check_config("moba_mha"); }
static int test_moba_gqa_rep2(void) { return check_config("moba_gqa_rep2"); }
static int test_moba_short(void) { return check_config("moba_short"); }

int main(void) {
    RUN(test_diff_mha);
    RUN(test_diff_gqa);
    RUN(test_diff_gqa_h4kv2);
    RUN(test_softmax_untied);
    RUN(test_softmax_tied);
    RUN(test_softmax_gqa_h4kv2);
    RUN(test_diff2_mha);
    RUN(test_diff2_gqa_rep2);
    RUN(test_diff2_gqa_rep4);
    RUN(test_diff2_tied);
    RUN(test_diff_window);
    RUN(test_diff2_window);
    RUN(test_softmax_window);
    RUN(test_diff_head_norm_off);
    RUN(test_diff_lambda_init_08);
    RUN(test_diff_lambda_init_05);
    RUN(test_diff_off_lambda_05);
    RUN(test_softmax_head_norm_on);
    RUN(test_diff_hold_06);
    RUN(test_diff2_hold_03);
    RUN(test_diff_head_dim_hold);
    RUN(test_softmax_head_dim);
    RUN(test_nsa_mha);
    RUN(test_nsa_gqa_rep2);
    RUN(test_nsa_gqa_rep4);
    RUN(test_nsa_short);
    RUN(test_nsa_shared_kv);
    RUN(test_moba_mha);
    RUN(test_moba_gqa_rep2);
    RUN(test_moba_short);
    TH_SUMMARY();
}
