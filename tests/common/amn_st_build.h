/* Building small safetensors files in tests, byte by byte, so that malformed
 * variants can be written exactly. */
#ifndef AMN_ST_BUILD_H
#define AMN_ST_BUILD_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Write [u64 len][header][data] to path; returns 0 on success. */
static inline int amn_test_write_raw(const char *path, uint64_t len_field, const char *header,
                                     const void *data, size_t data_len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(len_field >> (8 * i));
    int ok = fwrite(le, 1, 8, f) == 8 && fwrite(header, 1, strlen(header), f) == strlen(header) &&
             (!data_len || fwrite(data, 1, data_len, f) == data_len);
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* A well-formed file: the length field matches the header. */
static inline int amn_test_write_st(const char *path, const char *header, const void *data,
                                    size_t data_len) {
    return amn_test_write_raw(path, strlen(header), header, data, data_len);
}

#endif
