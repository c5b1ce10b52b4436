/* AutoAWQ GEMM 4-bit dequantization kernels: pure functions over the packed
 * tensors (no model access), so tests can drive them directly.
 *
 * qweight [in][out/8] and qzeros [groups][out/8] are 32-bit little-endian
 * words packed along the output dimension with AutoAWQ's interleave: nibble p
 * of word w holds column 8w + AWQ_ORDER[p], AWQ_ORDER = [0,2,4,6,1,3,5,7].
 * scales is [groups][out]; groups are sequential, g = i / group_size.
 *
 * Output is nn.Linear's [out][in]:
 *   y[o][i] = (float)(q[i][o] - zero[g][o]) * scale[g][o]   (no +1)
 */
#ifndef AMN_AWQ_KERNELS_H
#define AMN_AWQ_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/kit/store.h"
#include "amn/simd.h"

typedef struct awq_layout {
    uint64_t in, out; /* out a multiple of 8 */
    uint64_t groups;  /* >= 1; group_size * groups == in */
    uint64_t group_size;
    const uint8_t *qweight;
    const uint8_t *qzeros;
    const uint8_t *scales;
    amn_dtype stype; /* F16, BF16 or F32 */
} awq_layout;

/* Nibble position of output column j within its word: the inverse of AWQ_ORDER. */
static const unsigned awq_rev[8] = {0, 4, 1, 5, 2, 6, 3, 7};

/* Rows [row0, row0 + nrows) of the [out][in] output, as `out` (F32, F16,
 * BF16), into dst. The layout must be valid. Returns 0, or AMN_E_NOMEM. */
int awq_dequant_rows(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                     amn_simd level);

/* Internal to the kernels. */
int awq_dequant_rows_scalar(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                            void *dst);
int awq_dequant_rows_avx2(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out,
                          void *dst);
/* The AVX2 path, its lookup-table loop with streaming stores where
 * `stream` and the output's alignment allow; awq_dequant_rows_avx2 streams
 * outputs of QS_STREAM_BYTES or more (amn/kit/store.h; whole [11008, 4096]
 * tensors to BF16: 1.3 -> 1.8 Gelem/s). */
int awq_rows_avx2(const awq_layout *l, uint64_t row0, uint64_t nrows, amn_dtype out, void *dst,
                  bool stream);
float awq_scale(const awq_layout *l, uint64_t g, uint64_t o);

static inline uint32_t awq_ld32(const uint8_t *p) {
    return amn_load_le32(p); /* little-endian words, need not be aligned */
}

/* Nibble of column o in a row of words packed along the output dimension. */
static inline int32_t awq_nibble(const uint8_t *row, uint64_t o) {
    return (int32_t)((awq_ld32(row + (o / 8) * 4) >> (4 * awq_rev[o % 8])) & 15u);
}

#endif
