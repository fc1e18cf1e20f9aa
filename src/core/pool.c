/* The thread team of pool.h. The caller opens a step (its function, then
 * one store of `state`: the step's number, times 2, plus 1 for open), runs
 * it itself, then closes it (clears the open bit) and waits only for the
 * workers inside it. A worker enters by counting itself in `active` and then
 * checking that the state is still the open step it saw; a worker that
 * comes late (descheduled on a busy machine) finds it closed and leaves, so
 * a step never waits for a thread that has not started it: the caller and
 * the threads that ran take all of its work (da_pool_chunk). Every flag that
 * one side sets before the other side's check is sequentially consistent
 * (entering: active++ then read state; closing: write state then read
 * active), so one side always sees the other. Sleeping is announced the same
 * way (sleepers, caller_asleep) and signalled under the lock the sleeper
 * holds until it waits, so no wake-up is lost. */
#include "core/pool.h"
#include "core/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

struct da_pool {
    int n_threads;
    long spin_ns;
    pthread_t *threads;
    pthread_mutex_t lock;
    pthread_cond_t start_cv, done_cv;
    atomic_uint state;      /* 2 * step number + 1 while the step takes workers */
    atomic_int active;      /* workers inside the current step */
    atomic_int sleepers;    /* workers asleep on start_cv */
    atomic_int caller_asleep;
    atomic_int quit;
    da_pool_fn fn; /* the current step, written before it opens */
    void *arg;
};

typedef struct {
    da_pool *p;
    int ith;
} worker_arg;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins until done(p, v) or spin_ns have passed; returns done's last value. */
static int spin_until(const da_pool *p, int (*done)(const da_pool *, unsigned), unsigned v) {
    long t0 = 0;
    for (long i = 0;; i++) {
        if (done(p, v)) return 1;
        cpu_relax();
        if ((i & 63) == 63) {
            long t = (long)da_now_ns();
            if (!t0) t0 = t;
            else if (t - t0 > p->spin_ns) return 0;
        }
    }
}

/* a step after `seen` has opened (or the team is told to quit) */
static int gen_moved(const da_pool *p, unsigned seen) {
    return atomic_load(&((da_pool *)p)->state) >> 1 != seen || atomic_load(&((da_pool *)p)->quit);
}
static int none_active(const da_pool *p, unsigned unused) {
    (void)unused;
    return atomic_load(&((da_pool *)p)->active) == 0;
}

static void *worker_main(void *varg) {
    worker_arg *wa = varg;
    da_pool *p = wa->p;
    const int ith = wa->ith;
    free(wa);
    unsigned seen = 0;
    for (;;) {
        if (!spin_until(p, gen_moved, seen)) {
            pthread_mutex_lock(&p->lock);
            atomic_fetch_add(&p->sleepers, 1);
            while (!gen_moved(p, seen)) pthread_cond_wait(&p->start_cv, &p->lock);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->lock);
        }
        if (atomic_load(&p->quit)) return NULL;
        const unsigned s0 = atomic_load(&p->state);
        seen = s0 >> 1;
        atomic_fetch_add(&p->active, 1);
        if ((s0 & 1u) && atomic_load(&p->state) == s0) p->fn(p->arg, ith, p->n_threads); /* still open: in it */
        if (atomic_fetch_sub(&p->active, 1) == 1 && atomic_load(&p->caller_asleep)) {
            pthread_mutex_lock(&p->lock);
            pthread_cond_signal(&p->done_cv);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

da_pool *da_pool_create(int n_threads, int spin_us) {
    if (n_threads < 2) return NULL;
    da_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = n_threads;
    p->spin_ns = (long)spin_us * 1000L;
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->start_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    if (!p->threads) {
        da_pool_free(p);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        worker_arg *wa = malloc(sizeof *wa);
        if (wa) *wa = (worker_arg){p, i};
        if (!wa || pthread_create(&p->threads[i], NULL, worker_main, wa)) {
            free(wa);
            p->n_threads = i; /* the workers made so far are joined */
            da_pool_free(p);
            return NULL;
        }
    }
    return p;
}

void da_pool_free(da_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->start_cv);
    pthread_mutex_unlock(&p->lock);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->threads[i], NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->start_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->threads);
    free(p);
}

int da_pool_threads(const da_pool *p) { return p ? p->n_threads : 1; }

void da_pool_run(da_pool *p, da_pool_fn fn, void *arg) {
    if (!p) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    const unsigned step = (atomic_load(&p->state) >> 1) + 1;
    atomic_store(&p->state, step << 1 | 1u);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->lock);
        pthread_cond_broadcast(&p->start_cv);
        pthread_mutex_unlock(&p->lock);
    }
    fn(arg, 0, p->n_threads);
    atomic_store(&p->state, step << 1);
    if (!spin_until(p, none_active, 0)) {
        pthread_mutex_lock(&p->lock);
        atomic_store(&p->caller_asleep, 1);
        while (atomic_load(&p->active) > 0) pthread_cond_wait(&p->done_cv, &p->lock);
        atomic_store(&p->caller_asleep, 0);
        pthread_mutex_unlock(&p->lock);
    }
}

int da_pool_chunk(_Atomic int *next, int n, int chunk, int *lo, int *hi) {
    const int i = atomic_fetch_add(next, chunk);
    if (i >= n) return 0;
    *lo = i;
    *hi = n - i < chunk ? n : i + chunk;
    return 1;
}
