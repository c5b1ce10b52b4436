/* amn/error.h — error classes and the error record every fallible call fills.
 *
 * Every fallible function returns an int: AMN_OK (0) or a negative AMN_E_*
 * class, and, when the caller passes a non-NULL amn_error, a human message.
 * The library never prints and never aborts.
 */
#ifndef AMN_ERROR_H
#define AMN_ERROR_H

#include <stdarg.h>

#include "amn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
    AMN_OK = 0,
    AMN_E_PARSE = -1,       /* malformed input */
    AMN_E_UNSUPPORTED = -2, /* recognised but not handled, or its plugin is missing */
    AMN_E_LIMIT = -3,       /* a safety cap was exceeded */
    AMN_E_DISALLOWED = -4,  /* refused for security (e.g. a pickle global) */
    AMN_E_IO = -5,          /* the operating system said no */
    AMN_E_NOMEM = -6,       /* allocation failed */
    AMN_E_INVALID = -7,     /* the caller passed something wrong */
};

#define AMN_ERROR_MSG_MAX 512

typedef struct amn_error {
    int code;
    char msg[AMN_ERROR_MSG_MAX];
} amn_error;

/* "parse", "unsupported", ... for a code; "ok" for AMN_OK. */
AMN_API const char *amn_error_class(int code);

/* Record code and a printf-style message in err (if non-NULL); returns code so a
 * caller can write `return amn_error_set(err, AMN_E_PARSE, "...")`. */
AMN_API int amn_error_set(amn_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
AMN_API int amn_error_setv(amn_error *err, int code, const char *fmt, va_list ap);

/* Prepend context ("model.safetensors: ") to an already recorded message. */
AMN_API int amn_error_prefix(amn_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

AMN_API void amn_error_clear(amn_error *err);

#ifdef __cplusplus
}
#endif
#endif
