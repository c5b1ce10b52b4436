/* zip_writer.c — stored members, data descriptors, ZIP64 where needed. */
#include "amn/kit/zip_writer.h"

#include <stdlib.h>
#include <string.h>

#include "amn/kit/crc32.h"

#define LFH_SIG  0x04034b50u
#define CDH_SIG  0x02014b50u
#define DD_SIG   0x08074b50u
#define EOCD_SIG 0x06054b50u
#define E64_SIG  0x06064b50u
#define LOC_SIG  0x07064b50u
#define U16_MAX  0xffffu
#define U32_MAX  0xffffffffu
/* Bit 3: sizes and CRC follow the data; bit 11: the name is UTF-8. */
#define FLAGS (0x0008u | 0x0800u)
/* 1980-01-01 00:00, the earliest DOS date: output bytes never depend on the clock. */
#define DOS_DATE 0x0021u
#define DOS_TIME 0x0000u

typedef struct zipw_entry {
    char *name;
    uint16_t name_len;
    uint32_t crc;
    uint64_t size, offset;
} zipw_entry;

struct zipw {
    amn_sink *sink;
    zipw_options o;
    zipw_entry *e;
    size_t n, cap;
    bool open;     /* a member is being streamed */
    uint32_t crc;  /* of the open member so far */
    uint64_t seen; /* bytes of the open member so far */
};

static void put16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put32(uint8_t *p, uint32_t v) {
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}
static void put64(uint8_t *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static void tap(void *ctx, const void *buf, size_t n) {
    zipw *z = ctx;
    z->crc = kit_crc32(z->crc, buf, n);
    z->seen += n;
}

/* The same for pieces checksummed apart by the threads that wrote them. */
static uint64_t piece_crc(const void *buf, size_t n) {
    return kit_crc32(0, buf, n);
}

static void fold(void *ctx, uint64_t crc, uint64_t n) {
    zipw *z = ctx;
    z->crc = kit_crc32_combine(z->crc, (uint32_t)crc, n);
    z->seen += n;
}

int zipw_new(amn_sink *sink, const zipw_options *o, zipw **out, amn_error *err) {
    *out = NULL;
    const uint32_t a = o->align ? o->align : 1;
    if (a & (a - 1) || a > 4096)
        return amn_error_set(err, AMN_E_INVALID, "zip alignment %u is not a power of two <= 4096",
                             a);
    zipw *z = calloc(1, sizeof *z);
    if (!z) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    z->sink = sink;
    z->o = *o;
    z->o.align = a;
    *out = z;
    return AMN_OK;
}

static bool big(uint64_t v) {
    return v >= U32_MAX;
}

int zipw_member_begin(zipw *z, const char *name, uint64_t size, amn_error *err) {
    if (z->open) {
        int rc = zipw_member_end(z, err);
        if (rc) return rc;
    }
    const size_t len = strlen(name);
    /* The local header's name and extra fields share no length budget, but
     * the padding (at most align + 4) must fit the extra field's 16 bits. */
    if (len > U16_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "zip member name of %zu bytes (at most 65535)", len);
    if (z->n == z->cap) {
        size_t nc = z->cap ? 2 * z->cap : 64;
        zipw_entry *e = realloc(z->e, nc * sizeof *e);
        if (!e) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        z->e = e;
        z->cap = nc;
    }
    zipw_entry *e = &z->e[z->n];
    *e = (zipw_entry){.name = malloc(len + 1),
                      .name_len = (uint16_t)len,
                      .size = size,
                      .offset = amn_sink_tell(z->sink)};
    if (!e->name) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    memcpy(e->name, name, len + 1);
    z->n++;

    /* Local header, the ZIP64 extra (Python's zipfile layout for streamed
     * members: both sizes 0xffffffff here, zeros in the extra), then padding
     * so the data lands on a multiple of align. */
    const bool z64 = big(size);
    const size_t z64_len = z64 ? 20 : 0, pad_min = 4 + (z->o.pad_has_align ? 2 : 0);
    const uint64_t start = e->offset + 30 + len + z64_len + pad_min;
    const size_t pad = (size_t)((z->o.align - start % z->o.align) % z->o.align);
    const size_t extra = z64_len + pad_min + pad;
    uint8_t h[30 + 20 + 6 + 4096];
    put32(h, LFH_SIG);
    put16(h + 4, z64 ? 45 : 20);
    put16(h + 6, FLAGS);
    put16(h + 8, 0); /* stored */
    put16(h + 10, DOS_TIME);
    put16(h + 12, DOS_DATE);
    put32(h + 14, 0);
    put32(h + 18, z64 ? U32_MAX : 0);
    put32(h + 22, z64 ? U32_MAX : 0);
    put16(h + 26, (uint32_t)len);
    put16(h + 28, (uint32_t)extra);
    int rc = amn_sink_write(z->sink, h, 30, err);
    if (!rc) rc = amn_sink_write(z->sink, name, len, err);
    uint8_t *x = h + 30;
    size_t k = 0;
    if (z64) {
        put16(x, 1);
        put16(x + 2, 16);
        memset(x + 4, 0, 16);
        k = 20;
    }
    put16(x + k, z->o.pad_id);
    put16(x + k + 2, (uint32_t)(pad_min - 4 + pad));
    k += 4;
    if (z->o.pad_has_align) {
        put16(x + k, z->o.align);
        k += 2;
    }
    memset(x + k, z->o.pad_byte, pad);
    k += pad;
    if (!rc) rc = amn_sink_write(z->sink, x, k, err);
    if (rc) return rc;
    z->crc = 0;
    z->seen = 0;
    z->open = true;
    amn_sink_set_folding_tap(z->sink, tap, piece_crc, fold, z);
    return AMN_OK;
}

int zipw_member_end(zipw *z, amn_error *err) {
    if (!z->open) return AMN_OK;
    amn_sink_set_tap(z->sink, NULL, NULL);
    z->open = false;
    zipw_entry *e = &z->e[z->n - 1];
    if (z->seen != e->size)
        return amn_error_set(err, AMN_E_INVALID, "zip member %s: %llu bytes written, %llu declared",
                             e->name, (unsigned long long)z->seen, (unsigned long long)e->size);
    e->crc = z->crc;
    uint8_t d[24];
    put32(d, DD_SIG);
    put32(d + 4, e->crc);
    if (big(e->size)) {
        put64(d + 8, e->size);
        put64(d + 16, e->size);
        return amn_sink_write(z->sink, d, 24, err);
    }
    put32(d + 8, (uint32_t)e->size);
    put32(d + 12, (uint32_t)e->size);
    return amn_sink_write(z->sink, d, 16, err);
}

int zipw_add(zipw *z, const char *name, const void *data, size_t n, amn_error *err) {
    int rc = zipw_member_begin(z, name, n, err);
    if (!rc) rc = amn_sink_write(z->sink, data, n, err);
    if (!rc) rc = zipw_member_end(z, err);
    return rc;
}

static int write_central(zipw *z, const zipw_entry *e, amn_error *err) {
    const bool bs = big(e->size), bo = big(e->offset);
    const size_t extra = bs || bo ? 4 + (bs ? 16 : 0) + (bo ? 8 : 0) : 0;
    uint8_t h[46 + 28];
    put32(h, CDH_SIG);
    put16(h + 4, extra ? 45 : 20); /* made by: MS-DOS attributes, spec 4.5 / 2.0 */
    put16(h + 6, extra ? 45 : 20);
    put16(h + 8, FLAGS);
    put16(h + 10, 0);
    put16(h + 12, DOS_TIME);
    put16(h + 14, DOS_DATE);
    put32(h + 16, e->crc);
    put32(h + 20, bs ? U32_MAX : (uint32_t)e->size);
    put32(h + 24, bs ? U32_MAX : (uint32_t)e->size);
    put16(h + 28, e->name_len);
    put16(h + 30, (uint32_t)extra);
    put16(h + 32, 0); /* comment */
    put16(h + 34, 0); /* disk */
    put16(h + 36, 0); /* internal attributes */
    put32(h + 38, 0); /* external attributes */
    put32(h + 42, bo ? U32_MAX : (uint32_t)e->offset);
    uint8_t *x = h + 46;
    if (extra) {
        /* ZIP64 extra: only the fields saturated above, in this order. */
        put16(x, 1);
        put16(x + 2, (uint32_t)(extra - 4));
        size_t k = 4;
        if (bs) {
            put64(x + k, e->size);
            put64(x + k + 8, e->size);
            k += 16;
        }
        if (bo) put64(x + k, e->offset);
    }
    int rc = amn_sink_write(z->sink, h, 46, err);
    if (!rc) rc = amn_sink_write(z->sink, e->name, e->name_len, err);
    if (!rc && extra) rc = amn_sink_write(z->sink, x, extra, err);
    return rc;
}

int zipw_finish(zipw *z, amn_error *err) {
    int rc = zipw_member_end(z, err);
    const uint64_t cd_off = amn_sink_tell(z->sink);
    for (size_t i = 0; !rc && i < z->n; i++) rc = write_central(z, &z->e[i], err);
    if (rc) return rc;
    const uint64_t cd_end = amn_sink_tell(z->sink), cd_size = cd_end - cd_off;
    const bool z64 = z->o.zip64_end_always || z->n >= U16_MAX || big(cd_size) || big(cd_off);
    uint8_t r[56 + 20 + 22];
    size_t k = 0;
    if (z64) {
        put32(r, E64_SIG);
        put64(r + 4, 44); /* size of the rest of the record */
        put16(r + 12, 45);
        put16(r + 14, 45);
        put32(r + 16, 0);
        put32(r + 20, 0);
        put64(r + 24, z->n);
        put64(r + 32, z->n);
        put64(r + 40, cd_size);
        put64(r + 48, cd_off);
        put32(r + 56, LOC_SIG);
        put32(r + 60, 0);
        put64(r + 64, cd_end);
        put32(r + 72, 1);
        k = 76;
    }
    uint8_t *q = r + k;
    put32(q, EOCD_SIG);
    put16(q + 4, 0);
    put16(q + 6, 0);
    put16(q + 8, z->n >= U16_MAX ? U16_MAX : (uint32_t)z->n);
    put16(q + 10, z->n >= U16_MAX ? U16_MAX : (uint32_t)z->n);
    put32(q + 12, big(cd_size) ? U32_MAX : (uint32_t)cd_size);
    put32(q + 16, big(cd_off) ? U32_MAX : (uint32_t)cd_off);
    put16(q + 20, 0);
    return amn_sink_write(z->sink, r, k + 22, err);
}

void zipw_free(zipw *z) {
    if (!z) return;
    if (z->open) amn_sink_set_tap(z->sink, NULL, NULL);
    for (size_t i = 0; i < z->n; i++) free(z->e[i].name);
    free(z->e);
    free(z);
}

/* Length of the UTF-8 sequence at s (at most n bytes), 0 if malformed:
 * overlong forms, surrogates and code points past U+10FFFF are refused. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t k;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf)
        k = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        k = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        k = 4, cp = c & 0x07;
    else
        return 0;
    if (k > n) return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return k;
}

bool zip_utf8_valid(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        const size_t k = utf8_len((const unsigned char *)s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

const char *zip_name_problem(const char *name, size_t len, size_t max_len) {
    if (len == 0) return "empty";
    if (len > max_len) return "too long";
    if (name[0] == '/') return "an absolute path";
    size_t comp = 0; /* start of the current component */
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/') {
            const size_t cl = i - comp;
            if (cl == 0) return "an empty path component";
            if ((cl == 1 && name[comp] == '.') ||
                (cl == 2 && name[comp] == '.' && name[comp + 1] == '.'))
                return "a '.' or '..' path component";
            comp = i + 1;
            continue;
        }
        const unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c == 0x7f) return c ? "a control character" : "a NUL byte";
        if (c == '\\') return "a backslash (a path separator on Windows)";
        if (c == ':' && i == 1) return "a drive letter";
        if (c >= 0x80) {
            const size_t k = utf8_len((const unsigned char *)name + i, len - i);
            if (!k) return "not UTF-8";
            i += k - 1;
        }
    }
    return NULL;
}
