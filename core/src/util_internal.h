/* Private to core: small helpers shared by its files. */
#ifndef AMN_UTIL_INTERNAL_H
#define AMN_UTIL_INTERNAL_H

#include <stdlib.h>
#include <string.h>

/* strdup that passes NULL through. */
static inline char *amni_strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

#endif
