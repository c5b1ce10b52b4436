/* ggml's ternary packings (amn/kit/ternary.h). */
#include "amn/kit/ternary.h"

#include <math.h>
#include <stddef.h>

void kit_tq_codes(const float *x, float id, int8_t t[KIT_TQ_BLOCK]) {
    for (int i = 0; i < KIT_TQ_BLOCK; i++) t[i] = (int8_t)((int)lroundf(x[i] * id) + 1);
}

/* n codes at stride `stride` as base-3 digits, first most significant,
 * scaled to a byte by ceiling division (ggml's q * 256 / 243 rounded up);
 * the bytes are built in uint8_t arithmetic, as ggml's are. */
static uint8_t trits_byte(const int8_t *t, size_t stride, int n, int shift_one) {
    uint8_t q = 0;
    for (int k = 0; k < n; k++) q = (uint8_t)(q * 3 + t[k * stride]);
    if (shift_one) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t)q * 256 + 242) / 243);
}

void kit_tq1_0_pack(const int8_t t[KIT_TQ_BLOCK], uint8_t *y) {
    for (int m = 0; m < 32; m++) y[m] = trits_byte(t + m, 32, 5, 0);
    t += 160;
    for (int m = 0; m < 16; m++) y[32 + m] = trits_byte(t + m, 16, 5, 0);
    t += 80;
    for (int j = 0; j < 4; j++) y[48 + j] = trits_byte(t + j, 4, 4, 1);
}

void kit_tq2_0_pack(const int8_t t[KIT_TQ_BLOCK], uint8_t *y) {
    for (int j = 0; j < 64; j += 32, t += 128)
        for (int m = 0; m < 32; m++) {
            uint8_t q = 0;
            for (int n = 0; n < 4; n++) q = (uint8_t)(q + ((t[m + n * 32] & 3) << 2 * n));
            y[j + m] = q;
        }
}
