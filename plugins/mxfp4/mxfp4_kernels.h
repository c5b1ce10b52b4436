/* gpt-oss MXFP4 dequantization kernels: pure functions over the packed
 * tensors (no model access), so tests can drive them directly.
 *
 * Layout (transformers' integrations/mxfp4.py, convert_moe_packed_tensors):
 * blocks U8 [E][R][G][16] hold 32 E2M1 codes per (e, r, g), element 2j of the
 * group in the low nibble of byte j and 2j+1 in the high one; scales U8
 * [E][R][G] are E8M0 exponents. Value = FP4_VALUES[code] * 2^(scale - 127),
 * both factors binary32 (2^-127 is a subnormal, 2^128 is inf, so a scale
 * byte of 255 makes 0 * inf = NaN), one multiply, then one rounding to the
 * output dtype. The product is exact except for that overflow, so it
 * equals torch.ldexp on a BF16, F16 or F32 lookup table.
 *
 * The output is what transformers' loader keeps: [E][R][K] transposed to
 * [E][K][R] (K = 32 G). Output row q is (e, k) = (q / K, q % K); its R
 * values come from column k of R different input rows. */
#ifndef AMN_MXFP4_KERNELS_H
#define AMN_MXFP4_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef struct mxfp4_scale_cache mxfp4_scale_cache;

typedef struct mxfp4_layout {
    const uint8_t *blocks; /* [experts][rows][groups][16] */
    const uint8_t *scales; /* [experts][rows][groups] */
    uint64_t experts, rows, groups;
    mxfp4_scale_cache *cache; /* transposed scales shared by calls, or NULL */
} mxfp4_layout;

/* Each expert's scales transposed to [groups][rows] once, for the calls
 * that decode it (mxfp4_scales.c); thread-safe. NULL when the layout does
 * not gain from it (fewer than 16 rows, or a huge expert) or on no memory:
 * the scales are then read in place, with the same output bytes. */
mxfp4_scale_cache *mxfp4_scale_cache_new(uint64_t experts, uint64_t rows, uint64_t groups);
void mxfp4_scale_cache_free(mxfp4_scale_cache *c);
/* Expert e's transposed scales, or NULL (read them in place); every
 * acquisition is followed by a release naming the rows decoded. The
 * AVX2 path's (it transposes with mxfp4_transpose_scales_avx2). */
const uint8_t *mxfp4_scales_acquire(mxfp4_scale_cache *c, const mxfp4_layout *l, uint64_t e);
void mxfp4_scales_release(mxfp4_scale_cache *c, const uint8_t *t, uint64_t rows);

/* E2M1 code -> value; code 8 is -0.0 as in transformers' FP4_VALUES. */
extern const float mxfp4_e2m1[16];

/* The AVX2 path's E2M1 table: see mxfp4_shifts. */
extern const uint8_t mxfp4_bf16_k_lo[16], mxfp4_bf16_k_hi[16];

/* 2^(s - 127) as binary32: torch.pow(2.0, s - 127) in float32. */
static inline float mxfp4_pow2(uint8_t s) {
    if (s == 255) return amn_bits_f32(0x7f800000u);
    if (s == 0) return amn_bits_f32(0x00400000u); /* 2^-127, subnormal */
    return amn_bits_f32((uint32_t)s << 23);
}

/* Output rows [row0, row0 + nrows) of [E*K][R], as `out` (F32, F16, BF16).
 * The layout must be valid (the detector checked every size). */
void mxfp4_dequant_rows(const mxfp4_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_simd level);

/* Internal: output rows (e, k) for k in [k0, k1) of one expert, row k0 at dst. */
void mxfp4_expert_rows_scalar(const mxfp4_layout *l, uint64_t e, uint64_t k0, uint64_t k1,
                              uint64_t r0, amn_dtype out, uint8_t *dst);
/* ts: expert e's scales as [groups][rows], or NULL to read l->scales.
 * stream: copy the stage out with streaming stores (dst and every row
 * 32-byte aligned); mxfp4_dequant_rows streams calls that write
 * QS_STREAM_BYTES or more (amn/kit/store.h). */
void mxfp4_expert_rows_avx2(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t k0,
                            uint64_t k1, amn_dtype out, uint8_t *dst, bool stream);
/* Scales [R][G] of one expert to [G][R]: AVX2 callers only (the cache's
 * users are the AVX2 path). */
void mxfp4_transpose_scales_avx2(const uint8_t *s, uint64_t R, uint64_t G, uint8_t *t);
/* The AVX2 path's exponent shift of each input row r0..r1-1 (a multiple
 * of 16 rows) in group g, (252 - s) << 7 as a 16-bit lane, and for each 16
 * rows whether all their scales s are in 2..252, where a non-zero E2M1
 * value's BF16 at 2^125 minus the shift is the exact product. The scales
 * come from ts (expert e's, transposed) when it is not NULL. */
void mxfp4_shifts(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t g, uint64_t r0,
                  uint64_t r1, uint16_t *xs, bool *fast);

#endif
