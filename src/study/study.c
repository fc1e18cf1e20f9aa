/* Running a study's runs (see study.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "study/study.h"
#include "io/atomic_file.h"
#include "io/run_lock.h"
#include "diffattn/formats.h"

typedef struct {
    char magic[8];
    uint32_t size, n_floats;
    char key[STUDY_KEY_BYTES];
} result_header;
_Static_assert(sizeof(result_header) == 16 + STUDY_KEY_BYTES, "result_header layout changed");

da_status study_result_save(const char *path, const char *magic, const char *key, const void *body, size_t size,
                            const float *floats, uint32_t n_floats) {
    result_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, magic, 8);
    h.size = (uint32_t)size, h.n_floats = n_floats;
    snprintf(h.key, sizeof h.key, "%s", key);
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    if (fwrite(&h, sizeof h, 1, af.fp) != 1 || fwrite(body, size, 1, af.fp) != 1 ||
        (n_floats && fwrite(floats, sizeof(float), n_floats, af.fp) != n_floats))
        return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

int study_result_load(const char *path, const char *magic, const char *key, void *body, size_t size, float **floats,
                      uint32_t *n_floats, uint32_t max_floats) {
    result_header h;
    if (floats) *floats = NULL;
    FILE *fp = da_fopen_regular(path, NULL);
    if (!fp) return -1;
    int ok = fread(&h, sizeof h, 1, fp) == 1 && !memcmp(h.magic, magic, 8) && h.size == size &&
             !strncmp(h.key, key, sizeof h.key) && h.n_floats <= max_floats && fread(body, size, 1, fp) == 1;
    float *f = ok && h.n_floats ? malloc(h.n_floats * sizeof(float)) : NULL;
    if (ok && h.n_floats) ok = f && fread(f, sizeof(float), h.n_floats, fp) == h.n_floats;
    ok = ok && fgetc(fp) == EOF;
    fclose(fp);
    if (!ok || !floats) free(f), f = NULL;
    if (floats) *floats = f;
    if (n_floats) *n_floats = ok ? h.n_floats : 0;
    return ok ? 0 : -1;
}

static da_status interrupted(const char *why) {
    da_status st = da_errorf("%s; the finished runs are kept: the same command with --resume continues", why);
    st.code = DA_INTERRUPTED;
    return st;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

void study_run_dir(char *buf, size_t n, const char *out_dir, int cell, const char *name, int seed) {
    if (cell >= 0) snprintf(buf, n, "%s/runs/cell%d_%s_seed%d", out_dir, cell, name, seed);
    else snprintf(buf, n, "%s/runs/%s_seed%d", out_dir, name, seed);
}

/* The runs to do, seed by seed, and their total cost. */
static int pending_runs(const da_study *s, int *pending, double *total) {
    const int per_seed = s->n_cells * s->n_archs, n_runs = per_seed * s->seeds;
    int n = 0;
    *total = 0;
    for (int i = 0; i < n_runs; i++) {
        const int seed = i / per_seed, rest = i % per_seed;
        const int k = (rest / s->n_archs * s->seeds + seed) * s->n_archs + rest % s->n_archs;
        if (!s->done(s->ctx, k)) pending[n++] = k, *total += s->cost(s->ctx, k);
    }
    return n;
}

static da_status run_here(const da_study *s, const da_study_opts *o, const int *pending, int n, double total) {
    const double t0 = da_now_s();
    double spent = 0;
    for (int i = 0; i < n; i++) {
        const int k = pending[i];
        if (o->stop && *o->stop) return interrupted("interrupted");
        if (!o->quiet) {
            char name[320];
            s->name(s->ctx, k, name, sizeof name);
            const double el = da_now_s() - t0;
            if (spent > 0) fprintf(stderr, "compare: [%d/%d] %s (ETA %.0f s)\n", i + 1, n, name, el / spent * (total - spent));
            else fprintf(stderr, "compare: [%d/%d] %s\n", i + 1, n, name);
        }
        da_status st = s->run(s->ctx, k);
        if (st.code == DA_INTERRUPTED) return interrupted(st.msg);
        if (st.code) return st;
        spent += s->cost(s->ctx, k);
    }
    return da_ok();
}

/* A worker: this program again with --run-index k, one thread. It dies with
 * the study (PR_SET_PDEATHSIG), also when the study died between fork and
 * prctl. */
static pid_t start_worker(char **argv, pid_t parent) {
    const pid_t p = fork();
    if (p == 0) {
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent) _exit(127);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return p;
}

static da_status run_workers(const da_study *s, const da_study_opts *o, const int *pending, int n, double total) {
    pid_t *pid_of = calloc((size_t)n + 1, sizeof(pid_t));
    char **child = calloc((size_t)o->argc + 8, sizeof(char *));
    if (!pid_of || !child) {
        free(pid_of), free(child);
        return da_errorf("out of memory for %d runs", n);
    }
    char idx[32];
    child[0] = "diffattn";
    for (int i = 0; i < o->argc; i++) child[1 + i] = o->argv[i];
    child[o->argc + 1] = "--run-index", child[o->argc + 2] = idx, child[o->argc + 3] = "--quiet";
    child[o->argc + 4] = "--threads", child[o->argc + 5] = "1", child[o->argc + 6] = NULL;
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    if (!o->quiet) fprintf(stderr, "compare: %d runs to do, %d processes of one thread\n", n, o->jobs);
    const double t0 = da_now_s();
    const pid_t self = getpid();
    double spent = 0;
    int running = 0, next = 0, finished = 0;
    da_status st = da_ok();
    while (finished < n) {
        while (!st.code && running < o->jobs && next < n && !(o->stop && *o->stop)) {
            snprintf(idx, sizeof idx, "%d", pending[next]);
            const pid_t p = start_worker(child, self);
            if (p < 0) {
                st = da_errorf("fork: cannot start a run process: %s", strerror(errno));
                break;
            }
            pid_of[next++] = p, running++;
        }
        if (!running) break;
        int status;
        const pid_t p = wait(&status);
        if (p < 0) break;
        int j = 0;
        while (j < next && pid_of[j] != p) j++;
        if (j == next) continue;
        running--, finished++;
        char name[320];
        s->name(s->ctx, pending[j], name, sizeof name);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            if (!st.code)
                st = da_errorf("run %d (%s) failed (exit status %d); the finished runs are kept: --resume continues",
                               pending[j], name, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            if (o->stop && *o->stop) st.code = DA_INTERRUPTED;
            continue;
        }
        spent += s->cost(s->ctx, pending[j]);
        if (!o->quiet) {
            const double el = da_now_s() - t0;
            fprintf(stderr, "compare: [%d/%d] %s  done at %.0f s, ETA %.0f s\n", finished, n, name, el,
                    el / spent * (total - spent));
        }
    }
    if (!st.code && o->stop && *o->stop) st = interrupted("interrupted");
    free(pid_of), free(child);
    return st;
}

static da_status study_locked(const da_study *s, const da_study_opts *o) {
    static const char *const existing[] = {"report.json", "runs"};
    char runs[4200];
    da_status st;
    snprintf(runs, sizeof runs, "%s/runs", o->out_dir);
    if (!o->force && !o->resume && (st = da_refuse_existing(o->out_dir, "compare", existing, 2)).code) return st;
    if (o->force && nftw(runs, remove_entry, 16, FTW_DEPTH | FTW_PHYS) && errno != ENOENT)
        return da_errorf("%s: cannot remove the runs of the study it replaces: %s", runs, strerror(errno));
    if ((st = da_make_dirs(runs)).code) return st;
    if (s->prepare && (st = s->prepare(s->ctx)).code) return st;
    const int n_runs = s->n_cells * s->n_archs * s->seeds;
    int *pending = malloc((size_t)n_runs * sizeof(int) + 1);
    if (!pending) return da_errorf("out of memory for %d runs", n_runs);
    double total;
    const int n = pending_runs(s, pending, &total);
    st = o->jobs > 1 ? run_workers(s, o, pending, n, total) : run_here(s, o, pending, n, total);
    free(pending);
    return st;
}

da_status da_study_run(const da_study *s, const da_study_opts *o) {
    if (o->resume && o->force) return da_errorf("--resume and --force: choose one (continue the study, or replace it)");
    if (o->jobs < 1 || o->jobs > 1024) return da_errorf("--jobs: expected 1..1024 processes");
    int fd = -1;
    da_status st = da_make_dirs(o->out_dir);
    if (!st.code) st = da_run_lock(o->out_dir, &fd);
    if (!st.code) st = study_locked(s, o);
    da_run_unlock(fd);
    return st;
}
