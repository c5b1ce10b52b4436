/* Tensor views: size arithmetic, bounds validation, and materialising the
 * C-order little-endian bytes of strided or big-endian views. */
#include <stdio.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/tensor.h"

bool amn_tensor_numel(const amn_tensor *t, uint64_t *out) {
    uint64_t n = 1;
    for (uint32_t i = 0; i < t->ndim; i++)
        if (!amn_mul_u64(n, t->shape[i], &n)) return false;
    *out = n;
    return true;
}

bool amn_tensor_is_plain(const amn_tensor *t) {
    if (t->flags & AMN_TENSOR_BIG_ENDIAN && amn_dtype_size(t->dtype) > 1) return false;
    if (!(t->flags & AMN_TENSOR_STRIDED)) return true;
    /* A strided view whose strides are the C-order ones is plain too. */
    int64_t expect = 1;
    for (uint32_t i = t->ndim; i-- > 0;) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= (int64_t)t->shape[i];
    }
    return true;
}

int amn_tensor_validate(const amn_tensor *t, amn_error *err) {
    const char *name = t->name ? t->name : "(unnamed)";
    if (t->ndim > AMN_MAX_DIMS)
        return amn_error_set(err, AMN_E_LIMIT, "tensor %s: %u dimensions (max %d)", name, t->ndim,
                             AMN_MAX_DIMS);
    uint64_t numel;
    if (!amn_tensor_numel(t, &numel))
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: shape product overflows", name);
    if (t->dtype == AMN_DTYPE_INVALID || t->dtype >= AMN_DTYPE_COUNT)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: invalid dtype", name);
    const uint64_t es = amn_dtype_size(t->dtype);
    if (t->dtype != AMN_DTYPE_BLOCK) {
        uint64_t nb;
        if (!amn_mul_u64(numel, es, &nb))
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: byte size overflows", name);
        if (nb != t->nbytes)
            return amn_error_set(err, AMN_E_PARSE,
                                 "tensor %s: %llu bytes do not match shape x %s (%llu bytes)", name,
                                 (unsigned long long)t->nbytes, amn_dtype_name(t->dtype),
                                 (unsigned long long)nb);
    } else if (t->flags & AMN_TENSOR_STRIDED) {
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: block data cannot be strided", name);
    }
    if (!t->data || numel == 0) return AMN_OK;
    if (!(t->flags & AMN_TENSOR_STRIDED)) {
        if (t->nbytes > t->extent)
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: data runs past its storage", name);
        return AMN_OK;
    }
    uint64_t last = 0; /* element offset of the last element */
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t span;
        if (t->strides[i] < 0)
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: negative stride", name);
        if (!amn_mul_u64(t->shape[i] - 1, (uint64_t)t->strides[i], &span) ||
            !amn_add_u64(last, span, &last))
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: strides overflow", name);
    }
    uint64_t need;
    if (!amn_add_u64(last, 1, &need) || !amn_mul_u64(need, es, &need) || need > t->extent)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: view reaches past its storage", name);
    return AMN_OK;
}

static void swap_elems(uint8_t *p, uint64_t n, size_t es) {
    for (uint64_t i = 0; i < n; i++, p += es)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            uint8_t tmp = p[a];
            p[a] = p[b];
            p[b] = tmp;
        }
}

int amn_tensor_read(const amn_tensor *t, uint64_t off, void *dst, uint64_t n, amn_error *err) {
    if (!t->data)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: no data (header only)", t->name);
    uint64_t end;
    if (!amn_add_u64(off, n, &end) || end > t->nbytes)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: read past its end", t->name);
    const size_t es = t->dtype == AMN_DTYPE_BLOCK ? 1 : amn_dtype_size(t->dtype);
    if (off % es || n % es)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: unaligned read", t->name);
    uint8_t *out = dst;
    if (n == 0) return AMN_OK; /* also spares the index walk a zero dimension */
    if (!(t->flags & AMN_TENSOR_STRIDED) || amn_tensor_is_plain(t)) {
        memcpy(out, (const uint8_t *)t->data + off, n);
    } else {
        /* Walk the multi-index of element `first` in C order, copying runs of
         * the innermost dimension when it is contiguous. */
        uint64_t idx[AMN_MAX_DIMS] = {0}, first = off / es, count = n / es;
        for (uint32_t i = t->ndim; i-- > 0;) {
            idx[i] = first % t->shape[i];
            first /= t->shape[i];
        }
        const uint32_t last = t->ndim - 1;
        while (count) {
            uint64_t pos = 0;
            for (uint32_t i = 0; i < t->ndim; i++) pos += idx[i] * (uint64_t)t->strides[i];
            uint64_t run = 1;
            if (t->strides[last] == 1) {
                run = t->shape[last] - idx[last];
                if (run > count) run = count;
            }
            memcpy(out, (const uint8_t *)t->data + pos * es, run * es);
            out += run * es;
            count -= run;
            idx[last] += run;
            for (uint32_t i = last; i > 0 && idx[i] >= t->shape[i]; i--) {
                idx[i] = 0;
                idx[i - 1]++;
            }
        }
    }
    if (t->flags & AMN_TENSOR_BIG_ENDIAN && es > 1) {
        /* A complex element is two floats, each swapped on its own. */
        const size_t unit = t->dtype == AMN_DTYPE_C64 || t->dtype == AMN_DTYPE_C128 ? es / 2 : es;
        swap_elems(dst, n / unit, unit);
    }
    return AMN_OK;
}

char *amn_shape_format(const amn_tensor *t, char *buf, size_t size) {
    size_t used = 0;
    used += (size_t)snprintf(buf, size, "[");
    for (uint32_t i = 0; i < t->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%llu", i ? ", " : "",
                                 (unsigned long long)t->shape[i]);
    if (used < size) snprintf(buf + used, size - used, "]");
    return buf;
}
