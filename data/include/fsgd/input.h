/* What the row readers accept before they call an input endless: a line
 * with no end within FSGD_INPUT_MAX_LINE bytes (/dev/zero, a binary file),
 * or more than fsgd_input_stream_max() bytes from a stream (stdin, a FIFO, a
 * device), which, unlike a regular file, may never end. A reader stops there
 * with an error that says so instead of growing until memory runs out. */
#ifndef FSGD_INPUT_H
#define FSGD_INPUT_H

#include <stdint.h>
#include <stddef.h>

#define FSGD_INPUT_MAX_LINE ((size_t)64 << 20)

/* 1 when fd is not a regular file. */
int fsgd_input_is_stream(int fd);

/* The most a reader takes from a stream: the machine's physical memory (rows
 * held in memory could not be more), or FSGD_MAX_STREAM_MB when set (the
 * tests use it). */
uint64_t fsgd_input_stream_max(void);

/* The errors, naming path and what was read (err as fsgd_err_fmt). */
int fsgd_input_line_error(char *err, size_t errsz, const char *path, uint64_t line);
int fsgd_input_stream_error(char *err, size_t errsz, const char *path, uint64_t bytes);

#endif
