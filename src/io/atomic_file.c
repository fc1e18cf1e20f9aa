/* Atomic file replacement (see atomic_file.h). */
#define _GNU_SOURCE
#include "io/atomic_file.h"
#include "core/clock.h"
#include "diffattn/formats.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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

/* What follows a temporary's pid: nothing, or "." and the random letters
 * that make its name unpredictable (see create_temporary). */
static int random_suffix_or_end(const char *s) {
    if (!*s) return 1;
    if (*s++ != '.' || !*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s)) return 0;
    return 1;
}

static int remove_flat_folder(const char *path);

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
        if (errno || end == digits || pid <= 0 || pid == (long)getpid() || !random_suffix_or_end(end)) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char stale[8192];
        snprintf(stale, sizeof stale, "%s/%s", dir, name);
        if (unlink(stale) && (errno == EISDIR || errno == EPERM)) (void)remove_flat_folder(stale);
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

/* A write through a FIFO or device: nothing of a previous file to keep. */
static da_status write_through_error(const char *path, int e) {
    return da_errorf("%s: write failed: %s (written through: it is not a regular file)", path, strerror(e));
}

da_status da_atomic_fail(da_atomic_file *af, int e) {
    const int through = af->through;
    da_atomic_abort(af);
    return through ? write_through_error(af->path, e ? e : EIO) : write_error(af->path, "write failed", e ? e : EIO);
}

#ifndef PROC_SUPER_MAGIC
#define PROC_SUPER_MAGIC 0x9fa0
#endif

/* Whether path reaches its target through a symlink that lives in /proc
 * (/dev/stdout -> /proc/self/fd/1, /dev/fd/N): a rename over path would
 * replace the system's link with a file, whatever the link leads to. */
static int through_proc_link(const char *path) {
    char cur[4096], next[4096], dir[4096];
    snprintf(cur, sizeof cur, "%s", path);
    for (int hop = 0; hop < 40; hop++) {
        struct stat sb;
        if (lstat(cur, &sb) || !S_ISLNK(sb.st_mode)) return 0;
        dir_of(cur, dir, sizeof dir);
        struct statfs fs;
        if (!statfs(dir, &fs) && fs.f_type == PROC_SUPER_MAGIC) return 1;
        ssize_t n = readlink(cur, next, sizeof next - 1);
        if (n <= 0) return 0;
        next[n] = 0;
        if (next[0] == '/') snprintf(cur, sizeof cur, "%s", next);
        else if ((size_t)snprintf(cur, sizeof cur, "%s/%s", dir, next) >= sizeof cur) return 0;
    }
    return 0;
}

/* What da_atomic_open does with path: 0 replace it by a rename, 1 write
 * through it, -1 refuse it (a folder; *st set). */
static int write_through_choice(const char *path, da_status *st) {
    struct stat sb;
    if (stat(path, &sb)) return 0; /* missing (or a dangling symlink): a new file replaces it */
    if (S_ISDIR(sb.st_mode)) {
        *st = da_errorf("%s: is a directory; give a file path to write", path);
        return -1;
    }
    return !S_ISREG(sb.st_mode) || through_proc_link(path);
}

/* Opens path itself for writing, without creating or truncating it: a FIFO
 * waits for its reader as a shell redirection does. */
static da_status open_through(da_atomic_file *af, const char *path) {
    int fd = open(path, O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return da_errorf("%s: cannot open it to write through it (not a regular file): %s", path, strerror(errno));
    af->fp = fdopen(fd, "ab");
    if (!af->fp) {
        int e = errno;
        close(fd);
        return da_errorf("%s: cannot open for writing: %s", path, strerror(e));
    }
    af->through = 1;
    return da_ok();
}

/* Six letters no other user can guess in advance: the clock's nanoseconds,
 * the pid, a per-process counter and an address, mixed (splitmix64). */
static void random_letters(char out[7]) {
    static const char abc[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static unsigned long counter; /* only makes successive names differ; a race between threads is harmless */
    uint64_t x = da_now_ns() ^ ((uint64_t)getpid() << 40) ^
                 (uint64_t)(uintptr_t)out ^ (uint64_t)++counter * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    for (int i = 0; i < 6; i++, x /= 62) out[i] = abc[x % 62];
    out[6] = 0;
}

/* Creates a new file named path.tmp.<pid>.<random> for writing. O_EXCL makes
 * creation fail on any existing name, a symlink included (even a dangling
 * one), so a name planted by someone else is never followed, truncated or
 * reused; another name is tried instead. Returns the descriptor, or -1 with
 * errno set. */
static int create_temporary(const char *path, char *tmp, size_t cap) {
    for (int attempt = 0; attempt < 100; attempt++) {
        char letters[7];
        random_letters(letters);
        int w = snprintf(tmp, cap, "%s.tmp.%ld.%s", path, (long)getpid(), letters);
        if (w < 0 || (size_t)w >= cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd >= 0 || (errno != EEXIST && errno != ELOOP)) return fd;
    }
    errno = EEXIST;
    return -1;
}

FILE *da_create_new_file(const char *path) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        int e = errno;
        close(fd);
        unlink(path);
        errno = e;
    }
    return fp;
}

da_status da_atomic_open(da_atomic_file *af, const char *path) {
    memset(af, 0, sizeof *af);
    da_write_faults_as_errors();
    if (!path || !path[0]) return da_errorf("atomic write: empty output path");
    size_t n = strlen(path);
    if (n + 32 >= sizeof af->path) return da_errorf("%.200s...: output path is too long", path);
    memcpy(af->path, path, n + 1);
    da_status refused = da_ok();
    const int through = write_through_choice(path, &refused);
    if (through < 0) return refused;
    if (through) return open_through(af, path);
    remove_stale_temporaries(path);

    int fd = create_temporary(path, af->tmp, sizeof af->tmp);
    if (fd < 0) {
        int e = errno;
        af->tmp[0] = 0;
        return da_errorf("%s: cannot create a temporary file beside it for writing: %s", path, strerror(e));
    }
    /* Keep the permissions of a regular file being replaced; a symlink at
     * path is replaced by the rename, so its target's mode is not copied. */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) (void)fchmod(fd, st.st_mode & 0777);

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

/* The commit of a write through: flush and close; a FIFO or a device
 * cannot be synced (EINVAL), which is no error. */
static da_status commit_through(da_atomic_file *af) {
    FILE *fp = af->fp;
    af->fp = NULL;
    int e = 0;
    if (ferror(fp)) e = errno ? errno : EIO;
    else if (fflush(fp) != 0) e = errno;
    else if (fsync(fileno(fp)) != 0 && errno != EINVAL && errno != EROFS) e = errno;
    if (fclose(fp) != 0 && !e) e = errno;
    return e ? write_through_error(af->path, e) : da_ok();
}

da_status da_atomic_commit(da_atomic_file *af) {
    if (!af->fp) {
        da_atomic_abort(af);
        return da_errorf("%s: atomic commit of a file that is not open", af->path);
    }
    if (af->through) return commit_through(af);
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
    da_status open_st;
    FILE *in = da_fopen_regular(src, &open_st);
    if (!in) return open_st;
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


/* ------------------------------------------------------------ outputs that are inputs */

typedef struct {
    dev_t dev;
    ino_t ino;
    const char *path; /* the argument it came from */
} file_identity;

typedef struct {
    file_identity *v;
    size_t n, cap;
} identity_set;

static int identity_add(identity_set *s, const struct stat *sb, const char *path) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        file_identity *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (file_identity){sb->st_dev, sb->st_ino, path};
    return 0;
}

/* An input and, when it is a folder, the files directly in it (symlinks
 * resolved): what a command may read from it (a Hugging Face folder's
 * config.json and shards, a data folder's texts). */
static int add_input(identity_set *s, const char *path) {
    struct stat sb;
    if (stat(path, &sb)) return 0; /* missing: the command reports it when it reads */
    if (identity_add(s, &sb, path)) return -1;
    if (!S_ISDIR(sb.st_mode)) return 0;
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int rc = 0;
    while (!rc && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char p[8192];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (!stat(p, &sb) && !S_ISDIR(sb.st_mode)) rc = identity_add(s, &sb, path);
    }
    closedir(d);
    return rc;
}

da_status da_check_outputs_not_inputs(const char *const *outputs, int n_outputs, const char *const *inputs,
                                      int n_inputs) {
    identity_set s = {0};
    for (int i = 0; i < n_inputs; i++)
        if (inputs[i] && add_input(&s, inputs[i])) {
            free(s.v);
            return da_errorf("out of memory listing the inputs");
        }
    da_status st = da_ok();
    for (int o = 0; o < n_outputs && !st.code; o++) {
        struct stat sb;
        if (!outputs[o] || stat(outputs[o], &sb)) continue; /* a new file aliases nothing */
        for (size_t i = 0; i < s.n; i++)
            if (s.v[i].dev == sb.st_dev && s.v[i].ino == sb.st_ino) {
                st = da_errorf("%s: this output is the input %s (the same file on disk); writing it would destroy "
                               "the input: choose another output path",
                               outputs[o], s.v[i].path);
                break;
            }
    }
    free(s.v);
    return st;
}

/* ------------------------------------------------------------ folders */

/* Removes the files and symlinks directly inside path, then path. */
static int remove_flat_folder(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) (void)unlinkat(dirfd(d), e->d_name, 0);
    closedir(d);
    return rmdir(path);
}

static int fsync_path(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = fsync(fd), e = errno;
    close(fd);
    return rc && e != EINVAL && e != EROFS ? -1 : 0;
}

da_status da_atomic_folder_open(const char *dir, char *tmp, size_t cap) {
    tmp[0] = 0;
    char clean[4096], parent[4096];
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (!n || n + 32 >= sizeof clean) return da_errorf("%.200s: empty or too long a folder path", dir);
    memcpy(clean, dir, n);
    clean[n] = 0;
    dir_of(clean, parent, sizeof parent);
    da_status st = da_make_dirs(parent);
    if (st.code) return st;
    const char *slash = strrchr(clean, '/');
    da_remove_dead_temporaries(parent, slash ? slash + 1 : clean, 1);
    for (int attempt = 0; attempt < 100; attempt++) {
        char letters[7];
        random_letters(letters);
        int w = snprintf(tmp, cap, "%s.tmp.%ld.%s", clean, (long)getpid(), letters);
        if (w < 0 || (size_t)w >= cap) break;
        if (!mkdir(tmp, 0755)) return da_ok();
        if (errno != EEXIST) {
            int e = errno;
            tmp[0] = 0;
            return da_errorf("%s: cannot create a temporary folder beside it: %s", clean, strerror(e));
        }
    }
    tmp[0] = 0;
    return da_errorf("%s: cannot create a temporary folder beside it", clean);
}

void da_atomic_folder_abort(char *tmp) {
    if (tmp[0]) (void)remove_flat_folder(tmp);
    tmp[0] = 0;
}

static int is_owned(const char *name, const char *const *owned, int n_owned) {
    for (int i = 0; i < n_owned; i++)
        if (!strcmp(name, owned[i])) return 1;
    return 0;
}

/* The files of dir that the new folder does not replace, hard-linked into
 * tmp so that the swap keeps them. A subfolder cannot be linked: refused. */
static da_status carry_other_files(const char *dir, const char *tmp, const char *const *owned, int n_owned) {
    DIR *d = opendir(dir);
    if (!d) return da_errorf("%s: cannot list: %s", dir, strerror(errno));
    int tfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    da_status st = tfd < 0 ? da_errorf("%s: cannot open: %s", tmp, strerror(errno)) : da_ok();
    struct dirent *e;
    while (!st.code && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || is_owned(e->d_name, owned, n_owned)) continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW)) continue;
        if (S_ISDIR(sb.st_mode))
            st = da_errorf("%s: holds the folder %s; the folder is replaced as a whole, so it may hold files only "
                           "(move %s elsewhere, or choose another output folder)",
                           dir, e->d_name, e->d_name);
        else if (linkat(dirfd(d), e->d_name, tfd, e->d_name, 0))
            st = da_errorf("%s/%s: cannot carry it into the new folder: %s", dir, e->d_name, strerror(errno));
    }
    if (tfd >= 0) close(tfd);
    closedir(d);
    return st;
}

da_status da_atomic_folder_commit(char *tmp, const char *dir, const char *const *owned, int n_owned) {
    char parent[4096];
    dir_of(tmp, parent, sizeof parent);
    da_status st = da_ok();
    struct stat sb;
    if (fsync_path(tmp)) st = da_errorf("%s: cannot sync the new folder: %s", tmp, strerror(errno));
    else if (lstat(dir, &sb)) {
        if (errno != ENOENT) st = da_errorf("%s: %s", dir, strerror(errno));
        else if (rename(tmp, dir)) st = da_errorf("%s: cannot rename the new folder into place: %s", dir, strerror(errno));
        else tmp[0] = 0;
    } else if (S_ISLNK(sb.st_mode)) {
        st = da_errorf("%s: is a symlink; the folder is replaced as a whole, never through a link: pass the folder "
                       "it points to",
                       dir);
    } else if (!S_ISDIR(sb.st_mode)) {
        st = da_errorf("%s: exists and is not a folder", dir);
    } else if (!(st = carry_other_files(dir, tmp, owned, n_owned)).code) {
        (void)chmod(tmp, sb.st_mode & 0777);
        if (renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_EXCHANGE)) {
            /* a file system without the exchange: file by file, in the caller's order */
            if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
                st = da_errorf("%s: cannot swap the new folder into place: %s", dir, strerror(errno));
            for (int i = 0; i < n_owned && !st.code; i++) {
                char from[8192], to[8192];
                snprintf(from, sizeof from, "%s/%s", tmp, owned[i]);
                snprintf(to, sizeof to, "%s/%s", dir, owned[i]);
                if (rename(from, to) && (errno != ENOENT || (unlink(to) && errno != ENOENT)))
                    st = da_errorf("%s: cannot replace it: %s", to, strerror(errno));
            }
        }
    }
    if (!st.code && fsync_path(parent)) st = da_errorf("%s: written, but syncing its parent failed", dir);
    da_atomic_folder_abort(tmp); /* the previous folder, swapped out, or the unused new one */
    return st;
}

/* ------------------------------------------------------------ JSON numbers */

/* The length of a non-finite number printf wrote at s ("nan", "-nan",
 * "inf", "-inf", any case), or 0. */
static size_t nonfinite_token(const char *s) {
    static const char *const tokens[] = {"-nan", "nan", "-inf", "inf"};
    for (int i = 0; i < 4; i++) {
        size_t n = strlen(tokens[i]);
        if (!strncasecmp(s, tokens[i], n) && !isalnum((unsigned char)s[n])) return n;
    }
    return 0;
}

int da_json_write_finite(FILE *fp, const char *json) {
    int in_string = 0;
    const char *run = json; /* the start of what is still to be written */
    for (const char *p = json; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) p++;
            else if (*p == '"') in_string = 0;
            continue;
        }
        if (*p == '"') {
            in_string = 1;
            continue;
        }
        const size_t n = (p == json || !isalnum((unsigned char)p[-1])) ? nonfinite_token(p) : 0;
        if (!n) continue;
        if (fwrite(run, 1, (size_t)(p - run), fp) != (size_t)(p - run) || fputs("null", fp) == EOF) return -1;
        p += n - 1;
        run = p + 1;
    }
    size_t rest = strlen(run);
    return fwrite(run, 1, rest, fp) == rest ? 0 : -1;
}
