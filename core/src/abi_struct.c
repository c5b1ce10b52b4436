/* The application ABI's sized structs (amn/context.h): what libamn reads
 * from a caller's options and writes into a caller's info structs. */
#include <stdint.h>
#include <string.h>

#include "abi_internal.h"

static uint32_t struct_size_of(const void *p) {
    uint32_t n;
    memcpy(&n, p, sizeof n); /* every such struct starts with struct_size */
    return n;
}

static int too_small(uint32_t n, size_t min_size, const char *what, amn_error *err) {
    return amn_error_set(err, AMN_E_INVALID,
                         "%s: struct_size %u is below %zu (set it to sizeof(%s) before the call)",
                         what, (unsigned)n, min_size, what);
}

int amni_struct_check(const void *p, size_t min_size, const char *what, amn_error *err) {
    const uint32_t n = struct_size_of(p);
    return n < min_size ? too_small(n, min_size, what, err) : AMN_OK;
}

int amni_struct_in(void *dst, size_t dst_size, size_t min_size, const void *src, const char *what,
                   amn_error *err) {
    const uint32_t n = struct_size_of(src);
    if (n < min_size) return too_small(n, min_size, what, err);
    const unsigned char *tail = (const unsigned char *)src;
    for (size_t k = dst_size; k < n; k++)
        if (tail[k])
            return amn_error_set(err, AMN_E_INVALID,
                                 "%s: a field this libamn does not know is set (byte %zu of %u; "
                                 "built against a newer amn?)",
                                 what, k, (unsigned)n);
    memset(dst, 0, dst_size);
    memcpy(dst, src, n < dst_size ? n : dst_size);
    const uint32_t own = (uint32_t)dst_size;
    memcpy(dst, &own, sizeof own);
    return AMN_OK;
}

int amni_struct_out(void *dst, const void *full, size_t full_size, size_t min_size,
                    const char *what, amn_error *err) {
    const uint32_t n = struct_size_of(dst);
    if (n < min_size) return too_small(n, min_size, what, err);
    const uint32_t given = n < full_size ? n : (uint32_t)full_size;
    memcpy(dst, full, given);
    memcpy(dst, &given, sizeof given);
    return AMN_OK;
}
