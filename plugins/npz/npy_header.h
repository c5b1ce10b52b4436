/* npy_header.h — the NPY preamble and its Python-literal header dict.
 *
 * An NPY file is "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), a
 * header length (u16 for 1.x, u32 after), then a dict literal such as
 * {'descr': '<f4', 'fortran_order': False, 'shape': (8,), }, then the data.
 * Only the three keys NumPy writes are accepted, and only plain numeric,
 * bool and 2-byte void (JAX / ml_dtypes bfloat16) descrs: an object array
 * would need pickle and is refused.
 */
#ifndef AMN_NPY_HEADER_H
#define AMN_NPY_HEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/tensor.h"

#define NPY_MAGIC_LEN    6
#define NPY_PREAMBLE_MAX 12 /* magic, version, u32 length */
/* Longest member name the reader takes (and the writer writes), NUL included. */
#define NPZ_NAME_MAX 4096

typedef struct npy_header {
    unsigned major, minor;
    uint64_t data_offset; /* preamble + header: where the array bytes start */
    amn_dtype dtype;
    bool big_endian; /* only meaningful for multi-byte dtypes */
    bool fortran_order;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    uint64_t numel;
    uint64_t nbytes;
    char descr[16];
} npy_header;

/* True when p (n >= 6 bytes) starts with the NPY magic. */
bool npy_has_magic(const uint8_t *p, size_t n);

/* Read the preamble from the first n bytes: *data_offset gets where the
 * header dict ends. Needs n >= 12 (or the whole file when shorter). */
int npy_read_preamble(const uint8_t *p, size_t n, const char *name, unsigned *major,
                      unsigned *minor, uint64_t *data_offset, amn_error *err);

/* Parse the whole header (p holds at least data_offset bytes) into h.
 * `name` names the array in messages. */
int npy_parse_header(const uint8_t *p, size_t n, const char *name, npy_header *h, amn_error *err);

/* Fill the tensor's dtype, shape, nbytes, flags and strides from h
 * (fortran_order becomes a strided view; '>' becomes BIG_ENDIAN). */
void npy_header_to_tensor(const npy_header *h, amn_tensor *t);

/* The writer (npz_writer.c). */
#include "amn/format.h"
extern const amn_writer npz_writer;

#endif
