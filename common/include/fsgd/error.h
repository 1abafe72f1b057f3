/* fsgd error codes: one enum for every library in the project.
 * 0 is success, every error is negative. Functions that can fail return an
 * fsgd_err_t (or a negative one in place of a count) and write a human
 * readable detail into a caller buffer `char *err, size_t errsz`.
 * Libraries never print or exit. */
#ifndef FSGD_ERROR_H
#define FSGD_ERROR_H

#include <stddef.h>

/* X(name, value, description). Names and numbers come from one list so they
 * cannot drift apart. Values are part of the CLI's exit status contract. */
#define FSGD_ERROR_LIST(X)                                   \
    X(OK, 0, "ok")                                           \
    X(NOMEM, -1, "out of memory")                            \
    X(IO, -2, "i/o error")                                   \
    X(PARSE, -3, "parse error")                              \
    X(ARG, -4, "invalid argument")                           \
    X(FORMAT, -5, "malformed data")                          \
    X(CRC, -6, "checksum mismatch")                          \
    X(VERSION, -7, "unsupported format version")             \
    X(TRUNCATED, -8, "truncated input")                      \
    X(RANGE, -9, "value out of range")                       \
    X(NOT_BUILT, -10, "feature not built in")                \
    X(NONFINITE, -11, "non-finite value")                    \
    X(KAFKA, -12, "kafka error")                             \
    X(TIMEOUT, -13, "timed out")                             \
    X(DEVICE, -14, "compute device error")                   \
    X(NOSPACE, -15, "output buffer too small")               \
    X(STATE, -16, "invalid state")                           \
    X(LOST, -17, "data lost")                                \
    X(UNSUPPORTED, -18, "unsupported")                      \
    X(AUTH, -19, "message not authenticated")

#define FSGD_ERROR_ENUM_(name, value, desc) FSGD_E_##name = value,
typedef enum fsgd_err { FSGD_ERROR_LIST(FSGD_ERROR_ENUM_) } fsgd_err_t;
#undef FSGD_ERROR_ENUM_

/* "FSGD_E_PARSE" style name of an error code; "FSGD_E_UNKNOWN" otherwise.
 * Returns a static string. Thread safe. */
const char *fsgd_err_name(int code);

/* Writes a printf-style detail into err (if err != NULL and errsz > 0) and
 * returns code, so error paths read `return fsgd_err_fmt(err, errsz, ...)`. */
int fsgd_err_fmt(char *err, size_t errsz, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Forward a failing call's code unchanged. */
#define FSGD_TRY(expr)                     \
    do {                                   \
        int fsgd_try_rc_ = (expr);         \
        if (fsgd_try_rc_ < 0)              \
            return fsgd_try_rc_;           \
    } while (0)

#endif
