/* Settings live in each model's da_exec, not in the process: two models with
 * different contexts (kernel level, bf16 matmuls, profiling) train at the
 * same time in two threads, step for step, and each gets bit for bit what it
 * gets when it runs alone. */
#include <pthread.h>

#include "diffattn.h"
#include "harness.h"

enum { B = 4, T = 64, STEPS = 3 };

typedef struct {
    da_exec exec;
    double prof[DA_PROF_N];
    float loss[STEPS];
    float *params; /* after the last step */
    size_t n_params;
    pthread_barrier_t *barrier; /* NULL: alone */
    int failed;
} run;

static void *train(void *p) {
    run *r = p;
    da_config c;
    da_config_default(&c);
    c.dim = 128; /* 256 x 128 x 128 reaches the bf16 GEMM's size threshold */
    c.n_layers = 2;
    c.n_heads = 2;
    c.n_kv_heads = 2;
    c.vocab_size = 96;
    c.ffn_hidden = 256;
    c.max_seq_len = T;
    da_model m;
    da_adamw opt = {0};
    da_acts *a = NULL;
    int tokens[B * T], targets[B * T];
    da_rng rng;
    da_rng_seed(&rng, 5);
    for (int i = 0; i < B * T; i++) {
        tokens[i] = (int)(da_rng_next(&rng) % 96);
        targets[i] = (int)(da_rng_next(&rng) % 96);
    }
    r->failed = da_model_create(&m, &c).code != 0;
    if (r->failed) return NULL;
    da_model_init(&m, 3);
    r->failed = da_model_alloc_grads(&m).code || da_adamw_create(&opt, m.n_params).code ||
                da_acts_create_ex(&a, &c, B, T, DA_ATTN_FLASH, &r->exec).code;
    opt.isa = r->exec.isa;
    da_adamw_config ac = {0.9f, 0.95f, 1e-8f, 0.1f};
    for (int s = 0; s < STEPS && !r->failed; s++) {
        if (r->barrier) pthread_barrier_wait(r->barrier); /* both models run each step at once */
        da_model_zero_grads(&m);
        r->loss[s] = da_forward(&m, a, tokens, targets, B, T);
        da_backward(&m, a);
        da_adamw_step(&opt, &m, &ac, 1e-3f);
    }
    if (!r->failed && (r->params = malloc(m.n_params * sizeof(float)))) {
        memcpy(r->params, m.params, m.n_params * sizeof(float));
        r->n_params = m.n_params;
    }
    da_acts_free(a);
    da_adamw_free(&opt);
    da_model_free(&m);
    return NULL;
}

static int same(const run *x, const run *y) {
    return x->params && y->params && x->n_params == y->n_params && !memcmp(x->loss, y->loss, sizeof x->loss) &&
           !memcmp(x->params, y->params, x->n_params * sizeof(float));
}

static int test_two_contexts_in_two_threads(void) {
    /* A: the best level, bf16 matmuls where the CPU has them, profiled;
     * B: the scalar kernels, fp32, no profile. */
    run alone[2] = {{.exec = da_exec_default()}, {.exec = da_exec_default()}};
    alone[0].exec.bf16_matmul = alone[0].exec.isa >= DA_ISA_AVX512_BF16;
    alone[0].exec.prof_s = alone[0].prof;
    alone[1].exec.isa = DA_ISA_SCALAR;
    run together[2] = {alone[0], alone[1]};
    together[0].exec.prof_s = together[0].prof;
    for (int i = 0; i < 2; i++) train(&alone[i]);
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, 2);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        together[i].barrier = &barrier;
        CHECK(pthread_create(&th[i], NULL, train, &together[i]) == 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    printf("     A (%s%s, profiled): loss %.6f -> %.6f   B (scalar): loss %.6f -> %.6f\n",
           da_isa_name(alone[0].exec.isa), alone[0].exec.bf16_matmul ? ", bf16" : "", alone[0].loss[0],
           alone[0].loss[STEPS - 1], alone[1].loss[0], alone[1].loss[STEPS - 1]);
    int fail = alone[0].failed || alone[1].failed || together[0].failed || together[1].failed;
    fail |= !same(&alone[0], &together[0]) || !same(&alone[1], &together[1]);
    /* the profile is A's own: every step's matmuls were charged to it */
    fail |= !(together[0].prof[DA_PROF_MATMUL_FWD] > 0 && together[0].prof[DA_PROF_ATTN_BWD] > 0);
    /* and the two contexts compute differently, so a leak from one to the
     * other would show (with only the scalar level, e.g. DIFFATTN_ISA=scalar, they cannot) */
    if (alone[0].exec.isa > DA_ISA_SCALAR && same(&alone[0], &alone[1])) {
        fprintf(stderr, "  the two contexts gave identical results: the test cannot see a leak\n");
        fail = 1;
    }
    for (int i = 0; i < 2; i++) free(alone[i].params), free(together[i].params);
    return fail;
}

int main(void) {
    RUN(test_two_contexts_in_two_threads);
    TH_SUMMARY();
}
