/* npy_header.c — a strict parser for the header dict NumPy writes. It never
 * evaluates anything: it recognises string, bool and tuple-of-int literals
 * and nothing else. */
#include "npy_header.h"

#include <string.h>

#include "amn/checked.h"

static const uint8_t npy_magic[NPY_MAGIC_LEN] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

bool npy_has_magic(const uint8_t *p, size_t n) {
    return n >= NPY_MAGIC_LEN && memcmp(p, npy_magic, NPY_MAGIC_LEN) == 0;
}

int npy_read_preamble(const uint8_t *p, size_t n, const char *name, unsigned *major,
                      unsigned *minor, uint64_t *data_offset, amn_error *err) {
    if (!npy_has_magic(p, n))
        return amn_error_set(err, AMN_E_PARSE, "'%s': not an NPY array (bad magic)", name);
    if (n < 10) return amn_error_set(err, AMN_E_PARSE, "'%s': NPY preamble truncated", name);
    *major = p[6];
    *minor = p[7];
    if (*major == 1) {
        *data_offset = 10u + (uint64_t)(p[8] | p[9] << 8);
    } else if (*major == 2 || *major == 3) {
        if (n < 12) return amn_error_set(err, AMN_E_PARSE, "'%s': NPY preamble truncated", name);
        uint32_t len =
            (uint32_t)p[8] | (uint32_t)p[9] << 8 | (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
        *data_offset = 12u + (uint64_t)len;
    } else {
        return amn_error_set(err, AMN_E_UNSUPPORTED, "'%s': NPY format version %u.%u", name, *major,
                             *minor);
    }
    if (*minor != 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "'%s': NPY format version %u.%u", name, *major,
                             *minor);
    return AMN_OK;
}

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes (NumPy's keys and descrs have none). */
static bool read_str(cursor *c, const char **s, size_t *len) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\') return false;
        c->p++;
    }
    if (c->p >= c->end) return false;
    *s = start;
    *len = (size_t)(c->p - start);
    c->p++;
    return true;
}

static bool read_word(cursor *c, const char *w) {
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, w, n) != 0) return false;
    c->p += n;
    return true;
}

static bool read_uint(cursor *c, uint64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return false;
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (!amn_mul_u64(x, 10, &x) || !amn_add_u64(x, (uint64_t)(*c->p - '0'), &x)) return false;
        c->p++;
    }
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++; /* Python 2 long */
    *v = x;
    return true;
}

static int parse_descr(const char *s, size_t len, const char *name, npy_header *h, amn_error *err) {
    if (len == 0 || len >= sizeof h->descr)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "'%s': NPY descr of length %zu", name, len);
    memcpy(h->descr, s, len);
    h->descr[len] = '\0';
    const char *d = h->descr;
    char order = d[0];
    if (order == '<' || order == '>' || order == '|' || order == '=')
        d++;
    else
        order = '|';
    h->big_endian = order == '>';
    static const struct {
        const char *code;
        amn_dtype dtype;
    } table[] = {
        {"b1", AMN_DTYPE_BOOL},
        {"i1", AMN_DTYPE_I8},
        {"u1", AMN_DTYPE_U8},
        {"i2", AMN_DTYPE_I16},
        {"u2", AMN_DTYPE_U16},
        {"i4", AMN_DTYPE_I32},
        {"u4", AMN_DTYPE_U32},
        {"i8", AMN_DTYPE_I64},
        {"u8", AMN_DTYPE_U64},
        {"f2", AMN_DTYPE_F16},
        {"f4", AMN_DTYPE_F32},
        {"f8", AMN_DTYPE_F64},
        {"c8", AMN_DTYPE_C64},
        {"c16", AMN_DTYPE_C128},
        /* ml_dtypes' bfloat16 has no NumPy type code: np.save writes it as an
         * anonymous 2-byte void, which JAX checkpoints hold. */
        {"V2", AMN_DTYPE_BF16},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(d, table[i].code) == 0) {
            h->dtype = table[i].dtype;
            return AMN_OK;
        }
    }
    if (d[0] == 'O')
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "'%s': object array (descr '%s') needs pickle; refused", name,
                             h->descr);
    return amn_error_set(err, AMN_E_UNSUPPORTED, "'%s': NPY dtype '%s' is not supported", name,
                         h->descr);
}

static int parse_shape(cursor *c, const char *name, npy_header *h, amn_error *err) {
    if (!eat(c, '('))
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY shape is not a tuple", name);
    h->ndim = 0;
    for (;;) {
        if (eat(c, ')')) break;
        uint64_t v;
        if (!read_uint(c, &v))
            return amn_error_set(err, AMN_E_PARSE, "'%s': bad dimension in NPY shape", name);
        if (h->ndim == AMN_MAX_DIMS)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "'%s': more than %d dimensions", name,
                                 AMN_MAX_DIMS);
        h->shape[h->ndim++] = v;
        if (eat(c, ')')) break;
        if (!eat(c, ',')) return amn_error_set(err, AMN_E_PARSE, "'%s': bad NPY shape", name);
    }
    return AMN_OK;
}

int npy_parse_header(const uint8_t *p, size_t n, const char *name, npy_header *h, amn_error *err) {
    memset(h, 0, sizeof *h);
    int rc = npy_read_preamble(p, n, name, &h->major, &h->minor, &h->data_offset, err);
    if (rc != AMN_OK) return rc;
    if (h->data_offset > n)
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY header (%llu bytes) truncated", name,
                             (unsigned long long)h->data_offset);
    size_t start = h->major == 1 ? 10 : 12;
    cursor c = {(const char *)p + start, (const char *)p + h->data_offset};
    if (!eat(&c, '{'))
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY header is not a dict", name);
    bool have_descr = false, have_order = false, have_shape = false;
    for (;;) {
        if (eat(&c, '}')) break;
        const char *key;
        size_t klen;
        if (!read_str(&c, &key, &klen) || !eat(&c, ':'))
            return amn_error_set(err, AMN_E_PARSE, "'%s': bad key in NPY header", name);
        if (klen == 5 && memcmp(key, "descr", 5) == 0 && !have_descr) {
            const char *s;
            size_t len;
            skip_ws(&c);
            if (c.p < c.end && *c.p == '[')
                return amn_error_set(err, AMN_E_UNSUPPORTED,
                                     "'%s': structured NPY dtypes are not supported", name);
            if (!read_str(&c, &s, &len))
                return amn_error_set(err, AMN_E_PARSE, "'%s': bad NPY descr", name);
            rc = parse_descr(s, len, name, h, err);
            if (rc != AMN_OK) return rc;
            have_descr = true;
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0 && !have_order) {
            if (read_word(&c, "True"))
                h->fortran_order = true;
            else if (read_word(&c, "False"))
                h->fortran_order = false;
            else
                return amn_error_set(err, AMN_E_PARSE, "'%s': bad NPY fortran_order", name);
            have_order = true;
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0 && !have_shape) {
            rc = parse_shape(&c, name, h, err);
            if (rc != AMN_OK) return rc;
            have_shape = true;
        } else {
            return amn_error_set(err, AMN_E_PARSE, "'%s': unexpected key '%.*s' in NPY header",
                                 name, (int)(klen > 64 ? 64 : klen), key);
        }
        if (eat(&c, '}')) break;
        if (!eat(&c, ',')) return amn_error_set(err, AMN_E_PARSE, "'%s': bad NPY header", name);
    }
    if (!have_descr || !have_order || !have_shape)
        return amn_error_set(err, AMN_E_PARSE,
                             "'%s': NPY header lacks descr, fortran_order or shape", name);
    /* What follows the dict is padding: spaces and a final newline. */
    skip_ws(&c);
    if (c.p != c.end)
        return amn_error_set(err, AMN_E_PARSE, "'%s': junk after the NPY header dict", name);
    uint64_t numel = 1;
    for (uint32_t i = 0; i < h->ndim; i++)
        if (!amn_mul_u64(numel, h->shape[i], &numel))
            return amn_error_set(err, AMN_E_PARSE, "'%s': NPY shape overflows", name);
    if (numel > (uint64_t)INT64_MAX)
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY shape overflows", name);
    h->numel = numel;
    if (!amn_mul_u64(numel, amn_dtype_size(h->dtype), &h->nbytes))
        return amn_error_set(err, AMN_E_PARSE, "'%s': NPY array size overflows", name);
    return AMN_OK;
}

void npy_header_to_tensor(const npy_header *h, amn_tensor *t) {
    t->dtype = h->dtype;
    t->ndim = h->ndim;
    for (uint32_t i = 0; i < h->ndim; i++) t->shape[i] = h->shape[i];
    t->nbytes = h->nbytes;
    t->flags = 0;
    if (h->big_endian && amn_dtype_size(h->dtype) > 1) t->flags |= AMN_TENSOR_BIG_ENDIAN;
    if (h->fortran_order && h->ndim > 1 && h->numel != 0) {
        /* Column-major: the first index varies fastest. Products cannot
         * overflow: they are partial products of numel, which is not 0 (an
         * empty array has no layout, and its other dimensions may be huge). */
        int64_t s = 1;
        for (uint32_t i = 0; i < h->ndim; i++) {
            t->strides[i] = s;
            s *= (int64_t)(h->shape[i] ? h->shape[i] : 1);
        }
        t->flags |= AMN_TENSOR_STRIDED;
    }
}
