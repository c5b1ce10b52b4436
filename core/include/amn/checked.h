/* amn/checked.h — overflow-checked size arithmetic for sizes read from files.
 * Each returns true when the result is exact, false on overflow. */
#ifndef AMN_CHECKED_H
#define AMN_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

static inline bool amn_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline bool amn_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
/* True when [off, off+len) lies inside [0, size). */
static inline bool amn_range_ok(uint64_t size, uint64_t off, uint64_t len) {
    return off <= size && len <= size - off;
}

#endif
