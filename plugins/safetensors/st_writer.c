/* Streaming safetensors writer. The header is byte-identical to what the
 * reference `safetensors` library's save_file writes for the same tensors:
 * tensors ordered by dtype (descending, in safetensors' Dtype enum order) then
 * name, compact JSON with __metadata__ first, padded with spaces to a
 * multiple of 8. The core then streams each tensor's bytes in that order. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "st_internal.h"

typedef struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n + 1) nc *= 2;
        char *p = realloc(b->p, nc);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(strbuf *b, const char *s) {
    sb_put(b, s, strlen(s));
}

/* JSON string the way serde_json escapes it. */
static void sb_json_string(strbuf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\b':
            esc = "\\b";
            break;
        case '\f':
            esc = "\\f";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = '\0';
                esc = u;
            }
        }
        if (!esc) continue;
        sb_put(b, s + run, i - run);
        sb_str(b, esc);
        run = i + 1;
    }
    sb_put(b, s + run, n - run);
    sb_put(b, "\"", 1);
}

/* Position in safetensors' Dtype enum (BOOL, F4, F6_E2M3, F6_E3M2, U8, I8,
 * F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, C64, F64,
 * I64, U64), which orders the data area. */
static int dtype_rank(amn_dtype t) {
    switch (t) {
    case AMN_DTYPE_BOOL:
        return 0;
    case AMN_DTYPE_U8:
        return 4;
    case AMN_DTYPE_I8:
        return 5;
    case AMN_DTYPE_F8_E5M2:
        return 6;
    case AMN_DTYPE_F8_E4M3:
        return 7;
    case AMN_DTYPE_I16:
        return 9;
    case AMN_DTYPE_U16:
        return 10;
    case AMN_DTYPE_F16:
        return 11;
    case AMN_DTYPE_BF16:
        return 12;
    case AMN_DTYPE_I32:
        return 13;
    case AMN_DTYPE_U32:
        return 14;
    case AMN_DTYPE_F32:
        return 15;
    case AMN_DTYPE_C64:
        return 16;
    case AMN_DTYPE_F64:
        return 17;
    case AMN_DTYPE_I64:
        return 18;
    case AMN_DTYPE_U64:
        return 19;
    default:
        return -1;
    }
}

static int cmp_order(const void *a, const void *b, void *ctx) {
    const amn_out_tensor *const *base = ctx;
    const amn_out_tensor *x = base[*(const size_t *)a], *y = base[*(const size_t *)b];
    int rx = dtype_rank(x->dtype), ry = dtype_rank(y->dtype);
    if (rx != ry) return ry - rx;
    return strcmp(x->name, y->name);
}

/* GGUF-style typed key/values that fit a string map: scalars and strings. */
static bool kv_to_string(const amn_kv *kv, char *buf, size_t size, const char **out, size_t *len) {
    const void *d = kv->data;
    switch (kv->type) {
    case AMN_KV_STRING:
        *out = ((const amn_str *)d)->ptr;
        *len = ((const amn_str *)d)->len;
        return true;
    case AMN_KV_U8:
        snprintf(buf, size, "%u", *(const uint8_t *)d);
        break;
    case AMN_KV_I8:
        snprintf(buf, size, "%d", *(const int8_t *)d);
        break;
    case AMN_KV_U16:
        snprintf(buf, size, "%u", *(const uint16_t *)d);
        break;
    case AMN_KV_I16:
        snprintf(buf, size, "%d", *(const int16_t *)d);
        break;
    case AMN_KV_U32:
        snprintf(buf, size, "%" PRIu32, *(const uint32_t *)d);
        break;
    case AMN_KV_I32:
        snprintf(buf, size, "%" PRId32, *(const int32_t *)d);
        break;
    case AMN_KV_U64:
        snprintf(buf, size, "%" PRIu64, *(const uint64_t *)d);
        break;
    case AMN_KV_I64:
        snprintf(buf, size, "%" PRId64, *(const int64_t *)d);
        break;
    case AMN_KV_F32:
        snprintf(buf, size, "%.9g", (double)*(const float *)d);
        break;
    case AMN_KV_F64:
        snprintf(buf, size, "%.17g", *(const double *)d);
        break;
    case AMN_KV_BOOL:
        snprintf(buf, size, "%s", *(const uint8_t *)d ? "true" : "false");
        break;
    default:
        return false;
    }
    *out = buf;
    *len = strlen(buf);
    return true;
}

static void write_metadata(strbuf *b, const amn_model *src) {
    size_t nm = src ? amn_model_meta_count(src) : 0, nk = src ? amn_model_kv_count(src) : 0;
    bool first = true;
    for (size_t i = 0; i < nm + nk; i++) {
        const char *key, *val;
        size_t vlen;
        char num[64];
        if (i < nm) {
            key = amn_model_meta_key(src, i);
            val = amn_model_meta_value(src, i);
            vlen = strlen(val);
        } else {
            const amn_kv *kv = amn_model_kv(src, i - nm);
            key = kv->key;
            if (amn_model_get_meta(src, key) || !kv_to_string(kv, num, sizeof num, &val, &vlen))
                continue;
        }
        sb_str(b, first ? "{\"__metadata__\":{" : ",");
        first = false;
        sb_json_string(b, key, strlen(key));
        sb_put(b, ":", 1);
        sb_json_string(b, val, vlen);
    }
    sb_str(b, first ? "{" : "},");
}

static int begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    *state = NULL;
    for (size_t i = 0; i < a->n_tensors; i++) {
        if (dtype_rank(a->tensors[i]->dtype) < 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "safetensors cannot store tensor %s (%s)",
                                 a->tensors[i]->name, amn_dtype_name(a->tensors[i]->dtype));
        order[i] = i;
    }
    qsort_r(order, a->n_tensors, sizeof *order, cmp_order, (void *)a->tensors);
    strbuf b = {0};
    write_metadata(&b, a->source);
    uint64_t off = 0;
    char num[96];
    for (size_t k = 0; k < a->n_tensors; k++) {
        const amn_out_tensor *t = a->tensors[order[k]];
        if (k) sb_put(&b, ",", 1);
        sb_json_string(&b, t->name, strlen(t->name));
        sb_str(&b, ":{\"dtype\":\"");
        sb_str(&b, amn_dtype_name(t->dtype));
        sb_str(&b, "\",\"shape\":[");
        for (uint32_t d = 0; d < t->ndim; d++) {
            snprintf(num, sizeof num, "%s%" PRIu64, d ? "," : "", t->shape[d]);
            sb_str(&b, num);
        }
        uint64_t end;
        if (!amn_add_u64(off, t->nbytes, &end)) {
            free(b.p);
            return amn_error_set(err, AMN_E_LIMIT, "output larger than 2^64 bytes");
        }
        snprintf(num, sizeof num, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, end);
        sb_str(&b, num);
        off = end;
    }
    sb_put(&b, "}", 1);
    while (b.n % 8) sb_put(&b, " ", 1);
    if (b.oom) {
        free(b.p);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)b.n >> (8 * i));
    int rc = amn_sink_write(a->sink, len, 8, err);
    if (!rc) rc = amn_sink_write(a->sink, b.p, b.n, err);
    free(b.p);
    return rc;
}

static int finish(void *state, amn_error *err) {
    (void)state;
    (void)err;
    return AMN_OK;
}

static void abort_write(void *state) {
    (void)state;
}

const amn_writer st_writer = {
    .struct_size = sizeof(amn_writer),
    .dtypes = (1ull << AMN_DTYPE_BOOL) | (1ull << AMN_DTYPE_U8) | (1ull << AMN_DTYPE_I8) |
              (1ull << AMN_DTYPE_U16) | (1ull << AMN_DTYPE_I16) | (1ull << AMN_DTYPE_U32) |
              (1ull << AMN_DTYPE_I32) | (1ull << AMN_DTYPE_U64) | (1ull << AMN_DTYPE_I64) |
              (1ull << AMN_DTYPE_F8_E4M3) | (1ull << AMN_DTYPE_F8_E5M2) | (1ull << AMN_DTYPE_F16) |
              (1ull << AMN_DTYPE_BF16) | (1ull << AMN_DTYPE_F32) | (1ull << AMN_DTYPE_F64) |
              (1ull << AMN_DTYPE_C64), /* no C128: safetensors has no complex128 */
    .begin = begin,
    .finish = finish,
    .abort = abort_write,
};
