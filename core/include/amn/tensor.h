/* amn/tensor.h — a tensor as a parsed file describes it: a view, never a copy. */
#ifndef AMN_TENSOR_H
#define AMN_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMN_MAX_DIMS 8

/* True when *p (a struct with struct_size) is large enough to hold `field`. */
#define AMN_HAS_FIELD(p, type, field)                                                              \
    ((p)->struct_size >= offsetof(type, field) + sizeof(((type *)0)->field))

enum {
    AMN_TENSOR_BIG_ENDIAN = 1u << 0, /* elements stored most significant byte first */
    AMN_TENSOR_STRIDED = 1u << 1,    /* `strides` is meaningful (else C-contiguous) */
};

/* ABI: struct_size first. A plugin sets it to sizeof(amn_tensor) as it was
 * built (`amn_tensor t = {.struct_size = sizeof t, ...}`); the core reads only
 * the fields that size covers and zero-fills the rest, so later ABI minors
 * may append fields. Tensors the core hands out (amn_model_tensor) carry the
 * core's size: check it (AMN_HAS_FIELD) before reading a field newer than
 * the plugin's own minimum ABI. */
typedef struct amn_tensor {
    uint32_t struct_size;
    const char *name;
    amn_dtype dtype;
    uint32_t ndim; /* 0 = scalar */
    uint64_t shape[AMN_MAX_DIMS];
    /* Logical size: product(shape) * dtype size, or, for AMN_DTYPE_BLOCK, the
     * encoded byte size of the whole tensor. */
    uint64_t nbytes;
    /* The first element. NULL when only the header was read (inspect). For a
     * strided view, elements live at data + sum(i_k * strides[k]) * size.
     * data need not be aligned for its dtype (safetensors does not promise
     * it): code that loads through typed pointers checks and copies. */
    const void *data;
    /* Bytes readable from `data`: bounds every strided access. */
    uint64_t extent;
    /* Offset of the data in the file, for reporting (inspect). */
    uint64_t file_offset;
    int64_t strides[AMN_MAX_DIMS]; /* in elements, >= 0; used with AMN_TENSOR_STRIDED */
    uint32_t flags;
    /* For AMN_DTYPE_BLOCK: the family's type id (GGUF: ggml type) and its name. */
    uint32_t encoding;
    const char *encoding_name;
    /* Appended (read it after AMN_HAS_FIELD): which file of a model made of
     * several holds the data, numbered from 0 in the model's order (the
     * shards of a split GGUF, 0 for shard 1); 0 for a model of one file.
     * A core that predates the field ignores it (the model reads as one
     * file to `--keep-split`). */
    uint32_t shard;
} amn_tensor;

/* product(shape) into *out; false on overflow. */
AMN_API bool amn_tensor_numel(const amn_tensor *t, uint64_t *out);

/* True when the bytes at `data` are already the little-endian C-order bytes. */
AMN_API bool amn_tensor_is_plain(const amn_tensor *t);

/* Copy logical bytes [off, off + n) of t (C order, little-endian) into dst,
 * gathering strided views and swapping big-endian elements. off and n must be
 * multiples of the element size. */
AMN_API int amn_tensor_read(const amn_tensor *t, uint64_t off, void *dst, uint64_t n,
                            amn_error *err);

/* Check that every element a strided/plain view addresses lies in `extent`
 * (AMN_E_PARSE naming the tensor if not). Called by amn_model_add_tensor. */
AMN_API int amn_tensor_validate(const amn_tensor *t, amn_error *err);

/* "[4096, 11008]" into buf; returns buf. */
AMN_API char *amn_shape_format(const amn_tensor *t, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
