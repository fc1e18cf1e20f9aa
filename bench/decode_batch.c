/* diffattn serve's decoding step without the server: P sessions advanced
 * together by da_session_decode_batch, as its scheduler does, for P = 1, 2,
 * 4 and 8. Each session starts from a one-token prompt and decodes STEPS
 * greedy tokens; per P: the wall time a step, total tokens/s, the ratio to
 * one session, and the process's user CPU time a token (both threads: less
 * noisy than the wall clock on a shared machine). Built and run by
 * bench/decode_batch.sh.
 *
 *   decode_batch MODEL [STEPS] [ROUNDS] [P]     (the best of ROUNDS per P; P: that count only)
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include "diffattn.h"

static double wall_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double user_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) b = x[i] > x[b] ? i : b;
    return b;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: decode_batch MODEL [STEPS] [ROUNDS] [P]\n");
        return 2;
    }
    const int steps = argc > 2 ? atoi(argv[2]) : 64, rounds = argc > 3 ? atoi(argv[3]) : 2;
    const int only = argc > 4 ? atoi(argv[4]) : 0;
    da_engine *e = NULL;
    da_status st = da_engine_load(&e, argv[1]);
    if (st.code) {
        fprintf(stderr, "decode_batch: %s\n", st.msg);
        return 1;
    }
    const int V = da_engine_config(e)->vocab_size;
    enum { PMAX = 8 };
    da_session_opts o = da_session_opts_default();
    o.max_T = steps + 8;
    o.max_batch = 1;
    da_session *ss[PMAX], *w = NULL;
    for (int i = 0; i < PMAX; i++)
        if (da_session_create(&ss[i], e, &o).code) return 1;
    o.max_T = o.max_batch = PMAX;
    if (da_session_create(&w, e, &o).code) return 1;
    float *logits = malloc(sizeof(float) * PMAX * V);
    double base = 0;
    printf("%6s %10s %10s %8s %14s\n", "slots", "ms/step", "tokens/s", "x 1", "user ms/token");
    const int Ps[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        const int P = Ps[k];
        if (only && P != only) continue;
        double best = 1e30, best_user = 1e30;
        for (int r = 0; r < rounds; r++) {
            int toks[PMAX];
            for (int i = 0; i < P; i++) {
                da_session_reset(ss[i]);
                const int prompt = 11 + i;
                const float *l = NULL;
                if (da_session_feed(ss[i], &prompt, 1, 0, &l).code) return 1;
                toks[i] = argmax(l, V);
            }
            const double t0 = wall_s(), u0 = user_s();
            for (int s = 0; s < steps; s++) {
                st = da_session_decode_batch(w, ss, P, toks, logits);
                if (st.code) {
                    fprintf(stderr, "decode_batch: %s\n", st.msg);
                    return 1;
                }
                for (int i = 0; i < P; i++) toks[i] = argmax(logits + (size_t)i * V, V);
            }
            const double dt = wall_s() - t0, du = user_s() - u0;
            best = dt < best ? dt : best;
            best_user = du < best_user ? du : best_user;
        }
        const double tps = (double)P * steps / best;
        if (!base) base = tps;
        printf("%6d %10.2f %10.1f %8.2f %14.2f\n", P, best * 1e3 / steps, tps, tps / base,
               best_user * 1e3 / ((double)P * steps));
    }
    for (int i = 0; i < PMAX; i++) da_session_free(ss[i]);
    da_session_free(w);
    da_engine_free(e);
    free(logits);
    return 0;
}
