/* Error records: a class code plus a bounded message. */
#include <stdio.h>
#include <string.h>

#include "amn/error.h"

const char *amn_error_class(int code) {
    switch (code) {
    case AMN_OK:
        return "ok";
    case AMN_E_PARSE:
        return "parse error";
    case AMN_E_UNSUPPORTED:
        return "unsupported";
    case AMN_E_LIMIT:
        return "limit exceeded";
    case AMN_E_DISALLOWED:
        return "disallowed";
    case AMN_E_IO:
        return "i/o error";
    case AMN_E_NOMEM:
        return "out of memory";
    case AMN_E_INVALID:
        return "invalid argument";
    default:
        return "error";
    }
}

int amn_error_setv(amn_error *err, int code, const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int amn_error_set(amn_error *err, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    amn_error_setv(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int amn_error_prefix(amn_error *err, const char *fmt, ...) {
    if (!err) return AMN_OK;
    char prefix[AMN_ERROR_MSG_MAX], old[AMN_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t plen = strnlen(prefix, sizeof err->msg - 1);
    memcpy(err->msg, prefix, plen);
    size_t olen = strnlen(old, sizeof old);
    if (olen > sizeof err->msg - 1 - plen) olen = sizeof err->msg - 1 - plen;
    memcpy(err->msg + plen, old, olen);
    err->msg[plen + olen] = '\0';
    return err->code;
}

void amn_error_clear(amn_error *err) {
    if (err) {
        err->code = AMN_OK;
        err->msg[0] = '\0';
    }
}
