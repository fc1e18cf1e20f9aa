/* da_status construction. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/core.h"

da_status da_ok(void) {
    da_status s = {0, {0}};
    return s;
}

da_status da_errorf(const char *fmt, ...) {
    da_status s;
    s.code = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s.msg, sizeof s.msg, fmt, ap);
    va_end(ap);
    return s;
}

