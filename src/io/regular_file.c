/* Opening inputs by name, regular files only (see da_open_regular in
 * diffattn/formats.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diffattn/formats.h"

static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory (a folder)";
    if (S_ISFIFO(m)) return "a FIFO (named pipe)";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a file";
}

int da_open_regular(const char *path, da_status *st) {
    da_status ignored;
    if (!st) st = &ignored;
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead of
     * waiting for one; cleared below, since regular files ignore it anyway. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO || e == ENODEV) { /* a socket or a device that cannot be opened: say which */
            struct stat sb;
            if (!stat(path, &sb) && !S_ISREG(sb.st_mode)) {
                *st = da_errorf("%s: is %s, not a regular file; only regular files are read", path, kind_of(sb.st_mode));
                return -1;
            }
        }
        *st = da_errorf("%s: cannot open: %s", path, strerror(e));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb)) {
        int e = errno;
        close(fd);
        *st = da_errorf("%s: cannot stat: %s", path, strerror(e));
        return -1;
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        *st = da_errorf("%s: is %s, not a regular file; only regular files are read", path, kind_of(sb.st_mode));
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *st = da_ok();
    return fd;
}

FILE *da_fopen_regular(const char *path, da_status *st) {
    da_status ignored;
    if (!st) st = &ignored;
    int fd = da_open_regular(path, st);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        *st = da_errorf("%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return fp;
}

da_status da_read_regular(const char *path, size_t max_bytes, char **data, size_t *n) {
    *data = NULL;
    if (n) *n = 0;
    da_status st;
    int fd = da_open_regular(path, &st);
    if (fd < 0) return st;
    struct stat sb;
    if (fstat(fd, &sb) || (uint64_t)sb.st_size > (uint64_t)max_bytes) {
        close(fd);
        return da_errorf("%s: is %lld bytes, over the limit of %zu bytes for this file", path, (long long)sb.st_size,
                         max_bytes);
    }
    /* read to the end, not to st_size: the file may change while it is read */
    size_t cap = (size_t)sb.st_size + 1, len = 0;
    char *buf = malloc(cap + 1);
    st = buf ? da_ok() : da_errorf("%s: out of memory for %zu bytes", path, cap);
    while (!st.code) {
        if (len == cap) {
            if (cap > max_bytes) {
                st = da_errorf("%s: grew past the limit of %zu bytes for this file while it was read", path, max_bytes);
                break;
            }
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) {
                st = da_errorf("%s: out of memory", path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) st = da_errorf("%s: read error: %s", path, strerror(errno));
        if (got <= 0) break;
        len += (size_t)got;
    }
    close(fd);
    if (!st.code && len > max_bytes)
        st = da_errorf("%s: grew past the limit of %zu bytes for this file while it was read", path, max_bytes);
    if (st.code) {
        free(buf);
        return st;
    }
    buf[len] = 0;
    *data = buf;
    if (n) *n = len;
    return da_ok();
}
