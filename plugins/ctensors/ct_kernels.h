/* compressed-tensors integer dequantization kernels (pack-quantized and
 * int-quantized): pure functions over the tensors' bytes (no model
 * access), so tests can drive them directly.
 *
 * Values (compressed_tensors/compressors/quantized_compressors and
 * quantization/lifecycle/forward.py):
 *  - pack-quantized: weight_packed I32 [O][P]; field i (bits wide, from the
 *    least significant bit) of word j of a row is element j * pf + i, with
 *    pf = 32 / bits, stored unsigned: q = field - 2^(bits-1)
 *    (unpack_from_int32);
 *  - int-quantized: weight I8 [O][I], q as stored.
 *  - zero points: I32 packed along dim 0, [ceil(O/pf)][G] (field o % pf of
 *    word [o / pf][g], minus 2^(bits-1)); or I8 [O][G] as stored; or none.
 * _dequantize computes in the scale's dtype: (q - z) is exact there (|q - z|
 * <= 255), times the scale with one rounding to that dtype (BF16 and F16
 * products are exact in binary32 and rounded once), and that value is then
 * cast to the output dtype (an F16 result asked for as BF16 is rounded a
 * second time, as `.to(torch.bfloat16)` would). Group g of input column i
 * is i / group_size, or g_idx[i] (act-order).
 * Block strategy (scale [ceil(O / bo)][ceil(I / bi)], forward.py's BLOCK
 * branch: each bo x bi block times its scale, zero point [same] as I8):
 * groups = ceil(I / bi), group_size = bi and block_rows = bo, so output row
 * o reads scale row o / bo. */
#ifndef AMN_CT_KERNELS_H
#define AMN_CT_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef enum ct_zkind { CT_ZERO_NONE = 0, CT_ZERO_PACKED, CT_ZERO_I8 } ct_zkind;

typedef struct ct_layout {
    const uint8_t *weight; /* packed I32 [out][words] or I8 [out][in] */
    bool packed;
    unsigned bits;         /* 1..8 when packed, 8 for I8 */
    uint64_t out, in;      /* output shape [out][in] */
    uint64_t words;        /* I32 words per packed row: ceil(in / (32 / bits)) */
    const uint8_t *scales; /* [out][groups], or one value when per_tensor */
    amn_dtype stype;       /* BF16, F16 or F32 */
    bool per_tensor;
    uint64_t groups, group_size;
    const uint8_t *zeros; /* see ct_zkind; NULL with CT_ZERO_NONE */
    ct_zkind zkind;
    const int32_t *gidx; /* [in] group of each column, or NULL: i / group_size */
    uint64_t block_rows; /* block strategy: rows sharing a scale row; 0 or 1 otherwise */
} ct_layout;

/* The weight's encoding, which the vector loops take as a constant of each
 * instance (a field of the layout would be reloaded after every store,
 * which may alias it): I8 values, or packed fields of 8, 4 or 2 bits. */
enum { CT_Q_I8 = 0, CT_Q_P8 = 8, CT_Q_P4 = 4, CT_Q_P2 = 2 };

static inline unsigned ct_q_kind(const ct_layout *l) {
    return l->packed ? l->bits : (unsigned)CT_Q_I8;
}

/* The 32-bit word at p (tensor data need not be aligned). */
static inline uint32_t ct_ld32(const uint8_t *p) {
    return amn_load_le32(p); /* little-endian words, need not be aligned */
}

/* The scale (and zero point) row of output row o. */
static inline uint64_t ct_scale_row(const ct_layout *l, uint64_t o) {
    return l->block_rows > 1 ? o / l->block_rows : o;
}

/* Rows per call the kernels prefer: per-column groups (act-order, or group
 * sizes that 8 columns may straddle) go 8 rows at a time on AVX2, and the
 * remainder of a call by a slower row path. */
static inline uint64_t ct_row_quantum(const ct_layout *l) {
    return l->gidx || l->group_size % 8 != 0 ? 8 : 1;
}

/* Rows [row0, row0 + nrows) of [out][in], as `out` (F32, F16, BF16), into dst.
 * The layout must be valid (the detector checked every size and g_idx).
 * Returns 0, or -1 when out of memory. */
int ct_dequant_rows(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                    amn_simd level);

/* Internal to the kernels. */
int ct_rows_scalar(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst);
int ct_rows_avx2(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst);
/* The AVX-512 path's share: per-column groups (act-order, or group sizes
 * not a multiple of 8) of at most CT_AVX512_MAX_GROUPS per row, packed 2,
 * 4 or 8 bits or I8, rows not sharing one per-tensor scale. */
#define CT_AVX512_MAX_GROUPS 128
bool ct_avx512_takes(const ct_layout *l);
int ct_rows_avx512(const ct_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst);
/* Signed value, zero point and scale (as binary32) of element (o, i) / group g. */
int32_t ct_q(const ct_layout *l, uint64_t o, uint64_t i);
int32_t ct_zero(const ct_layout *l, uint64_t o, uint64_t g);
float ct_scale(const ct_layout *l, uint64_t o, uint64_t g);
/* ct_scale and ct_zero of row o for every group, at st[g * step] and
 * zt[g * step]: the row's divisions (block rows, packed zero fields) done
 * once, not per group as the two calls do (40-90 cycles each on Skylake). */
void ct_row_tables(const ct_layout *l, uint64_t o, float *st, int32_t *zt, size_t step);

/* (q - z) * s in the scale's dtype, as binary32. */
static inline float ct_apply(int32_t qz, float s, amn_dtype stype) {
    const float y = (float)qz * s;
    if (stype == AMN_DTYPE_BF16) return amn_bf16_to_f32(amn_f32_to_bf16(y));
    if (stype == AMN_DTYPE_F16) return amn_f16_to_f32(amn_f32_to_f16(y));
    return y;
}

#endif
