/* Writing GGUF bytes by hand for the container tests: a growable buffer with
 * the format's primitives, version-aware (v1 counts are u32) and in either
 * byte order (set `be` before writing: a big-endian file, as gguf-py writes
 * with GGUFEndian.BIG). Header-only. */
#ifndef GGUF_BUILD_H
#define GGUF_BUILD_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
    uint32_t version;
    bool be; /* numbers most significant byte first */
} gb;

static inline void gb_bytes(gb *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n) cap *= 2;
        b->p = realloc(b->p, cap);
        if (!b->p) abort();
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
}

static inline void gb_u8(gb *b, uint8_t v) {
    gb_bytes(b, &v, 1);
}
/* v as n bytes in the buffer's byte order at x. */
static inline void gb_store(const gb *b, uint8_t *x, uint64_t v, int n) {
    for (int i = 0; i < n; i++) x[b->be ? n - 1 - i : i] = (uint8_t)(v >> (8 * i));
}
static inline void gb_u16(gb *b, uint16_t v) {
    uint8_t x[2];
    gb_store(b, x, v, 2);
    gb_bytes(b, x, 2);
}
static inline void gb_u32(gb *b, uint32_t v) {
    uint8_t x[4];
    gb_store(b, x, v, 4);
    gb_bytes(b, x, 4);
}
static inline void gb_u64(gb *b, uint64_t v) {
    uint8_t x[8];
    gb_store(b, x, v, 8);
    gb_bytes(b, x, 8);
}
/* A count, length or dimension: u32 in version 1, u64 after. */
static inline void gb_count(gb *b, uint64_t v) {
    if (b->version == 1)
        gb_u32(b, (uint32_t)v);
    else
        gb_u64(b, v);
}
static inline void gb_strn(gb *b, const char *s, size_t n) {
    gb_count(b, n);
    gb_bytes(b, s, n);
}
static inline void gb_str(gb *b, const char *s) {
    gb_strn(b, s, strlen(s));
}
static inline void gb_pad(gb *b, uint32_t align) {
    while (b->n % align) gb_u8(b, 0);
}

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 };

static inline void gb_header(gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->version = version;
    gb_bytes(b, "GGUF", 4);
    gb_u32(b, version);
    gb_count(b, n_tensors);
    gb_count(b, n_kv);
}

static inline void gb_key(gb *b, const char *key, uint32_t type) {
    gb_str(b, key);
    gb_u32(b, type);
}
static inline void gb_kv_u32(gb *b, const char *key, uint32_t v) {
    gb_key(b, key, T_U32);
    gb_u32(b, v);
}
static inline void gb_kv_str(gb *b, const char *key, const char *v) {
    gb_key(b, key, T_STR);
    gb_str(b, v);
}
/* Array header; the caller writes `count` items. */
static inline void gb_arr(gb *b, uint32_t elem, uint64_t count) {
    gb_u32(b, elem);
    gb_count(b, count);
}

static inline void gb_tensor(gb *b, const char *name, uint32_t ndim, const uint64_t *ne,
                             uint32_t type, uint64_t offset) {
    gb_str(b, name);
    gb_u32(b, ndim);
    for (uint32_t d = 0; d < ndim; d++) gb_count(b, ne[d]);
    gb_u32(b, type);
    gb_u64(b, offset);
}

static inline void gb_put_u64_at(gb *b, size_t at, uint64_t v) {
    gb_store(b, b->p + at, v, 8);
}
static inline void gb_put_u32_at(gb *b, size_t at, uint32_t v) {
    gb_store(b, b->p + at, v, 4);
}

static inline void gb_free(gb *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

#endif
