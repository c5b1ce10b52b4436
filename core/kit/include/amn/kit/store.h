/* amn/kit/store.h — plugin kit: storing one binary32 value as F32, F16 or
 * BF16 with the scalar conversions of amn/dtype.h; the scalar tails of the
 * scheme kernels, beside the 8-lane stores of amn/kit/store_avx2.h.
 * Header-only: the kernels are also built alone into their tests. */
#ifndef AMN_KIT_STORE_H
#define AMN_KIT_STORE_H

#include <stdint.h>
#include <string.h>

#include "amn/dtype.h"

/* Write y at d (no alignment needed) as `out`: F32, F16, else BF16. */
static inline void qs_store1(float y, amn_dtype out, uint8_t *d) {
    uint16_t h;
    switch (out) {
    case AMN_DTYPE_F32:
        memcpy(d, &y, 4);
        break;
    case AMN_DTYPE_F16:
        h = amn_f32_to_f16(y);
        memcpy(d, &h, 2);
        break;
    default:
        h = amn_f32_to_bf16(y);
        memcpy(d, &h, 2);
        break;
    }
}

#endif
