/* Run folder locks (see run_lock.h). */
#include "io/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

da_status da_run_lock(const char *dir, int *fd) {
    *fd = -1;
    char path[4200];
    snprintf(path, sizeof path, "%s/.lock", dir);
    int f = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0) return da_errorf("%s: cannot open the run's lock file: %s", path, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB)) {
        int e = errno;
        char buf[32] = {0};
        ssize_t n = pread(f, buf, sizeof buf - 1, 0);
        close(f);
        long pid = n > 0 ? strtol(buf, NULL, 10) : 0;
        if (e != EWOULDBLOCK) return da_errorf("%s: cannot lock: %s", path, strerror(e));
        if (pid > 0)
            return da_errorf("%s is being written by another process (pid %ld, holding %s); wait for it to finish, "
                             "or choose another output folder",
                             dir, pid, path);
        return da_errorf("%s is being written by another process (holding %s); wait for it to finish, or choose "
                         "another output folder",
                         dir, path);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(f, 0) || pwrite(f, buf, (size_t)n, 0) != n) {
        int e = errno;
        close(f);
        return da_errorf("%s: cannot write the holder's pid: %s", path, strerror(e));
    }
    *fd = f;
    return da_ok();
}

void da_run_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing the last descriptor of the open file drops the flock */
}
