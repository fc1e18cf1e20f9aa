/* Atomic file replacement (see atomic_file.h). */
#include "io/atomic_file.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void da_write_faults_as_errors(void) {
    struct sigaction old;
    if (sigaction(SIGXFSZ, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
        signal(SIGXFSZ, SIG_IGN);
}

/* Directory part of path: "." when there is none, "/" for a file in the root. */
static void dir_of(const char *path, char *dir, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, cap, ".");
    } else if (slash == path) {
        snprintf(dir, cap, "/");
    } else {
        size_t n = (size_t)(slash - path);
        if (n >= cap) n = cap - 1;
        memcpy(dir, path, n);
        dir[n] = 0;
    }
}

void da_remove_dead_temporaries(const char *dir, const char *prefix, int exact) {
    const size_t np = strlen(prefix);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *name = e->d_name, *tmp = NULL;
        if (strncmp(name, prefix, np)) continue;
        for (const char *p = strstr(name + np, ".tmp."); p; p = strstr(p + 1, ".tmp.")) tmp = p; /* the last */
        if (!tmp || (exact && tmp != name + np)) continue;
        const char *digits = tmp + 5;
        char *end;
        errno = 0;
        long pid = strtol(digits, &end, 10);
        if (errno || end == digits || *end || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char stale[8192];
        snprintf(stale, sizeof stale, "%s/%s", dir, name);
        unlink(stale);
    }
    closedir(d);
}

/* path's own temporaries (path.tmp.<pid>) only, so no other program's files
 * are touched. */
static void remove_stale_temporaries(const char *path) {
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    const char *slash = strrchr(path, '/');
    da_remove_dead_temporaries(dir, slash ? slash + 1 : path, 1);
}

static da_status write_error(const char *path, const char *what, int e) {
    return da_errorf("%s: %s: %s%s; the previous file, if any, is unchanged", path, what, strerror(e),
                     e == ENOSPC || e == EFBIG || e == EDQUOT ? " (disk full, quota or file size limit)" : "");
}

da_status da_atomic_fail(da_atomic_file *af, int e) {
    da_atomic_abort(af);
    return write_error(af->path, "write failed", e ? e : EIO);
}

da_status da_atomic_open(da_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    da_write_faults_as_errors();
    if (!path || !path[0]) return da_errorf("atomic write: empty output path");
    size_t n = strlen(path);
    if (n >= sizeof af->path) return da_errorf("%.200s...: output path is too long", path);
    int w = snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", path, (long)getpid());
    if (w < 0 || (size_t)w >= sizeof af->tmp) {
        af->tmp[0] = 0;
        return da_errorf("%.200s...: output path is too long", path);
    }
    memcpy(af->path, path, n + 1);
    remove_stale_temporaries(path);

    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        int e = errno;
        af->tmp[0] = 0;
        return da_errorf("%s: cannot create temporary file for writing: %s", path, strerror(e));
    }
    /* Keep the permissions of a file being replaced. */
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) (void)fchmod(fd, st.st_mode & 07777);

    af->fp = fdopen(fd, "wb");
    if (!af->fp) {
        int e = errno;
        close(fd);
        unlink(af->tmp);
        af->tmp[0] = 0;
        return da_errorf("%s: cannot open temporary file for writing: %s", path, strerror(e));
    }
    return da_ok();
}

da_status da_atomic_commit(da_atomic_file *af) {
    if (!af->fp) {
        da_atomic_abort(af);
        return da_errorf("%s: atomic commit of a file that is not open", af->path);
    }
    FILE *fp = af->fp;
    const char *what = NULL;
    int e = 0;
    if (ferror(fp)) {
        what = "write failed";
        e = errno ? errno : EIO;
    } else if (fflush(fp) != 0) {
        what = "write failed";
        e = errno;
    } else if (fsync(fileno(fp)) != 0) {
        what = "fsync failed";
        e = errno;
    }
    af->fp = NULL;
    if (fclose(fp) != 0 && !what) {
        what = "close failed";
        e = errno;
    }
    if (!what && rename(af->tmp, af->path) != 0) {
        what = "cannot rename the temporary file over it";
        e = errno;
    }
    if (what) {
        unlink(af->tmp);
        af->tmp[0] = 0;
        return write_error(af->path, what, e);
    }
    af->tmp[0] = 0;

    /* Make the rename itself durable. Some file systems cannot fsync a
     * directory (EINVAL); that is not an error of ours. */
    char dir[4096];
    dir_of(af->path, dir, sizeof dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return da_errorf("%s: written, but cannot open its directory to sync it: %s", af->path, strerror(errno));
    int rc = fsync(dfd);
    e = errno;
    close(dfd);
    if (rc != 0 && e != EINVAL && e != EROFS)
        return da_errorf("%s: written, but syncing its directory failed: %s", af->path, strerror(e));
    return da_ok();
}

void da_atomic_abort(da_atomic_file *af) {
    if (af->fp) {
        fclose(af->fp);
        af->fp = NULL;
    }
    if (af->tmp[0]) {
        unlink(af->tmp);
        af->tmp[0] = 0;
    }
}

da_status da_make_dirs(const char *dir) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST) return da_errorf("%s: cannot create folder: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) && errno != EEXIST) return da_errorf("%s: cannot create folder: %s", tmp, strerror(errno));
    return da_ok();
}


da_status da_copy_file(const char *src, const char *dst) {
    FILE *in = fopen(src, "rb");
    if (!in) return da_errorf("%s: cannot open: %s", src, strerror(errno));
    da_atomic_file af;
    da_status st = da_atomic_open(&af, dst);
    if (st.code) {
        fclose(in);
        return st;
    }
    char buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, got, af.fp);
    int err = ferror(in);
    fclose(in);
    if (err) {
        da_atomic_abort(&af);
        return da_errorf("%s: read error", src);
    }
    return da_atomic_commit(&af);
}

