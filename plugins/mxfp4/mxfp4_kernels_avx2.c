/* MXFP4 with AVX2. BF16 and F32 outputs, 16 input rows whose scales are all
 * in 2..252 (tile16): the rows' code bytes are transposed in registers and
 * each output row of the tile is decoded straight to BF16 bits by byte
 * tables and a saturating exponent subtract, then written as 32
 * contiguous bytes (F32: those bits widened). Otherwise (F16 output,
 * scales 0, 1, 253..255, and the last R % 16 rows) 8 input rows (output
 * columns) at a time (tile): for each of the 8 rows, one 16-byte load
 * gives a group's 32 codes; the low nibbles of bytes 0..7 are elements 0,
 * 2, .., 14 of the group, the high ones 1, .., 15, and bytes 8..15 likewise
 * from 16 on. Each set of 8 codes becomes 8 binary32 values through a
 * 16-entry table (two permutes and a blend), one multiply by the row's
 * power of two, and an 8x8 transpose turns 8 rows x 8 elements into 8
 * output rows of 8 consecutive columns, stored with the scalar path's
 * exact rounding. The output is written group by group (32 output rows),
 * reading the input rows at a stride the hardware prefetchers do not
 * follow, hence the software prefetch. The tiles' exponent shifts come
 * from the expert's scales transposed once (ts, see mxfp4_scales.c) when
 * the caller has them: in place, each call reads one byte of every input
 * row's scales, as many cache lines as the codes. */
#include <immintrin.h>
#include <stdbool.h>
#include <string.h>

#include "mxfp4_kernels.h"
#include "amn/kit/store_avx2.h"

static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int k = 0; k < 8; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    for (int k = 0; k < 8; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
        r[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
    }
}

/* BF16 of 8 products that BF16 holds exactly: every E2M1 value has at most
 * two significant bits and the scale is a power of two, so the binary32
 * product (exact, or inf, or the default NaN 0xffc00000 of 0 * inf) has
 * its low 16 bits clear, and rounding it (amn_f32_to_bf16) is taking the
 * high half. */
static inline __m128i bf16_exact(__m256 y) {
    const __m256i h = _mm256_srli_epi32(_mm256_castps_si256(y), 16);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08));
}

static inline __m256 lookup(__m256 lo, __m256 hi, __m256i code) {
    const __m256 a = _mm256_permutevar8x32_ps(lo, code);
    const __m256 b = _mm256_permutevar8x32_ps(hi, code);
    const __m256 upper = _mm256_castsi256_ps(_mm256_slli_epi32(code, 28)); /* bit 3 -> sign */
    return _mm256_blendv_ps(a, b, upper);
}

static inline __attribute__((always_inline)) void
tile(const mxfp4_layout *l, uint64_t e, uint64_t g, uint64_t r, uint64_t klo, uint64_t khi,
     uint64_t k0, amn_dtype out, uint8_t *dst, size_t rowbytes, uint64_t col0) {
    const uint64_t R = l->rows, G = l->groups, kb = g * 32;
    const size_t es = out == AMN_DTYPE_F32 ? 4 : 2;
    const __m256 lut_lo = _mm256_loadu_ps(mxfp4_e2m1), lut_hi = _mm256_loadu_ps(mxfp4_e2m1 + 8);
    __m256 v[4][8];
    for (int i = 0; i < 8; i++) {
        const uint64_t bg = (e * R + r + (uint64_t)i) * G + g;
        const __m256 p = _mm256_set1_ps(mxfp4_pow2(l->scales[bg]));
        const __m128i bytes = _mm_loadu_si128((const __m128i *)(l->blocks + bg * 16));
        for (int h = 0; h < 2; h++) {
            const __m256i w = _mm256_cvtepu8_epi32(h ? _mm_srli_si128(bytes, 8) : bytes);
            const __m256i lo = _mm256_and_si256(w, _mm256_set1_epi32(15));
            const __m256i hi = _mm256_srli_epi32(w, 4);
            v[2 * h][i] = _mm256_mul_ps(lookup(lut_lo, lut_hi, lo), p);
            v[2 * h + 1][i] = _mm256_mul_ps(lookup(lut_lo, lut_hi, hi), p);
        }
    }
    for (int part = 0; part < 4; part++) {
        transpose8(v[part]);
        for (int j = 0; j < 8; j++) {
            const uint64_t k = kb + (uint64_t)(part >> 1) * 16 + 2 * (uint64_t)j + (part & 1);
            if (k < klo || k >= khi) continue;
            uint8_t *d = dst + (k - k0) * rowbytes + (r - col0) * es;
            if (out == AMN_DTYPE_BF16)
                _mm_storeu_si128((__m128i *)d, bf16_exact(v[part][j]));
            else
                qs_store8(out, d, v[part][j]);
        }
    }
}

/* mxfp4_bf16_k_lo / _hi hold the BF16 of the E2M1 values times 2^125.
 * Subtracting (252 - s) << 7 from a non-zero one moves its exponent to that
 * of the value times 2^(s - 127), which for 2 <= s <= 252 is a normal
 * finite binary32 (so its BF16 is exact, as in bf16_exact above). */
/* 16 BF16 lanes of code bytes n (one lane per input row, low and high byte
 * of each lane from lo / hi) scaled by the lanes' exponent shifts x: the
 * saturating subtract leaves +0 at 0, and the max puts -0's sign back. */
static inline __m256i scale16(__m256i v, __m256i x) {
    return _mm256_max_epu16(_mm256_subs_epu16(v, x),
                            _mm256_and_si256(v, _mm256_set1_epi16((short)0x8000)));
}

static inline void store16(amn_dtype out, uint8_t *d, __m256i v) {
    if (out == AMN_DTYPE_BF16) {
        _mm256_storeu_si256((__m256i *)d, v);
        return;
    }
    /* F32: the BF16 bits are the binary32 product's high half, the low half is 0. */
    const __m256i lo = _mm256_unpacklo_epi16(_mm256_setzero_si256(), v); /* rows 0-3, 8-11 */
    const __m256i hi = _mm256_unpackhi_epi16(_mm256_setzero_si256(), v); /* rows 4-7, 12-15 */
    _mm256_storeu_si256((__m256i *)d, _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256((__m256i *)(d + 32), _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* 16 input rows r..r+15 of group g (BF16 or F32 out), whose exponent
 * shifts (252 - s) << 7 are at xs (every scale in 2..252): the 16 x 16 code
 * bytes are transposed (row r + i in lane 0 / 1 as i < 8 or not, three
 * rounds of unpacks), so each output row of the tile is one table lookup,
 * one interleave and one scaling of 16 lanes, written as 32 contiguous
 * bytes. */
#define PREFETCH_ROWS 64
#define NO_ROW        UINT64_MAX

static inline __attribute__((always_inline)) void
tile16(const mxfp4_layout *l, uint64_t e, uint64_t g, uint64_t r, const uint16_t *xs, uint64_t klo,
       uint64_t khi, uint64_t k0, amn_dtype out, uint8_t *dst, size_t rowbytes, uint64_t col0,
       uint64_t pf) {
    const uint64_t R = l->rows, G = l->groups;
    const __m256i x = _mm256_loadu_si256((const __m256i *)xs);
    const __m256i tlo =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mxfp4_bf16_k_lo));
    const __m256i thi =
        _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mxfp4_bf16_k_hi));
    const __m256i nib = _mm256_set1_epi8(15);
    const uint8_t *p = l->blocks + ((e * R + r) * G + g) * 16;
    const size_t rs = (size_t)G * 16;
    /* Rows pf..pf+15, read a few tiles later: strided reads the hardware
     * does not foresee. */
    if (pf != NO_ROW)
        for (int i = 0; i < 16; i++)
            _mm_prefetch((const char *)(l->blocks + ((e * R + pf + (uint64_t)i) * G + g) * 16),
                         _MM_HINT_T0);
    __m256i a[8], b[8], c[8];
    for (int i = 0; i < 8; i++)
        a[i] = _mm256_loadu2_m128i((const __m128i *)(p + (size_t)(i + 8) * rs),
                                   (const __m128i *)(p + (size_t)i * rs));
    for (int i = 0; i < 8; i += 2) { /* rows i, i+1 byte by byte: j 0-7, 8-15 */
        b[i] = _mm256_unpacklo_epi8(a[i], a[i + 1]);
        b[i + 1] = _mm256_unpackhi_epi8(a[i], a[i + 1]);
    }
    for (int h = 0; h < 8; h += 4) /* rows h..h+3: j 0-3, 4-7, 8-11, 12-15 */
        for (int t = 0; t < 2; t++) {
            c[h + 2 * t] = _mm256_unpacklo_epi16(b[h + t], b[h + t + 2]);
            c[h + 2 * t + 1] = _mm256_unpackhi_epi16(b[h + t], b[h + t + 2]);
        }
    for (int q = 0; q < 4; q++) { /* rows 0-7: j 4q..4q+1, 4q+2..4q+3 */
        a[2 * q] = _mm256_unpacklo_epi32(c[q], c[q + 4]);
        a[2 * q + 1] = _mm256_unpackhi_epi32(c[q], c[q + 4]);
    }
    const uint64_t kb = g * 32;
    for (int q = 0; q < 8; q++) {     /* a[q]: bytes j = 2q and 2q + 1 of the 16 rows */
        for (int h = 0; h < 2; h++) { /* low nibbles: element 2j; high: 2j + 1 */
            const __m256i n = _mm256_and_si256(h ? _mm256_srli_epi16(a[q], 4) : a[q], nib);
            const __m256i lo = _mm256_shuffle_epi8(tlo, n), hi = _mm256_shuffle_epi8(thi, n);
            for (int t = 0; t < 2; t++) {
                const uint64_t k = kb + 4 * (uint64_t)q + 2 * (uint64_t)t + (uint64_t)h;
                if (k < klo || k >= khi) continue;
                const __m256i v = t ? _mm256_unpackhi_epi8(lo, hi) : _mm256_unpacklo_epi8(lo, hi);
                store16(out,
                        dst + (k - k0) * rowbytes + (r - col0) * (out == AMN_DTYPE_F32 ? 4 : 2),
                        scale16(v, x));
            }
        }
    }
}

/* Rows per pass of the exponent shifts: a small stack table, filled a
 * while before the vector loads read it (filling 16 lanes just before
 * loading them stalls on store forwarding). */
#define XCHUNK 512

/* Input rows per band (a multiple of 16); see mxfp4_expert_rows_avx2. */
#ifndef MXFP4_BAND
#define MXFP4_BAND 256
#endif

/* Input rows [r0, r1) of group g (r0 a multiple of 16; r1 one too, or R),
 * output rows [klo, khi): element (k, r) at dst + (k - k0) * rowbytes +
 * (r - col0) * its size; `next` is the first row of the band read after
 * this one (NO_ROW: none), where the prefetches go on from r1. A tail of
 * fewer than 8 rows (r1 = R only) goes by the scalar path, which writes
 * whole output rows (col0 = 0). */
static inline __attribute__((always_inline)) void
group_rows(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t g, uint64_t r0,
           uint64_t r1, uint64_t next, uint64_t klo, uint64_t khi, uint64_t k0, amn_dtype out,
           uint8_t *dst, size_t rowbytes, uint64_t col0) {
    const uint64_t r16 = r1 - (r1 - r0) % 16, r8 = r1 - (r1 - r0) % 8;
    for (uint64_t rc = r0; rc < r16; rc += XCHUNK) {
        const uint64_t rend = r16 - rc < XCHUNK ? r16 : rc + XCHUNK;
        uint16_t xs[XCHUNK];
        bool fast[XCHUNK / 16];
        if (out != AMN_DTYPE_F16) mxfp4_shifts(l, e, ts, g, rc, rend, xs, fast);
        for (uint64_t r = rc; r < rend; r += 16) {
            if (out != AMN_DTYPE_F16 && fast[(r - rc) / 16]) {
                const uint64_t t = r + PREFETCH_ROWS;
                uint64_t pf = t < r1 ? t : next == NO_ROW ? NO_ROW : next + (t - r1);
                if (pf != NO_ROW && pf + 16 > l->rows) pf = NO_ROW;
                tile16(l, e, g, r, xs + (r - rc), klo, khi, k0, out, dst, rowbytes, col0, pf);
                continue;
            }
            tile(l, e, g, r, klo, khi, k0, out, dst, rowbytes, col0);
            tile(l, e, g, r + 8, klo, khi, k0, out, dst, rowbytes, col0);
        }
    }
    if (r16 < r8) tile(l, e, g, r16, klo, khi, k0, out, dst, rowbytes, col0);
    if (r8 < r1) mxfp4_expert_rows_scalar(l, e, klo, khi, r8, out, dst + (klo - k0) * rowbytes);
}

static void group_rows_any(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t g,
                           uint64_t r0, uint64_t r1, uint64_t next, uint64_t klo, uint64_t khi,
                           uint64_t k0, amn_dtype out, uint8_t *dst, size_t rowbytes,
                           uint64_t col0) {
    switch (out) {
    case AMN_DTYPE_F32:
        group_rows(l, e, ts, g, r0, r1, next, klo, khi, k0, AMN_DTYPE_F32, dst, rowbytes, col0);
        break;
    case AMN_DTYPE_F16:
        group_rows(l, e, ts, g, r0, r1, next, klo, khi, k0, AMN_DTYPE_F16, dst, rowbytes, col0);
        break;
    default:
        group_rows(l, e, ts, g, r0, r1, next, klo, khi, k0, AMN_DTYPE_BF16, dst, rowbytes, col0);
        break;
    }
}

/* 16 rows of 16 bytes (a[i] = row i) to 16 columns: four rounds that each
 * interleave rows 2i and 2i + 1 into rows i and i + 8, after which a[j]
 * holds byte rev4(j) of every row (rev4 reverses 4 bits). */
static inline void transpose16x16(__m128i a[16]) {
    __m128i b[16];
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 8; i++) {
            const __m128i x = a[2 * i], y = a[2 * i + 1];
            switch (round) {
            case 0:
                b[i] = _mm_unpacklo_epi8(x, y), b[i + 8] = _mm_unpackhi_epi8(x, y);
                break;
            case 1:
                b[i] = _mm_unpacklo_epi16(x, y), b[i + 8] = _mm_unpackhi_epi16(x, y);
                break;
            case 2:
                b[i] = _mm_unpacklo_epi32(x, y), b[i + 8] = _mm_unpackhi_epi32(x, y);
                break;
            default:
                b[i] = _mm_unpacklo_epi64(x, y), b[i + 8] = _mm_unpackhi_epi64(x, y);
                break;
            }
        }
        memcpy(a, b, sizeof b);
    }
}

void mxfp4_transpose_scales_avx2(const uint8_t *s, uint64_t R, uint64_t G, uint8_t *t) {
    const uint64_t R16 = R - R % 16, G16 = G - G % 16;
    for (uint64_t r = 0; r < R16; r += 16) {
        for (uint64_t g = 0; g < G16; g += 16) {
            __m128i a[16];
            for (int i = 0; i < 16; i++)
                a[i] = _mm_loadu_si128((const __m128i *)(s + (r + (uint64_t)i) * G + g));
            transpose16x16(a);
            static const uint8_t rev4[16] = {0, 8, 4, 12, 2, 10, 6, 14, 1, 9, 5, 13, 3, 11, 7, 15};
            for (int j = 0; j < 16; j++)
                _mm_storeu_si128((__m128i *)(t + (g + rev4[j]) * R + r), a[j]);
        }
        for (uint64_t g = G16; g < G; g++)
            for (uint64_t i = r; i < r + 16; i++) t[g * R + i] = s[i * G + g];
    }
    for (uint64_t g = 0; g < G; g++)
        for (uint64_t i = R16; i < R; i++) t[g * R + i] = s[i * G + g];
}

/* n bytes (a multiple of 32) from the stage to d, 32-byte aligned, with
 * streaming stores. */
static void copy_stream(uint8_t *d, const uint8_t *s, size_t n) {
    for (size_t k = 0; k < n; k += 32)
        _mm256_stream_si256((__m256i *)(d + k), _mm256_load_si256((const __m256i *)(s + k)));
}

void mxfp4_expert_rows_avx2(const mxfp4_layout *l, uint64_t e, const uint8_t *ts, uint64_t k0,
                            uint64_t k1, amn_dtype out, uint8_t *dst, bool stream) {
    /* The output is the input transposed, so one side is always strided.
     * Windows of 4 groups (128 output rows; one 64-byte line of each input
     * row), each in bands of MXFP4_BAND input rows, so that what a band
     * reads lies on a few hundred pages, which the TLB holds (1536 entries
     * on Skylake). Each group of a full band is decoded into a stage of
     * 32 x MXFP4_BAND elements that L1 holds, then copied out as 32 runs
     * of contiguous bytes: the tiles' 32-byte stores to 32 distinct output
     * lines each cost 5x the decoding when they went to the output itself
     * (Skylake-SP, 2 MiB chunks). With `stream` (a whole tensor, see
     * QS_STREAM_BYTES) the copy uses streaming stores: the runs are
     * whole lines, and nothing will read them back from cache.
     *
     * Successive windows, and successive calls of equal size (the
     * converter's chunks of one thread), alternate the order of the bands:
     * a group pair uses half of each input line and the next pair the
     * other half, and a window's lines and output (about 1.1 MB for
     * gpt-oss) do not all stay in L2, so what the next window reads first
     * should be what this one read last (64-row chunks: 2.31 -> 2.82
     * Gelem/s with the prefetches going on into the next band, Skylake-SP). */
    const size_t es = amn_dtype_size(out), rowbytes = (size_t)l->rows * es;
    const size_t sbytes = MXFP4_BAND * es;
    _Alignas(64) uint8_t stage[32 * MXFP4_BAND * 4];
    for (uint64_t w0 = k0; w0 < k1;) {
        const uint64_t w1 = (w0 / 128 + 1) * 128 < k1 ? (w0 / 128 + 1) * 128 : k1;
        const uint64_t nb = (l->rows + MXFP4_BAND - 1) / MXFP4_BAND;
        const bool down = ((w0 - k0) / 128 + k0 / (k1 - k0)) % 2; /* k1 > k0 here */
        for (uint64_t b = 0; b < nb; b++) {
            const uint64_t rb = (down ? nb - 1 - b : b) * MXFP4_BAND;
            const uint64_t next = b + 1 == nb ? NO_ROW : down ? rb - MXFP4_BAND : rb + MXFP4_BAND;
            const bool full = l->rows - rb >= MXFP4_BAND;
            const uint64_t re = full ? rb + MXFP4_BAND : l->rows;
            for (uint64_t g = w0 / 32; g * 32 < w1; g++) {
                const uint64_t klo = g * 32 > w0 ? g * 32 : w0;
                const uint64_t khi = g * 32 + 32 < w1 ? g * 32 + 32 : w1;
                if (!full) {
                    group_rows_any(l, e, ts, g, rb, re, next, klo, khi, k0, out, dst, rowbytes, 0);
                    continue;
                }
                group_rows_any(l, e, ts, g, rb, re, next, klo, khi, klo, out, stage, sbytes, rb);
                for (uint64_t k = klo; k < khi; k++) {
                    uint8_t *d = dst + (k - k0) * rowbytes + rb * es;
                    if (stream)
                        copy_stream(d, stage + (k - klo) * sbytes, sbytes);
                    else
                        memcpy(d, stage + (k - klo) * sbytes, sbytes);
                }
            }
        }
        w0 = w1;
    }
    if (stream) _mm_sfence(); /* streamed lines visible before what follows */
}
