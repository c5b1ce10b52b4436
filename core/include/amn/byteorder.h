/* amn/byteorder.h — little-endian loads and stores, on any host.
 *
 * Tensor bytes amn hands around are in their file's order, little-endian in
 * every format amn writes; metadata values (amn_kv) are in host order. Code
 * that reads or writes a multi-byte value inside a file or a tensor goes
 * through these helpers, never a host-order memcpy, so that a big-endian
 * host (s390x) reads the same values and writes the same bytes as x86-64.
 * On a little-endian host each compiles to a plain load or store.
 */
#ifndef AMN_BYTEORDER_H
#define AMN_BYTEORDER_H

#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define AMN_HOST_BIG_ENDIAN 1
#else
#define AMN_HOST_BIG_ENDIAN 0
#endif

static inline uint16_t amn_bswap16(uint16_t v) {
    return (uint16_t)(v << 8 | v >> 8);
}

static inline uint32_t amn_bswap32(uint32_t v) {
    return __builtin_bswap32(v);
}

static inline uint64_t amn_bswap64(uint64_t v) {
    return __builtin_bswap64(v);
}

/* Host order to little-endian and back (the same swap either way). */
static inline uint16_t amn_htole16(uint16_t v) {
    return AMN_HOST_BIG_ENDIAN ? amn_bswap16(v) : v;
}

static inline uint32_t amn_htole32(uint32_t v) {
    return AMN_HOST_BIG_ENDIAN ? amn_bswap32(v) : v;
}

static inline uint64_t amn_htole64(uint64_t v) {
    return AMN_HOST_BIG_ENDIAN ? amn_bswap64(v) : v;
}

static inline uint16_t amn_load_le16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return amn_htole16(v);
}

static inline uint32_t amn_load_le32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return amn_htole32(v);
}

static inline uint64_t amn_load_le64(const void *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return amn_htole64(v);
}

static inline void amn_store_le16(void *p, uint16_t v) {
    v = amn_htole16(v);
    memcpy(p, &v, 2);
}

static inline void amn_store_le32(void *p, uint32_t v) {
    v = amn_htole32(v);
    memcpy(p, &v, 4);
}

static inline void amn_store_le64(void *p, uint64_t v) {
    v = amn_htole64(v);
    memcpy(p, &v, 8);
}

static inline float amn_load_le_f32(const void *p) {
    const uint32_t u = amn_load_le32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline void amn_store_le_f32(void *p, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    amn_store_le32(p, u);
}

/* n values of `size` bytes (2, 4 or 8) in place: between little-endian and
 * host order. Nothing to do on a little-endian host. */
static inline void amn_le_to_host_n(void *p, size_t size, size_t n) {
    if (!AMN_HOST_BIG_ENDIAN || size < 2) return;
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++, b += size)
        for (size_t j = 0; j < size / 2; j++) {
            const uint8_t t = b[j];
            b[j] = b[size - 1 - j];
            b[size - 1 - j] = t;
        }
}

#endif
