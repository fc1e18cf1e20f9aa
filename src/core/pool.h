/* A team of persistent threads for the many short parallel steps of
 * decoding (a matrix-vector product takes tens of microseconds; an OpenMP
 * region with sleeping threads costs as much to wake). da_pool_run hands
 * one function to every thread of the team, the caller included, and
 * returns when all have finished: one store to start, one counter to join.
 *
 * Waiting: a thread spins for a while (spin_us) on the shared counters, then
 * sleeps on a condition variable. Spinning makes back-to-back steps cheap on
 * an idle machine; sleeping keeps the team from holding a core that another
 * process needs. Work inside a step is best split dynamically
 * (da_pool_chunk), so that when one thread is descheduled the others take
 * its share. */
#ifndef DA_CORE_POOL_H
#define DA_CORE_POOL_H

typedef struct da_pool da_pool;

/* fn(arg, ith, nth) runs once on each of the nth threads, ith = 0 on the caller. */
typedef void (*da_pool_fn)(void *arg, int ith, int nth);

/* A team of n_threads (the caller and n_threads - 1 workers); NULL when
 * threads cannot be made (the caller then runs fn alone). spin_us: how long
 * a waiting thread spins before it sleeps. */
da_pool *da_pool_create(int n_threads, int spin_us);
void da_pool_free(da_pool *p);
/* Threads of the team; 1 for NULL. */
int da_pool_threads(const da_pool *p);
/* Runs fn on every thread (on the caller alone when p is NULL) and waits for all. */
void da_pool_run(da_pool *p, da_pool_fn fn, void *arg);

/* Dynamic split of n items into chunks of `chunk`: each call takes the next
 * chunk, [*lo, *hi), returning 0 when none is left. *next starts at 0. */
int da_pool_chunk(_Atomic int *next, int n, int chunk, int *lo, int *hi);

#endif
