/* amn/kit/store.h — plugin kit: storing one binary32 value as F32, F16 or
 * BF16 with the scalar conversions of amn/dtype.h; the scalar tails of the
 * scheme kernels, beside the 8-lane stores of amn/kit/store_avx2.h.
 * Header-only: the kernels are also built alone into their tests. */
#ifndef AMN_KIT_STORE_H
#define AMN_KIT_STORE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"

/* Whole tensors (what the Python package's Model.dequantize asks for) are
 * written with streaming stores by the kernels whose stores are whole
 * lines: no cache keeps such an output for its reader, and a normal store
 * first reads its line back (write-allocate), doubling the memory traffic.
 * A call streams when it writes at least QS_STREAM_BYTES into rows that
 * start on 32-byte boundaries; the converter's 1 MiB chunks, which `write`
 * reads back from cache, never do. */
#define QS_STREAM_BYTES ((uint64_t)8 << 20)

/* Whether rows of rowbytes from dst may take 32-byte streaming stores. */
static inline bool qs_stream_aligned(const void *dst, size_t rowbytes) {
    return (uintptr_t)dst % 32 == 0 && rowbytes % 32 == 0;
}

/* Write y at d (no alignment needed) as `out`: F32, F16, else BF16. */
static inline void qs_store1(float y, amn_dtype out, uint8_t *d) {
    switch (out) {
    case AMN_DTYPE_F32:
        amn_store_le_f32(d, y);
        break;
    case AMN_DTYPE_F16:
        amn_store_le16(d, amn_f32_to_f16(y));
        break;
    default:
        amn_store_le16(d, amn_f32_to_bf16(y));
        break;
    }
}

#endif
