/* The tests' SHA-256 helpers over the kit's (amn/kit/sha256.h): checksums of
 * tables and outputs as lower-case hex. Link amn-kit. */
#ifndef AMN_TEST_SHA256_H
#define AMN_TEST_SHA256_H

#include "amn/kit/sha256.h"

typedef kit_sha256 sha256_ctx;

static inline void sha256_init(sha256_ctx *c) {
    kit_sha256_init(c);
}

static inline void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    kit_sha256_update(c, data, n);
}

/* Finish into a 65-byte lower-case hex string. */
static inline void sha256_hex(sha256_ctx *c, char hex[65]) {
    uint8_t d[32];
    kit_sha256_final(c, d);
    kit_sha256_hex(d, hex);
}

static inline void sha256_of(const void *data, size_t n, char hex[65]) {
    uint8_t d[32];
    kit_sha256_of(data, n, d);
    kit_sha256_hex(d, hex);
}

#endif
