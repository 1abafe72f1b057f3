#include "fsgd/error.h"

#include <stdarg.h>
#include <stdio.h>

#define FSGD_ERROR_NAME_(name, value, desc) \
    case value:                             \
        return "FSGD_E_" #name;
const char *fsgd_err_name(int code)
{
    switch (code) {
        FSGD_ERROR_LIST(FSGD_ERROR_NAME_)
    default:
        return "FSGD_E_UNKNOWN";
    }
}
#undef FSGD_ERROR_NAME_

int fsgd_err_fmt(char *err, size_t errsz, int code, const char *fmt, ...)
{
    if (err && errsz > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errsz, fmt, ap);
        va_end(ap);
    }
    return code;
}
