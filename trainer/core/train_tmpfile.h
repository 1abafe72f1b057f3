/* Private to trainer/core: a temporary file with no name, for what fsgd
 * train keeps off the heap (train_best.h, train_spill.h). */
#ifndef FSGD_TRAIN_TMPFILE_H
#define FSGD_TRAIN_TMPFILE_H

/* A read-write file in $TMPDIR (else /tmp) that no path names: it goes
 * when its descriptor is closed or the process ends, however it ends.
 * Returns the descriptor (close-on-exec) or -1. */
int fsgd_train_tmpfile(void);

#endif
