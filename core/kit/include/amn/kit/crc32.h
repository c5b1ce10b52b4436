/* amn/kit/crc32.h — plugin kit: CRC-32 as ZIP and zlib define it (reflected
 * polynomial 0xEDB88320, pre- and post-inverted), the same value as zlib's
 * crc32(). A ZIP writer checksums every byte of every member, so this runs at
 * memory speed: carry-less multiplication (PCLMULQDQ) folds 64 bytes per step
 * where the CPU has it, zlib's table-driven crc32_z() elsewhere. */
#ifndef AMN_KIT_CRC32_H
#define AMN_KIT_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* crc32(crc, buf, n) with zlib's conventions: start from 0, chain calls. */
uint32_t kit_crc32(uint32_t crc, const void *buf, size_t n);
/* The same through zlib alone (the reference the fast path is tested against). */
uint32_t kit_crc32_zlib(uint32_t crc, const void *buf, size_t n);
/* The CRC of A then B from crc_a = CRC(A), crc_b = CRC(B) and B's length
 * (zlib's crc32_combine): pieces checksummed apart, joined in order. */
uint32_t kit_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#endif
