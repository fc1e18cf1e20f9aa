/* A run folder has one writer at a time: train and compare hold an
 * exclusive flock on <dir>/.lock for as long as they write there. The file
 * holds the holder's pid, so that a second writer is refused by name. The
 * kernel drops the lock when the process ends, however it ends, so a killed
 * run never leaves its folder locked. */
#ifndef DA_IO_RUN_LOCK_H
#define DA_IO_RUN_LOCK_H

#include "diffattn/core.h"

/* Takes the lock of dir (an existing folder); *fd gets the descriptor that
 * holds it (-1 on error). Refused, naming the holder's pid, when another
 * process holds it. */
da_status da_run_lock(const char *dir, int *fd);
/* Releases it (the file stays). fd -1: nothing. */
void da_run_unlock(int fd);

#endif
