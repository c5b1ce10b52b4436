/* gguf_validate.h — ggml_validate_row_data (ggml-quants.c), the check
 * llama-quantize makes of every tensor it loads (it opens its input with
 * check_tensors) and of every tensor it quantizes ("quantized data
 * validation failed"): no NaN or infinity among float values, no block whose
 * F16 scale (or minimum) is one, no MXFP4 exponent 0xFF. A file that fails
 * it is refused, as llama-quantize refuses it. */
#ifndef GGUF_VALIDATE_H
#define GGUF_VALIDATE_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/simd.h"

/* nbytes of ggml type `type`, little-endian (as GGUF files and amn's
 * outputs hold them): true when valid; else *at is the first invalid
 * element (plain types) or block, *what "NaN", "infinity" or "exponent
 * 0xFF". Integer types and NVFP4 are always valid, as in ggml. */
bool gguf_valid_bytes(uint32_t type, const uint8_t *data, uint64_t nbytes, uint64_t *at,
                      const char **what);
/* The same for n host floats: no NaN, no infinity (at the CPU level
 * `level`, amn_simd_level() as the caller read it once). */
bool gguf_valid_floats(const float *x, uint64_t n, amn_simd level, uint64_t *at, const char **what);

#endif
