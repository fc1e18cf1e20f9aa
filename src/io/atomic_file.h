/* Atomic file replacement: write to a temporary file beside the target, then
 * fsync it and rename it over the target. A process killed at any moment
 * leaves either the previous file or the complete new one at `path`, never a
 * partial one (at worst a stray `path.tmp.<pid>.<letters>` remains). */
#ifndef DA_IO_ATOMIC_FILE_H
#define DA_IO_ATOMIC_FILE_H

#include <stdio.h>

#include "diffattn/model.h"

typedef struct {
    FILE *fp;        /* the temporary file, open for writing; NULL when closed */
    char path[4096]; /* the target */
    char tmp[4096];  /* path + ".tmp.<pid>.<random>"; empty once removed or renamed */
    int through;     /* fp is path itself: a FIFO, a device or a /proc link such as /dev/stdout */
} da_atomic_file;

/* A write past the process's file size limit (ulimit -f, prlimit --fsize)
 * raises SIGXFSZ, which by default kills the process without a word and
 * leaves its temporary behind. This ignores the signal, unless the program
 * has set its own handler, so that the write fails with EFBIG and the error
 * is reported like a full disk. Every writer calls it; idempotent. */
void da_write_faults_as_errors(void);

/* Removes the files (and flat folders) of dir named <stem>.tmp.<pid>[.<letters>], where stem begins with
 * prefix (is prefix, when exact), whose process no longer exists: what a
 * kill -9 or a power cut mid-write leaves. A process that is alive, or whose
 * existence cannot be told, keeps its file. */
void da_remove_dead_temporaries(const char *dir, const char *prefix, int exact);

/* Creates a new temporary path + ".tmp.<pid>.<6 random letters>" for binary
 * writing (O_CREAT|O_EXCL|O_NOFOLLOW: an existing name, a planted symlink
 * included, is never opened; another name is tried), after removing path's
 * temporaries of processes that no longer exist. The commit's rename
 * replaces a regular file or a symlink at path, and never writes through it.
 * A path that is not a regular file (a FIFO, a character or block device,
 * or a link through /proc such as /dev/stdout, symlinks followed) is written
 * through instead, never replaced, so that /dev/null stays a device and a
 * FIFO's reader gets the data (appended, for /proc links to regular files);
 * a folder is refused. On failure af is left closed, so da_atomic_abort on it
 * is harmless. */
da_status da_atomic_open(da_atomic_file *af, const char *path);

/* fflush, fsync, fclose, rename over path, fsync the directory. On any
 * failure the temporary is removed and the error names the path and the
 * reason. af is closed afterwards either way. */
da_status da_atomic_commit(da_atomic_file *af);

/* After a failed write (errno e): da_atomic_abort, and the error to return,
 * naming the path and the reason and saying the previous file is unchanged. */
da_status da_atomic_fail(da_atomic_file *af, int e);

/* Closes and removes the temporary; the target is untouched. Idempotent. */
void da_atomic_abort(da_atomic_file *af);

/* Creates path as a new file for binary writing: NULL (errno EEXIST, ELOOP,
 * ...) when any name, a symlink included, is already there. For files whose
 * folder the caller has just made or checked empty, renamed into place later. */
FILE *da_create_new_file(const char *path);

/* Copies src over dst atomically. */
da_status da_copy_file(const char *src, const char *dst);

/* A folder replaced as a whole: its files are written into a new sibling
 * folder, dir.tmp.<pid>.<letters> (tmp, cap bytes), which commit swaps with
 * dir in one step (renameat2 RENAME_EXCHANGE), so a kill at any moment leaves
 * the old folder or the new one, never a mix. The parent is created if
 * missing; dead processes' temporary folders of dir are removed. */
da_status da_atomic_folder_open(const char *dir, char *tmp, size_t cap);
/* Syncs tmp and puts it in dir's place. Files of dir not named in owned are
 * carried over (hard links); a subfolder in dir is refused. On a file system
 * without the exchange, the owned files are renamed one by one, in order (a
 * name absent from tmp is removed from dir). tmp is removed either way. */
da_status da_atomic_folder_commit(char *tmp, const char *dir, const char *const *owned, int n_owned);
/* Removes tmp and what it holds, if set; dir is untouched. Idempotent. */
void da_atomic_folder_abort(char *tmp);

/* Writes json, with every bare nan, -nan, inf or -inf (what printf gives
 * for a non-finite double; outside strings) written as null: JSON has no
 * such numbers. 0, or -1 when a write failed. */
int da_json_write_finite(FILE *fp, const char *json);

/* mkdir -p: creates dir and its missing parents. */
da_status da_make_dirs(const char *dir);

#endif
