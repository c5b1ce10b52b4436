/* amn/kit/sha256.h — plugin kit: SHA-256 (FIPS 180-4), for identifying data
 * by its digest (the pre-tokenizer check of a Hugging Face vocabulary, as
 * llama.cpp's converter hashes it) and for the tests' checksums. */
#ifndef AMN_KIT_SHA256_H
#define AMN_KIT_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct kit_sha256 {
    uint32_t h[8];
    uint64_t len;
    uint8_t buf[64];
    size_t used;
} kit_sha256;

void kit_sha256_init(kit_sha256 *c);
void kit_sha256_update(kit_sha256 *c, const void *data, size_t n);
/* The digest; c is finished (init it again to reuse it). */
void kit_sha256_final(kit_sha256 *c, uint8_t out[32]);
/* The digest of one buffer. */
void kit_sha256_of(const void *data, size_t n, uint8_t out[32]);
/* out[0..64]: digest as lower-case hex, NUL-terminated. */
void kit_sha256_hex(const uint8_t digest[32], char out[65]);

#endif
