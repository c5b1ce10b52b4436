/* Dequantization of GGUF tensor data, bit-exact with ggml's dequantize_row_*
 * (and gguf-py): every value is computed in binary32 in ggml's operation order,
 * then rounded once to the output dtype. */
#ifndef AMN_GGUF_DEQUANT_H
#define AMN_GGUF_DEQUANT_H

#include <stdint.h>

#include "amn/dtype.h"
#include "amn/simd.h"

/* Decode n_elems elements of ggml_type, stored back to back as whole blocks
 * at `blocks` (gguf_type_nbytes(n_elems) readable bytes), into dst as `out`
 * (F32, F16 or BF16; n_elems * its size writable bytes, any alignment).
 * Returns AMN_OK; AMN_E_UNSUPPORTED for a type with no kernel; AMN_E_INVALID
 * for another out dtype or an n_elems that is not a whole number of blocks.
 * The vector path is chosen with amn_simd_level(); all paths give the same
 * bytes. Reentrant. */
int gguf_dequantize(uint32_t ggml_type, const void *blocks, uint64_t n_elems, amn_dtype out,
                    void *dst);

/* Same on a given path (clamped to what the CPU offers; a type without a
 * kernel on that path takes the next lower one): for tests and benchmarks. */
int gguf_dequantize_simd(uint32_t ggml_type, const void *blocks, uint64_t n_elems, amn_dtype out,
                         void *dst, amn_simd level);

/* The highest path gguf_dequantize_simd can take on this CPU. */
amn_simd gguf_simd_max(void);

#endif
