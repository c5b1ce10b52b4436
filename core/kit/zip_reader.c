/* zip_reader.c — end records, central directory (ZIP64 included), local
 * headers and raw inflate, with every offset and size checked against the
 * file before it is used. */
#include "amn/kit/zip_reader.h"

#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "amn/checked.h"
#include "amn/kit/crc32.h"

#define EOCD_SIZE         22
#define EOCD64_LOC_SIZE   20
#define EOCD64_SIZE       56
#define CDH_SIZE          46
#define LFH_SIZE          30
#define MAX_COMMENT       65535u
#define U32_SENTINEL      0xffffffffu
#define DEFLATE_MAX_RATIO 1032u
/* zlib counts in uInt: feed it at most this much per call. */
#define ZCHUNK        (1u << 30)
#define INSPECT_CHUNK 65536u

static uint16_t rd16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) {
    return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static const char *src_name(const amn_source *src) {
    return src->name ? src->name : "zip";
}

static int mem_read_at(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    const zip_memsrc *m = ctx;
    *got = 0;
    if (off >= m->n) return AMN_OK;
    uint64_t avail = m->n - off;
    size_t k = avail < n ? (size_t)avail : n;
    if (k) memcpy(buf, m->p + off, k);
    *got = k;
    return AMN_OK;
}

void zip_memsrc_init(zip_memsrc *m, const uint8_t *p, uint64_t n, const char *name) {
    m->p = p;
    m->n = n;
    m->src.ctx = m;
    m->src.size = n;
    m->src.read_at = mem_read_at;
    m->src.name = name;
}

bool zip_is_local_header(const uint8_t *p, size_t n) {
    return n >= 4 && p[0] == 'P' && p[1] == 'K' && p[2] == 3 && p[3] == 4;
}

bool zip_name_ends(const char *name, size_t len, const char *suffix) {
    size_t n = strlen(suffix);
    return len >= n && memcmp(name + len - n, suffix, n) == 0;
}

bool zip_name_ends_fold(const char *name, size_t len, const char *suffix) {
    size_t n = strlen(suffix);
    if (len < n) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[len - n + i];
        if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
        if (c != suffix[i]) return false;
    }
    return true;
}

bool zip_name_is_pickle(const char *name, size_t len) {
    if (!zip_name_ends_fold(name, len, "/data.pkl") || len == 9) return false;
    return memchr(name, '/', len - 9) == NULL;
}

void zip_probe_scan(const amn_probe_data *pd, zip_probe *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *h = pd->head;
    if (pd->head_size >= EOCD_SIZE && memcmp(h, "PK\x05\x06", 4) == 0 && rd16(h + 10) == 0) {
        out->is_zip = out->empty = true;
        return;
    }
    if (pd->head_size < LFH_SIZE || !zip_is_local_header(h, pd->head_size)) return;
    out->is_zip = true;
    size_t nlen = rd16(h + 26);
    if (LFH_SIZE + nlen <= pd->head_size) {
        out->first_name = (const char *)h + LFH_SIZE;
        out->first_len = nlen;
    }
    const uint8_t *t = pd->tail;
    for (size_t i = 0; i + CDH_SIZE <= pd->tail_size; i++) {
        if (t[i] != 'P' || t[i + 1] != 'K' || t[i + 2] != 1 || t[i + 3] != 2) continue;
        size_t n = rd16(t + i + 28);
        if (i + CDH_SIZE + n > pd->tail_size) continue;
        const char *name = (const char *)t + i + CDH_SIZE;
        out->cd_seen++;
        if (zip_name_ends(name, n, ".npy")) out->cd_npy++;
        if (zip_name_is_pickle(name, n)) out->cd_pkl++;
    }
}

int zip_read_exact(const amn_source *src, uint64_t off, void *buf, size_t n, amn_error *err) {
    size_t done = 0;
    while (done < n) {
        size_t got = 0;
        int rc = src->read_at(src->ctx, off + done, (uint8_t *)buf + done, n - done, &got);
        if (rc != AMN_OK)
            return amn_error_set(err, rc, "%s: read failed at offset %llu", src_name(src),
                                 (unsigned long long)(off + done));
        if (got == 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: truncated (wanted %zu bytes at offset %llu)", src_name(src),
                                 n, (unsigned long long)off);
        done += got;
    }
    return AMN_OK;
}

void zip_dir_free(zip_dir *d) {
    if (!d) return;
    free(d->entries);
    free(d->pool);
    memset(d, 0, sizeof *d);
}

typedef struct eocd_info {
    uint64_t count;
    uint64_t cd_size;
    uint64_t cd_off;
    uint64_t limit; /* the directory must end at or before this offset */
} eocd_info;

/* How far back the end record is searched for: its comment may be 64 KiB,
 * and miniz (PyTorch's reader) looks up to 4 KiB further. */
#define EOCD_WINDOW (EOCD_SIZE + MAX_COMMENT + 4096u)

/* Find the one end record of the archive, then the ZIP64 one if its locator
 * sits right before it. Readers disagree on which of several signatures is
 * real (miniz and Python take the last, others the first whose comment
 * ends at EOF), so a second signature anywhere in the window, or bytes after
 * the record's comment, is refused rather than resolved. */
static int find_eocd(const amn_source *src, uint64_t size, eocd_info *out, amn_error *err) {
    if (size < EOCD_SIZE)
        return amn_error_set(err, AMN_E_PARSE, "%s: not a ZIP archive (file too short)",
                             src_name(src));
    uint64_t tail_len = EOCD_WINDOW;
    if (tail_len > size) tail_len = size;
    uint64_t tail_off = size - tail_len;
    uint8_t *tail = malloc((size_t)tail_len);
    if (!tail) return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
    int rc = zip_read_exact(src, tail_off, tail, (size_t)tail_len, err);
    if (rc != AMN_OK) {
        free(tail);
        return rc;
    }
    int64_t found = -1, other = -1;
    for (int64_t i = (int64_t)tail_len - EOCD_SIZE; i >= 0; i--) {
        const uint8_t *p = tail + i;
        if (p[0] != 'P' || p[1] != 'K' || p[2] != 5 || p[3] != 6) continue;
        if (found < 0) {
            found = i;
        } else {
            other = i;
            break;
        }
    }
    if (found < 0) {
        free(tail);
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: not a ZIP archive or truncated (no end of central directory)",
                             src_name(src));
    }
    if (other >= 0) {
        free(tail);
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: two end-of-central-directory records (at offsets "
                             "%llu and %llu); ZIP readers disagree on which one is real",
                             src_name(src), (unsigned long long)(tail_off + (uint64_t)other),
                             (unsigned long long)(tail_off + (uint64_t)found));
    }
    const uint8_t *e = tail + found;
    uint64_t eocd_pos = tail_off + (uint64_t)found;
    uint64_t end = (uint64_t)found + EOCD_SIZE + rd16(e + 20);
    if (end != tail_len) {
        free(tail);
        if (end > tail_len)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: truncated ZIP (end record comment runs past EOF)",
                                 src_name(src));
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: %llu bytes after the end of central directory "
                             "record",
                             src_name(src), (unsigned long long)(tail_len - end));
    }
    uint16_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    out->count = rd16(e + 10);
    out->cd_size = rd32(e + 12);
    out->cd_off = rd32(e + 16);
    out->limit = eocd_pos;
    unsigned on_disk = rd16(e + 8), in_all = rd16(e + 10);
    if (on_disk != in_all) {
        free(tail);
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: the end record counts %u entries on this disk "
                             "but %u in all",
                             src_name(src), on_disk, in_all);
    }
    bool have_loc = found >= EOCD64_LOC_SIZE && memcmp(e - EOCD64_LOC_SIZE, "PK\x06\x07", 4) == 0;
    if (have_loc) {
        uint64_t rec_off = rd64(e - EOCD64_LOC_SIZE + 8);
        free(tail);
        uint64_t loc_pos = eocd_pos - EOCD64_LOC_SIZE;
        if (rec_off > loc_pos || loc_pos - rec_off < EOCD64_SIZE)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: ZIP64 end record offset %llu lies outside the archive",
                                 src_name(src), (unsigned long long)rec_off);
        uint8_t r[EOCD64_SIZE];
        rc = zip_read_exact(src, rec_off, r, sizeof r, err);
        if (rc != AMN_OK) return rc;
        if (memcmp(r, "PK\x06\x06", 4) != 0)
            return amn_error_set(err, AMN_E_PARSE, "%s: bad ZIP64 end record signature",
                                 src_name(src));
        if (rd32(r + 16) != 0 || rd32(r + 20) != 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: multi-disk ZIP archives",
                                 src_name(src));
        uint64_t rec_len = rd64(r + 4);
        if (rec_len != loc_pos - rec_off - 12)
            return amn_error_set(err, AMN_E_DISALLOWED,
                                 "%s: ambiguous ZIP: the ZIP64 end record (%llu bytes at offset "
                                 "%llu) does not end at its locator",
                                 src_name(src), (unsigned long long)rec_len,
                                 (unsigned long long)rec_off);
        if (rd64(r + 24) != rd64(r + 32))
            return amn_error_set(err, AMN_E_DISALLOWED,
                                 "%s: ambiguous ZIP: the ZIP64 end record counts entries on this "
                                 "disk and in all differently",
                                 src_name(src));
        out->count = rd64(r + 32);
        out->cd_size = rd64(r + 40);
        out->cd_off = rd64(r + 48);
        out->limit = rec_off;
        return AMN_OK;
    }
    free(tail);
    if ((disk != 0 && disk != 0xffff) || (cd_disk != 0 && cd_disk != 0xffff))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: multi-disk ZIP archives", src_name(src));
    return AMN_OK;
}

/* Replace sentinel sizes/offset with the ZIP64 extra field's values. */
static int apply_zip64_extra(const uint8_t *x, size_t xlen, zip_entry *e, bool need_u, bool need_c,
                             bool need_o) {
    size_t pos = 0;
    while (pos + 4 <= xlen) {
        uint16_t id = rd16(x + pos), len = rd16(x + pos + 2);
        if (len > xlen - pos - 4) return -1;
        if (id == 1) {
            const uint8_t *f = x + pos + 4;
            size_t k = 0;
            if (need_u) {
                if (k + 8 > len) return -1;
                e->usize = rd64(f + k);
                k += 8;
            }
            if (need_c) {
                if (k + 8 > len) return -1;
                e->csize = rd64(f + k);
                k += 8;
            }
            if (need_o) {
                if (k + 8 > len) return -1;
                e->local_off = rd64(f + k);
            }
            return 0;
        }
        pos += 4 + (size_t)len;
    }
    return 0; /* no ZIP64 field: the sentinel values stand as they are */
}

/* The --max-ratio and --max-alloc caps on DEFLATE members, from the
 * directory alone (inflating never writes past a member's recorded size):
 * a zip bomb is refused before anything is allocated or inflated. The ratio
 * cap spares members of at most ratio_min_size bytes: what they expand to is
 * harmless whatever their ratio (64 MiB of zeros deflates about 1030:1). */
static int check_expansion(const amn_source *src, const amn_limits *lim, const zip_dir *d,
                           amn_error *err) {
    for (size_t i = 0; i < d->count; i++) {
        const zip_entry *e = &d->entries[i];
        if (e->method != ZIP_DEFLATED) continue;
        uint64_t most;
        if (lim->max_ratio && e->usize > lim->ratio_min_size &&
            (!amn_mul_u64(e->csize, lim->max_ratio, &most) || e->usize > most))
            return amn_error_set(err, AMN_E_LIMIT,
                                 "%s: entry '%s' expands %llu bytes to %llu, more than the "
                                 "%u:1 ratio cap for members over %llu bytes (--max-ratio)",
                                 src_name(src), e->name, (unsigned long long)e->csize,
                                 (unsigned long long)e->usize, lim->max_ratio,
                                 (unsigned long long)lim->ratio_min_size);
        if (lim->max_alloc_one && e->usize > lim->max_alloc_one)
            return amn_error_set(err, AMN_E_LIMIT,
                                 "%s: entry '%s' inflates to %llu bytes, more than the "
                                 "single-allocation cap of %llu (--max-alloc)",
                                 src_name(src), e->name, (unsigned long long)e->usize,
                                 (unsigned long long)lim->max_alloc_one);
    }
    return AMN_OK;
}

/* ---- one reading for every ZIP reader ------------------------------------
 * PyTorch reads archives with miniz, NumPy with Python's zipfile, and both
 * resolve ambiguities their own way: which end record, which of two
 * same-named members (miniz matches names case-insensitively), local or
 * central sizes, data hidden before, between or after the members. An
 * archive that two readers could see differently is refused: every byte
 * must belong to exactly one member (local header, data, data descriptor),
 * the central directory or the end records, and every name must be unique
 * even after ASCII case folding. */

static int fold_cmp(const zip_entry *a, const zip_entry *b) {
    size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a->name[i], y = (unsigned char)b->name[i];
        if (x >= 'A' && x <= 'Z') x = (unsigned char)(x + 32);
        if (y >= 'A' && y <= 'Z') y = (unsigned char)(y + 32);
        if (x != y) return x < y ? -1 : 1;
    }
    return a->name_len < b->name_len ? -1 : a->name_len > b->name_len;
}

static int cmp_fold(const void *a, const void *b, void *dir) {
    const zip_dir *d = dir;
    return fold_cmp(&d->entries[*(const size_t *)a], &d->entries[*(const size_t *)b]);
}

static int cmp_offset(const void *a, const void *b, void *dir) {
    const zip_dir *d = dir;
    uint64_t x = d->entries[*(const size_t *)a].local_off,
             y = d->entries[*(const size_t *)b].local_off;
    return x < y ? -1 : x > y;
}

static int check_names(const amn_source *src, const zip_dir *d, size_t *order, amn_error *err) {
    for (size_t i = 0; i < d->count; i++) order[i] = i;
    qsort_r(order, d->count, sizeof *order, cmp_fold, (void *)d);
    for (size_t i = 1; i < d->count; i++) {
        const zip_entry *a = &d->entries[order[i - 1]], *b = &d->entries[order[i]];
        if (fold_cmp(a, b) == 0)
            return amn_error_set(err, AMN_E_DISALLOWED,
                                 "%s: ambiguous ZIP: members '%s' and '%s' have the same name "
                                 "(ignoring case); readers pick different ones",
                                 src_name(src), a->name, b->name);
    }
    return AMN_OK;
}

static int check_method(const amn_source *src, const zip_entry *e, amn_error *err) {
    if (e->flags & 1u)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: entry '%s' is encrypted", src_name(src),
                             e->name);
    if (e->method != ZIP_STORED && e->method != ZIP_DEFLATED)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: entry '%s' uses compression method %u (only stored and "
                             "DEFLATE are supported)",
                             src_name(src), e->name, e->method);
    if (e->method == ZIP_STORED && e->csize != e->usize)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: stored entry '%s' has compressed size %llu != size %llu",
            src_name(src), e->name, (unsigned long long)e->csize, (unsigned long long)e->usize);
    /* DEFLATE expands at most 1032:1 (a 258-byte match in two bits). Readers
     * allocate the recorded size before inflating, so a larger claim would let
     * a tiny archive reserve gigabytes. */
    if (e->method == ZIP_DEFLATED && e->usize / DEFLATE_MAX_RATIO > e->csize)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: entry '%s': %llu compressed bytes cannot inflate to the recorded "
                             "%llu",
                             src_name(src), e->name, (unsigned long long)e->csize,
                             (unsigned long long)e->usize);
    return AMN_OK;
}

/* Read e's local header: it must agree with the directory (name, method,
 * flags, and CRC and sizes unless a data descriptor carries them). Sets
 * e->data_off and *end, the first byte after its data. */
static int read_local(const amn_source *src, zip_entry *e, uint64_t cd_off, uint8_t *buf,
                      uint64_t *end, amn_error *err) {
    uint8_t h[LFH_SIZE];
    if (e->local_off > cd_off || cd_off - e->local_off < LFH_SIZE)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: entry '%s': local header offset %llu lies past the data area",
                             src_name(src), e->name, (unsigned long long)e->local_off);
    int rc = zip_read_exact(src, e->local_off, h, sizeof h, err);
    if (rc != AMN_OK) return rc;
    if (memcmp(h, "PK\x03\x04", 4) != 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: entry '%s': bad local header at offset %llu",
                             src_name(src), e->name, (unsigned long long)e->local_off);
    size_t nlen = rd16(h + 26), xlen = rd16(h + 28);
    uint64_t data = e->local_off + LFH_SIZE + nlen + xlen; /* < 2^64: all terms small */
    if (data > cd_off)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: entry '%s': local header runs into the central directory",
                             src_name(src), e->name);
    if (!amn_range_ok(cd_off, data, e->csize))
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: entry '%s': data (%llu bytes at offset %llu) runs past the "
                             "data area",
                             src_name(src), e->name, (unsigned long long)e->csize,
                             (unsigned long long)data);
    /* A member no reader here can decode is refused as such first. */
    rc = check_method(src, e, err);
    if (rc != AMN_OK) return rc;
    const char *what = NULL;
    if (nlen == e->name_len) {
        rc = zip_read_exact(src, e->local_off + LFH_SIZE, buf, nlen + xlen, err);
        if (rc != AMN_OK) return rc;
        if (memcmp(buf, e->name, nlen) != 0) what = "name";
    } else {
        what = "name";
    }
    uint16_t flags = rd16(h + 6);
    if (!what && rd16(h + 8) != e->method) what = "compression method";
    if (!what && (flags & 0x0809u) != (e->flags & 0x0809u)) what = "flags";
    if (what)
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: the local header of '%s' (offset %llu) "
                             "disagrees with the central directory (%s)",
                             src_name(src), e->name, (unsigned long long)e->local_off, what);
    /* Sizes and CRC: a reader that streams local headers would take the
     * local ones. A mismatch is a corrupt entry (refused as malformed). */
    if (!(e->flags & 8u)) {
        zip_entry l = *e;
        l.crc32 = rd32(h + 14);
        l.csize = rd32(h + 18);
        l.usize = rd32(h + 22);
        if (apply_zip64_extra(buf + nlen, xlen, &l, l.usize == U32_SENTINEL,
                              l.csize == U32_SENTINEL, false) != 0)
            what = "bad ZIP64 extra field";
        else if (l.crc32 != e->crc32)
            what = "CRC-32";
        else if (l.csize != e->csize || l.usize != e->usize)
            what = "sizes";
        if (what)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: entry '%s': local header and central directory disagree "
                                 "(%s)",
                                 src_name(src), e->name, what);
    }
    e->data_off = data;
    *end = data + e->csize;
    return AMN_OK;
}

/* A data descriptor after the data: optional signature, CRC-32 and two
 * sizes of 4 or 8 bytes. */
static bool descriptor_len_ok(uint64_t gap) {
    return gap == 12 || gap == 16 || gap == 20 || gap == 24;
}

static int check_layout(const amn_source *src, zip_dir *d, size_t *order, amn_error *err) {
    uint8_t *buf = malloc(2 * 65536u);
    uint64_t *ends = malloc((d->count ? d->count : 1) * sizeof *ends);
    int rc = AMN_OK;
    if (!buf || !ends) {
        rc = amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
        goto done;
    }
    for (size_t i = 0; i < d->count && rc == AMN_OK; i++)
        rc = read_local(src, &d->entries[i], d->cd_offset, buf, &ends[i], err);
    if (rc != AMN_OK) goto done;
    for (size_t i = 0; i < d->count; i++) order[i] = i;
    qsort_r(order, d->count, sizeof *order, cmp_offset, d);
    uint64_t pos = 0;
    const zip_entry *prev = NULL;
    for (size_t k = 0; k <= d->count; k++) {
        const zip_entry *e = k < d->count ? &d->entries[order[k]] : NULL;
        uint64_t next = e ? e->local_off : d->cd_offset;
        if (next < pos) {
            rc = amn_error_set(err, AMN_E_DISALLOWED,
                               "%s: ambiguous ZIP: members '%s' and '%s' overlap", src_name(src),
                               prev ? prev->name : "?", e ? e->name : "(central directory)");
            goto done;
        }
        uint64_t gap = next - pos;
        if (gap && !(prev && (prev->flags & 8u) && descriptor_len_ok(gap))) {
            rc = amn_error_set(err, AMN_E_DISALLOWED,
                               "%s: ambiguous ZIP: %llu bytes at offset %llu belong to no member "
                               "(%s)",
                               src_name(src), (unsigned long long)gap, (unsigned long long)pos,
                               !prev ? "data before the first local header"
                               : e   ? "a gap between members"
                                     : "data between the members and the central directory");
            goto done;
        }
        if (e) {
            pos = ends[order[k]];
            prev = e;
        }
    }
done:
    free(buf);
    free(ends);
    return rc;
}

static int check_unambiguous(const amn_source *src, zip_dir *d, amn_error *err) {
    size_t *order = malloc((d->count ? d->count : 1) * sizeof *order);
    if (!order) return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
    int rc = check_names(src, d, order, err);
    if (rc == AMN_OK) rc = check_layout(src, d, order, err);
    free(order);
    return rc;
}

int zip_dir_read(const amn_source *src, const amn_limits *lim, zip_dir *out, amn_error *err) {
    memset(out, 0, sizeof *out);
    uint64_t size = src->size;
    if (size == UINT64_MAX)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: ZIP needs a source of known size",
                             src_name(src));
    eocd_info ei = {0, 0, 0, 0};
    int rc = find_eocd(src, size, &ei, err);
    if (rc != AMN_OK) return rc;
    if (ei.cd_off > ei.limit || ei.cd_size > ei.limit - ei.cd_off)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: central directory (offset %llu, %llu bytes) lies outside the "
                             "archive",
                             src_name(src), (unsigned long long)ei.cd_off,
                             (unsigned long long)ei.cd_size);
    if (ei.cd_off + ei.cd_size != ei.limit)
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: %llu bytes between the central directory and the "
                             "end record (Python's zipfile would shift every offset by them)",
                             src_name(src),
                             (unsigned long long)(ei.limit - ei.cd_off - ei.cd_size));
    if (ei.cd_size > lim->max_header_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "%s: central directory of %llu bytes exceeds %llu",
                             src_name(src), (unsigned long long)ei.cd_size,
                             (unsigned long long)lim->max_header_bytes);
    uint64_t max_entries = lim->max_tensors + 1024; /* pth adds a few records per archive */
    if (ei.count > max_entries)
        return amn_error_set(err, AMN_E_LIMIT, "%s: %llu ZIP entries exceed the limit of %llu",
                             src_name(src), (unsigned long long)ei.count,
                             (unsigned long long)max_entries);
    uint64_t min_cd;
    if (!amn_mul_u64(ei.count, CDH_SIZE, &min_cd) || min_cd > ei.cd_size)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: %llu entries cannot fit a %llu-byte central directory",
            src_name(src), (unsigned long long)ei.count, (unsigned long long)ei.cd_size);

    size_t cd_size = (size_t)ei.cd_size;
    uint8_t *cd = malloc(cd_size ? cd_size : 1);
    out->entries = calloc(ei.count ? (size_t)ei.count : 1, sizeof *out->entries);
    out->pool = malloc(cd_size + (size_t)ei.count + 1);
    if (!cd || !out->entries || !out->pool) {
        free(cd);
        zip_dir_free(out);
        return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
    }
    rc = zip_read_exact(src, ei.cd_off, cd, cd_size, err);
    if (rc != AMN_OK) goto fail;

    size_t pos = 0, pool_used = 0;
    for (uint64_t i = 0; i < ei.count; i++) {
        if (cd_size - pos < CDH_SIZE || memcmp(cd + pos, "PK\x01\x02", 4) != 0) {
            rc = amn_error_set(
                err, AMN_E_PARSE, "%s: bad central directory header %llu at offset %llu",
                src_name(src), (unsigned long long)i, (unsigned long long)(ei.cd_off + pos));
            goto fail;
        }
        const uint8_t *h = cd + pos;
        size_t nlen = rd16(h + 28), xlen = rd16(h + 30), clen = rd16(h + 32);
        if (cd_size - pos - CDH_SIZE < nlen + xlen + clen) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: central directory header %llu overruns the directory",
                               src_name(src), (unsigned long long)i);
            goto fail;
        }
        zip_entry *e = &out->entries[i];
        e->flags = rd16(h + 8);
        e->method = rd16(h + 10);
        e->crc32 = rd32(h + 16);
        e->csize = rd32(h + 20);
        e->usize = rd32(h + 24);
        e->local_off = rd32(h + 42);
        uint16_t disk = rd16(h + 34);
        if (disk != 0 && disk != 0xffff) {
            rc =
                amn_error_set(err, AMN_E_UNSUPPORTED, "%s: multi-disk ZIP archives", src_name(src));
            goto fail;
        }
        const uint8_t *name = h + CDH_SIZE;
        if (memchr(name, 0, nlen)) {
            rc = amn_error_set(err, AMN_E_PARSE, "%s: ZIP entry %llu has a NUL in its name",
                               src_name(src), (unsigned long long)i);
            goto fail;
        }
        memcpy(out->pool + pool_used, name, nlen);
        out->pool[pool_used + nlen] = '\0';
        e->name = out->pool + pool_used; /* pool never moves: allocated whole */
        e->name_len = nlen;
        pool_used += nlen + 1;
        if (apply_zip64_extra(name + nlen, xlen, e, e->usize == U32_SENTINEL,
                              e->csize == U32_SENTINEL, e->local_off == U32_SENTINEL) != 0) {
            rc = amn_error_set(err, AMN_E_PARSE, "%s: bad ZIP64 extra field in entry '%s'",
                               src_name(src), e->name);
            goto fail;
        }
        pos += CDH_SIZE + nlen + xlen + clen;
    }
    free(cd);
    cd = NULL;
    if (pos != cd_size) {
        rc = amn_error_set(err, AMN_E_DISALLOWED,
                           "%s: ambiguous ZIP: the central directory holds %llu bytes more than "
                           "its %llu counted entries",
                           src_name(src), (unsigned long long)(cd_size - pos),
                           (unsigned long long)ei.count);
        goto fail;
    }
    out->count = (size_t)ei.count;
    out->file_size = size;
    out->cd_offset = ei.cd_off;
    rc = check_expansion(src, lim, out, err);
    if (rc == AMN_OK) rc = check_unambiguous(src, out, err);
    if (rc != AMN_OK) zip_dir_free(out);
    return rc;
fail:
    free(cd);
    zip_dir_free(out);
    return rc;
}

const zip_entry *zip_dir_find(const zip_dir *d, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < d->count; i++)
        if (d->entries[i].name_len == n && memcmp(d->entries[i].name, name, n) == 0)
            return &d->entries[i];
    return NULL;
}

int zip_entry_data_offset(const amn_source *src, const zip_dir *d, const zip_entry *e,
                          uint64_t *out, amn_error *err) {
    (void)d; /* the layout check read every local header already */
    int rc = check_method(src, e, err);
    if (rc != AMN_OK) return rc;
    *out = e->data_off;
    return AMN_OK;
}

static int crc_verdict(const zip_entry *e, uint32_t crc, amn_error *err) {
    if (crc != e->crc32)
        return amn_error_set(err, AMN_E_PARSE, "entry '%s': CRC-32 mismatch (%08x, recorded %08x)",
                             e->name, (unsigned)crc, (unsigned)e->crc32);
    return AMN_OK;
}

int zip_inflate_each(const zip_entry *e, const uint8_t *src, const zip_window *o, amn_error *err) {
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
        return amn_error_set(err, AMN_E_NOMEM, "entry '%s': cannot start inflate", e->name);
    uint64_t in_left = e->csize, out_left = e->usize, pos = 0; /* pos: in the window */
    const uint8_t *in = src;
    uint32_t crc = 0;
    uint8_t spare = 0; /* an output byte; initialised for the analysers */
    int rc = AMN_OK;
    for (;;) {
        if (o->full && out_left && pos == o->size) { /* the window is full: empty it */
            crc = kit_crc32(crc, o->win, (size_t)pos);
            if ((rc = o->full(o->ctx, o->win, (size_t)pos, err)) != AMN_OK) break;
            pos = 0;
        }
        const uint64_t room = out_left < o->size - pos ? out_left : o->size - pos;
        uInt ai = in_left > ZCHUNK ? ZCHUNK : (uInt)in_left;
        uInt ao = room > ZCHUNK ? ZCHUNK : (uInt)room;
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = ai;
        /* With the output full, a 1-byte spare catches a stream that would
         * produce more than the recorded size. */
        z.next_out = ao ? o->win + pos : &spare;
        z.avail_out = ao ? ao : 1;
        uInt before_out = z.avail_out;
        int zr = inflate(&z, Z_NO_FLUSH);
        uInt used_in = ai - z.avail_in, made = before_out - z.avail_out;
        if (!ao && made) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "entry '%s': inflates to more than its recorded %llu bytes", e->name,
                               (unsigned long long)e->usize);
            break;
        }
        in += used_in;
        in_left -= used_in;
        if (ao) {
            pos += made;
            out_left -= made;
        }
        if (zr == Z_STREAM_END) {
            if (out_left != 0)
                rc = amn_error_set(
                    err, AMN_E_PARSE, "entry '%s': inflates to %llu bytes, %llu recorded", e->name,
                    (unsigned long long)(e->usize - out_left), (unsigned long long)e->usize);
            break;
        }
        if (zr == Z_OK) continue;
        if (zr == Z_BUF_ERROR && in_left == 0) {
            rc = amn_error_set(err, AMN_E_PARSE, "entry '%s': compressed data is truncated",
                               e->name);
            break;
        }
        if (zr == Z_BUF_ERROR && used_in == 0 && made == 0) {
            rc = amn_error_set(err, AMN_E_PARSE, "entry '%s': inflate made no progress", e->name);
            break;
        }
        if (zr == Z_BUF_ERROR) continue;
        rc = amn_error_set(err, zr == Z_MEM_ERROR ? AMN_E_NOMEM : AMN_E_PARSE,
                           "entry '%s': corrupt DEFLATE data (%s)", e->name,
                           z.msg ? z.msg : "inflate error");
        break;
    }
    inflateEnd(&z);
    if (rc != AMN_OK) return rc;
    crc = kit_crc32(crc, o->win, (size_t)pos);
    if (o->full && pos && (rc = o->full(o->ctx, o->win, (size_t)pos, err)) != AMN_OK) return rc;
    return crc_verdict(e, crc, err);
}

int zip_inflate_all(const zip_entry *e, const uint8_t *src, uint8_t *dst, amn_error *err) {
    const zip_window o = {dst, e->usize, NULL, NULL};
    return zip_inflate_each(e, src, &o, err);
}

static void crc_piece(void *ctx, const void *piece, size_t n) {
    uint32_t *crc = ctx;
    *crc = kit_crc32(*crc, piece, n);
}

int zip_check_crc_map(const zip_entry *e, const amn_map *map, uint64_t data_off, amn_error *err) {
    uint32_t crc = 0;
    int rc = amn_map_scan(map, data_off, e->usize, crc_piece, &crc, err);
    return rc != AMN_OK ? rc : crc_verdict(e, crc, err);
}

int zip_inflate_prefix(const amn_source *src, const zip_entry *e, uint64_t data_off, uint8_t *dst,
                       size_t want, size_t *got, amn_error *err) {
    *got = 0;
    if (want > UINT32_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "entry '%s': header prefix of %zu bytes", e->name,
                             want);
    if (e->method == ZIP_STORED) {
        size_t k = e->usize < want ? (size_t)e->usize : want;
        int rc = zip_read_exact(src, data_off, dst, k, err);
        if (rc == AMN_OK) *got = k;
        return rc;
    }
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK)
        return amn_error_set(err, AMN_E_NOMEM, "entry '%s': cannot start inflate", e->name);
    uint8_t *buf = malloc(INSPECT_CHUNK);
    if (!buf) {
        inflateEnd(&z);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    uint64_t in_pos = 0;
    int rc = AMN_OK;
    z.next_out = dst;
    z.avail_out = (uInt)want;
    while (z.avail_out > 0) {
        if (z.avail_in == 0) {
            if (in_pos >= e->csize) {
                rc = amn_error_set(err, AMN_E_PARSE, "entry '%s': compressed data is truncated",
                                   e->name);
                break;
            }
            size_t k =
                e->csize - in_pos > INSPECT_CHUNK ? INSPECT_CHUNK : (size_t)(e->csize - in_pos);
            rc = zip_read_exact(src, data_off + in_pos, buf, k, err);
            if (rc != AMN_OK) break;
            in_pos += k;
            z.next_in = buf;
            z.avail_in = (uInt)k;
        }
        int zr = inflate(&z, Z_NO_FLUSH);
        if (zr == Z_STREAM_END) break;
        if (zr != Z_OK && zr != Z_BUF_ERROR) {
            rc = amn_error_set(err, AMN_E_PARSE, "entry '%s': corrupt DEFLATE data (%s)", e->name,
                               z.msg ? z.msg : "inflate error");
            break;
        }
    }
    *got = want - z.avail_out;
    inflateEnd(&z);
    free(buf);
    return rc;
}

int zip_read_member(const amn_source *src, const zip_dir *d, const zip_entry *e, uint64_t cap,
                    uint8_t **out, amn_error *err) {
    *out = NULL;
    uint64_t off;
    int rc = zip_entry_data_offset(src, d, e, &off, err);
    if (rc != AMN_OK) return rc;
    if (e->usize > cap || e->usize > SIZE_MAX - 1)
        return amn_error_set(err, AMN_E_LIMIT, "%s: entry '%s' of %llu bytes exceeds %llu",
                             src_name(src), e->name, (unsigned long long)e->usize,
                             (unsigned long long)cap);
    uint8_t *buf = malloc((size_t)e->usize + 1);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
    if (e->method == ZIP_STORED) {
        rc = zip_read_exact(src, off, buf, (size_t)e->usize, err);
    } else {
        /* A DEFLATE stream never needs much more than its output, so a
         * compressed size far past the cap is a lie, not data. */
        if (e->csize > cap + cap / 8 + 4096 || e->csize > SIZE_MAX - 1) {
            free(buf);
            return amn_error_set(err, AMN_E_LIMIT,
                                 "%s: entry '%s': %llu compressed bytes exceed the limit",
                                 src_name(src), e->name, (unsigned long long)e->csize);
        }
        uint8_t *cbuf = malloc((size_t)e->csize + 1);
        if (!cbuf) {
            free(buf);
            return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", src_name(src));
        }
        rc = zip_read_exact(src, off, cbuf, (size_t)e->csize, err);
        if (rc == AMN_OK) rc = zip_inflate_all(e, cbuf, buf, err);
        free(cbuf);
    }
    if (rc != AMN_OK) {
        free(buf);
        return rc;
    }
    buf[e->usize] = 0;
    *out = buf;
    return AMN_OK;
}
