/* GGUF block-quant kernels: the AMNG goldens (fixtures README section 7) on
 * every SIMD path, and every vector path against the scalar one on random
 * valid blocks of all 24 types. */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"
#include "sha256.h"

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/simd.h"
#include "gguf_dequant.h"
#include "gguf_kernels.h"
#include "gguf_types.h"

/* The 24 weight block types (Q1_0 and Q2_0 last: they have no AMNG golden
 * nor ggml known answer here; gguf_quant_reference's .dequant.f32 files
 * cover them, in test_gguf_quant). */
static const uint32_t block_types[] = {
    GGUF_TYPE_Q4_0,    GGUF_TYPE_Q4_1,   GGUF_TYPE_Q5_0,   GGUF_TYPE_Q5_1,    GGUF_TYPE_Q8_0,
    GGUF_TYPE_Q2_K,    GGUF_TYPE_Q3_K,   GGUF_TYPE_Q4_K,   GGUF_TYPE_Q5_K,    GGUF_TYPE_Q6_K,
    GGUF_TYPE_IQ2_XXS, GGUF_TYPE_IQ2_XS, GGUF_TYPE_IQ2_S,  GGUF_TYPE_IQ3_XXS, GGUF_TYPE_IQ3_S,
    GGUF_TYPE_IQ1_S,   GGUF_TYPE_IQ1_M,  GGUF_TYPE_IQ4_NL, GGUF_TYPE_IQ4_XS,  GGUF_TYPE_TQ1_0,
    GGUF_TYPE_TQ2_0,   GGUF_TYPE_MXFP4,  GGUF_TYPE_Q1_0,   GGUF_TYPE_Q2_0,
};
#define N_BLOCK_TYPES (sizeof block_types / sizeof block_types[0])

/* Paths to run: scalar always, AVX2 and AVX-512 when the CPU (and AMN_SIMD)
 * allow them. Built as test_gguf_kernels_avx512emu, the AVX-512 kernels run
 * through SIMDe on any AVX2 machine and AMN_SIMD does not apply. */
#define MAX_PATHS 3
static size_t simd_paths(amn_simd paths[MAX_PATHS]) {
    size_t n = 0;
    paths[n++] = AMN_SIMD_SCALAR;
    static int noted;
    amn_simd top = gguf_simd_max();
#ifndef AMN_GGUF_AVX512_EMULATE
    if (amn_simd_level() < top) top = amn_simd_level();
#endif
    for (amn_simd lv = AMN_SIMD_AVX2; lv <= top; lv++) paths[n++] = lv;
    if (!noted++)
        fprintf(stderr, "NOTE: SIMD paths checked: scalar%s%s%s\n",
                top >= AMN_SIMD_AVX2 ? ", avx2" : "", top >= AMN_SIMD_AVX512 ? ", avx512" : "",
#ifdef AMN_GGUF_AVX512_EMULATE
                " (AVX-512 emulated by SIMDe)"
#else
                top < AMN_SIMD_AVX512 ? " (AVX-512: CPU or AMN_SIMD lacks it)" : ""
#endif
        );
    return n;
}

static size_t count_diff(const uint8_t *a, const uint8_t *b, size_t n, size_t esize) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(a + i * esize, b + i * esize, esize) != 0;
    return bad;
}

/* ---- goldens ------------------------------------------------------------ */

static size_t golden_values;

/* Check one AMNG file; returns its ggml type, or UINT32_MAX if not AMNG. */
static uint32_t check_golden(const char *path) {
    size_t size = 0;
    uint8_t *buf = amn_test_read_file(path, &size);
    assert_non_null(buf);
    if (size < 28 || memcmp(buf, "AMNG", 4) != 0) {
        free(buf);
        return UINT32_MAX;
    }
    assert_int_equal(amn_test_u32(buf + 4), 2);
    const uint32_t type = amn_test_u32(buf + 8), n = amn_test_u32(buf + 12);
    const uint32_t raw_len = amn_test_u32(buf + 16), bf16_len = amn_test_u32(buf + 20),
                   f32_len = amn_test_u32(buf + 24);
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    assert_non_null(tr);
    assert_int_equal(tr->kind, GGUF_KIND_QUANT);
    uint64_t want_raw = 0;
    assert_true(gguf_type_nbytes(tr, n, &want_raw));
    assert_int_equal(raw_len, want_raw);
    assert_int_equal(bf16_len, (uint64_t)n * 2);
    assert_int_equal(f32_len, (uint64_t)n * 4);
    assert_int_equal(size, 28 + (uint64_t)raw_len + bf16_len + f32_len);
    const uint8_t *raw = buf + 28, *gbf16 = raw + raw_len, *gf32 = gbf16 + bf16_len;

    /* F16 has no golden: it is the F32 golden rounded once (amn_f32_to_f16). */
    uint8_t *gf16 = malloc((size_t)n * 2), *out = malloc((size_t)n * 4);
    assert_non_null(gf16);
    assert_non_null(out);
    for (uint32_t i = 0; i < n; i++) {
        amn_store_le16(gf16 + 2 * i, amn_f32_to_f16(amn_load_le_f32(gf32 + 4 * i)));
    }
    amn_simd paths[MAX_PATHS];
    const size_t npaths = simd_paths(paths);
    for (size_t p = 0; p < npaths; p++) {
        const struct {
            amn_dtype dt;
            const uint8_t *gold;
        } outs[] = {{AMN_DTYPE_F32, gf32}, {AMN_DTYPE_BF16, gbf16}, {AMN_DTYPE_F16, gf16}};
        for (size_t o = 0; o < 3; o++) {
            const size_t es = amn_dtype_size(outs[o].dt);
            memset(out, 0xA5, (size_t)n * 4);
            assert_int_equal(gguf_dequantize_simd(type, raw, n, outs[o].dt, out, paths[p]), AMN_OK);
            const size_t bad = count_diff(out, outs[o].gold, n, es);
            if (bad)
                fail_msg("%s: %s on %s: %zu of %u values differ", path, amn_dtype_name(outs[o].dt),
                         amn_simd_name(paths[p]), bad, n);
            /* Nothing written past the end. */
            for (size_t i = (size_t)n * es; i < (size_t)n * 4; i++) assert_int_equal(out[i], 0xA5);
            golden_values += n;
        }
    }
    fprintf(stderr, "ok %-28s %-8s %u values x %zu paths\n", strrchr(path, '/') + 1, tr->name, n,
            npaths);
    free(gf16);
    free(out);
    free(buf);
    return type;
}

static void test_goldens(void **state) {
    (void)state;
    AMN_REQUIRE_REFERENCE(ref);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/gguf_reference", ref);
    DIR *d = opendir(dir);
    assert_non_null(d);
    bool seen[GGUF_TYPE_COUNT] = {0};
    size_t files = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 4, ".bin") != 0) continue;
        char path[4600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const uint32_t type = check_golden(path);
        if (type == UINT32_MAX) continue;
        assert_true(type < GGUF_TYPE_COUNT);
        assert_false(seen[type]); /* one file per type */
        seen[type] = true;
        files++;
    }
    closedir(d);
    /* README section 7.1: 20 files, every type but Q2_K and IQ1_M. */
    assert_int_equal(files, 20);
    for (size_t i = 0; i < N_BLOCK_TYPES; i++) {
        const uint32_t t = block_types[i];
        assert_int_equal(seen[t], t != GGUF_TYPE_Q2_K && t != GGUF_TYPE_IQ1_M &&
                                      t != GGUF_TYPE_Q1_0 && t != GGUF_TYPE_Q2_0);
    }
    fprintf(stderr, "goldens: %zu files, %zu values compared bit for bit\n", files, golden_values);
}

/* ---- random blocks: every path equals the scalar one -------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void) {
    /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Make every f16 scale field of a block finite (no Inf / NaN) by turning an
 * all-ones exponent 31 into 15: random payloads then stay "valid". */
static void finite_scales(uint32_t type, uint8_t *b) {
    int off[2] = {-1, -1};
    switch (type) {
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1:
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K:
        off[0] = 0;
        off[1] = 2;
        break;
    case GGUF_TYPE_Q2_K:
        off[0] = 80;
        off[1] = 82;
        break;
    case GGUF_TYPE_Q3_K:
        off[0] = 108;
        break;
    case GGUF_TYPE_Q6_K:
        off[0] = 208;
        break;
    case GGUF_TYPE_TQ1_0:
        off[0] = 52;
        break;
    case GGUF_TYPE_TQ2_0:
        off[0] = 64;
        break;
    case GGUF_TYPE_MXFP4:
        break; /* an E8M0 byte is never NaN here */
    case GGUF_TYPE_IQ1_M:
        /* The f16 scale is the top nibbles of the 4 scale words: its exponent
         * bits 10..14 are bits 14..15 of word 2 and 12..14 of word 3. */
        if ((((b[53] >> 4) & 0xC) >> 2 | ((b[55] >> 4) & 7) << 2) == 31) b[55] &= 0xBF;
        break;
    default:
        off[0] = 0;
        break; /* d at offset 0 */
    }
    for (int i = 0; i < 2; i++)
        if (off[i] >= 0 && ((b[off[i] + 1] >> 2) & 31) == 31) b[off[i] + 1] &= 0xBF;
}

static void random_block(uint32_t type, uint8_t *b, size_t size) {
    for (size_t i = 0; i < size; i++) b[i] = (uint8_t)rng();
    finite_scales(type, b);
}

static void test_random_paths(void **state) {
    (void)state;
    amn_simd paths[MAX_PATHS];
    const size_t npaths = simd_paths(paths);
    size_t compared = 0;
    for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++) {
        const gguf_type_traits *tr = gguf_type_traits_get(block_types[ti]);
        assert_non_null(tr);
        /* Odd block counts exercise every tail of the vector loops. */
        const size_t nblocks_list[] = {1, 2, 3, 7, 16, 67};
        for (size_t k = 0; k < sizeof nblocks_list / sizeof nblocks_list[0]; k++) {
            const size_t nb = nblocks_list[k], n = nb * tr->block_elems;
            uint8_t *raw = malloc(nb * tr->block_bytes + 1);
            uint8_t *ref = malloc(n * 4), *got = malloc(n * 4 + 64);
            assert_true(raw && ref && got);
            for (int rep = 0; rep < 4; rep++) {
                /* +1: an odd address for the blocks, as inside a file. */
                for (size_t i = 0; i < nb; i++)
                    random_block(tr->id, raw + 1 + i * tr->block_bytes, tr->block_bytes);
                const amn_dtype outs[] = {AMN_DTYPE_F32, AMN_DTYPE_BF16, AMN_DTYPE_F16};
                for (size_t o = 0; o < 3; o++) {
                    const size_t es = amn_dtype_size(outs[o]);
                    assert_int_equal(
                        gguf_dequantize_simd(tr->id, raw + 1, n, outs[o], ref, AMN_SIMD_SCALAR),
                        AMN_OK);
                    for (size_t p = 1; p < npaths; p++) {
                        /* Odd destination address too. */
                        assert_int_equal(
                            gguf_dequantize_simd(tr->id, raw + 1, n, outs[o], got + 1, paths[p]),
                            AMN_OK);
                        const size_t bad = count_diff(got + 1, ref, n, es);
                        if (bad)
                            fail_msg("%s to %s, %zu blocks: %s differs from scalar in %zu of %zu",
                                     tr->name, amn_dtype_name(outs[o]), nb, amn_simd_name(paths[p]),
                                     bad, n);
                        compared += n;
                    }
                    /* BF16 / F16 are F32 rounded once. */
                    if (outs[o] == AMN_DTYPE_F32) continue;
                    float *f32 = malloc(n * 4);
                    assert_non_null(f32);
                    assert_int_equal(gguf_dequantize_simd(tr->id, raw + 1, n, AMN_DTYPE_F32, f32,
                                                          AMN_SIMD_SCALAR),
                                     AMN_OK);
                    amn_le_to_host_n(f32, 4, n); /* output bytes to host floats */
                    for (size_t i = 0; i < n; i++) {
                        uint16_t h = outs[o] == AMN_DTYPE_BF16 ? amn_f32_to_bf16(f32[i])
                                                               : amn_f32_to_f16(f32[i]);
                        const uint16_t g = amn_load_le16(ref + 2 * i);
                        if (g != h)
                            fail_msg("%s: %s value %zu is not the rounded F32", tr->name,
                                     amn_dtype_name(outs[o]), i);
                    }
                    free(f32);
                }
            }
            free(raw);
            free(ref);
            free(got);
        }
    }
    fprintf(stderr, "random blocks: %zu values compared against the scalar path (%zu paths)\n",
            compared, npaths);
}

/* Hostile payloads: every byte random, so scales may be Inf or NaN. Nothing
 * to compare with ggml here, but every path must still give the same bytes
 * (NaNs included) and never read or write out of bounds. */
static void test_random_any_bits(void **state) {
    (void)state;
    amn_simd paths[MAX_PATHS];
    const size_t npaths = simd_paths(paths);
    for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++) {
        const gguf_type_traits *tr = gguf_type_traits_get(block_types[ti]);
        const size_t nb = 515, n = nb * tr->block_elems;
        uint8_t *raw = malloc(nb * tr->block_bytes), *ref = malloc(n * 4), *got = malloc(n * 4);
        assert_true(raw && ref && got);
        for (size_t i = 0; i < nb * tr->block_bytes; i++) raw[i] = (uint8_t)rng();
        /* Make sure Inf and NaN scales occur: all-ones exponents in a few blocks. */
        for (size_t i = 0; i < nb; i += 5) memset(raw + i * tr->block_bytes, 0xFF, 2);
        const amn_dtype outs[] = {AMN_DTYPE_F32, AMN_DTYPE_BF16, AMN_DTYPE_F16};
        for (size_t o = 0; o < 3; o++)
            for (size_t p = 1; p < npaths; p++) {
                const size_t es = amn_dtype_size(outs[o]);
                assert_int_equal(
                    gguf_dequantize_simd(tr->id, raw, n, outs[o], ref, AMN_SIMD_SCALAR), AMN_OK);
                assert_int_equal(gguf_dequantize_simd(tr->id, raw, n, outs[o], got, paths[p]),
                                 AMN_OK);
                const size_t bad = count_diff(got, ref, n, es);
                if (bad)
                    fail_msg("%s to %s: %s differs from scalar in %zu of %zu (any bits)", tr->name,
                             amn_dtype_name(outs[o]), amn_simd_name(paths[p]), bad, n);
            }
        free(raw);
        free(ref);
        free(got);
    }
}

/* ---- scale edge cases: the fused BF16 rounding ------------------------- */

/* Byte offsets of a type's f16 scales (-1: none; MXFP4's E8M0 byte is -2). */
static void scale_offsets(uint32_t type, int off[2]) {
    off[0] = 0, off[1] = -1;
    switch (type) {
    case GGUF_TYPE_Q4_1:
    case GGUF_TYPE_Q5_1:
    case GGUF_TYPE_Q4_K:
    case GGUF_TYPE_Q5_K:
        off[1] = 2;
        break;
    case GGUF_TYPE_Q6_K:
        off[0] = 208;
        break;
    case GGUF_TYPE_MXFP4:
        off[0] = -2;
        break;
    default:
        break;
    }
}

/* The vector BF16 paths round in registers (compare-based tie detection,
 * word blends, paired lookup tables that serve two blocks per register), and
 * F16 is narrowed by F16C there: every path must equal the scalar one, and
 * BF16 and F16 must be the F32 output rounded once, on scales that stress
 * the rounding: 1 + 2^-8 (exact ties for small codes, rounding down to even),
 * 1 + 3 * 2^-8 (ties rounding up), signed zeros, subnormals, the largest
 * half, infinities and NaNs (quiet and signalling, with payloads whose low
 * bits would carry into the BF16 if a NaN were rounded like a number).
 * Block counts are odd, so the pairing has a lone block. */
static void test_bf16_scale_edges(void **state) {
    (void)state;
    static const uint16_t halves[] = {0x3C04, 0x3C0C, 0xBC04, 0x3C01, 0x3BFF, 0x0000, 0x8000,
                                      0x0001, 0x03FF, 0x7BFF, 0xFBFF, 0x5BFF, 0x2001, 0x7C00,
                                      0xFC00, 0x7E00, 0x7C01, 0xFE01, 0x7C07, 0xFFFF};
    static const uint8_t e8m0[] = {0, 1, 2, 100, 127, 128, 200, 254, 255};
    static const uint32_t types[] = {GGUF_TYPE_Q8_0,   GGUF_TYPE_Q5_0, GGUF_TYPE_Q5_1,
                                     GGUF_TYPE_Q5_K,   GGUF_TYPE_Q6_K, GGUF_TYPE_Q4_0,
                                     GGUF_TYPE_Q4_1,   GGUF_TYPE_Q4_K, GGUF_TYPE_IQ4_NL,
                                     GGUF_TYPE_IQ4_XS, GGUF_TYPE_MXFP4};
    enum { NH = sizeof halves / sizeof halves[0] };
    amn_simd paths[MAX_PATHS];
    const size_t npaths = simd_paths(paths);
    size_t compared = 0;
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const gguf_type_traits *tr = gguf_type_traits_get(types[ti]);
        int off[2];
        scale_offsets(tr->id, off);
        /* One block per scale (pair); Q8_0 also cycles its 32 codes through
         * all 256 values, block after block. */
        const size_t nb = off[0] == -2 ? 2 * (sizeof e8m0) + 1 : 2 * NH + 1;
        const size_t n = nb * tr->block_elems;
        uint8_t *raw = malloc(nb * tr->block_bytes), *ref = malloc(n * 4), *got = malloc(n * 4);
        float *f32 = malloc(n * 4);
        assert_true(raw && ref && got && f32);
        for (size_t i = 0; i < nb; i++) {
            uint8_t *b = raw + i * tr->block_bytes;
            for (size_t j = 0; j < tr->block_bytes; j++) b[j] = (uint8_t)rng();
            if (tr->id == GGUF_TYPE_Q8_0)
                for (size_t j = 0; j < 32; j++) b[2 + j] = (uint8_t)(32 * (i % 8) + j);
            if (off[0] == -2) {
                b[0] = e8m0[i % sizeof e8m0];
                continue;
            }
            for (int k = 0; k < 2; k++) {
                if (off[k] < 0) continue;
                /* d runs through the list; m / dmin through it backwards */
                const uint16_t h = halves[k ? (NH - 1 - i % NH) : i % NH];
                b[off[k]] = (uint8_t)h;
                b[off[k] + 1] = (uint8_t)(h >> 8);
            }
        }
        assert_int_equal(gguf_dequantize_simd(tr->id, raw, n, AMN_DTYPE_F32, f32, AMN_SIMD_SCALAR),
                         AMN_OK);
        amn_le_to_host_n(f32, 4, n); /* output bytes to host floats */
        const amn_dtype outs[] = {AMN_DTYPE_F32, AMN_DTYPE_BF16, AMN_DTYPE_F16};
        for (size_t o = 0; o < 3; o++) {
            const size_t es = amn_dtype_size(outs[o]);
            assert_int_equal(gguf_dequantize_simd(tr->id, raw, n, outs[o], ref, AMN_SIMD_SCALAR),
                             AMN_OK);
            if (outs[o] != AMN_DTYPE_F32)
                for (size_t i = 0; i < n; i++) {
                    const uint16_t g = amn_load_le16(ref + 2 * i);
                    const uint16_t want = outs[o] == AMN_DTYPE_BF16 ? amn_f32_to_bf16(f32[i])
                                                                    : amn_f32_to_f16(f32[i]);
                    if (g != want)
                        fail_msg("%s: scalar %s value %zu is not the rounded F32", tr->name,
                                 amn_dtype_name(outs[o]), i);
                }
            for (size_t p = 1; p < npaths; p++) {
                memset(got, 0xA5, n * 4);
                assert_int_equal(gguf_dequantize_simd(tr->id, raw, n, outs[o], got, paths[p]),
                                 AMN_OK);
                const size_t bad = count_diff(got, ref, n, es);
                if (bad)
                    fail_msg("%s to %s (edge scales): %s differs from scalar in %zu of %zu",
                             tr->name, amn_dtype_name(outs[o]), amn_simd_name(paths[p]), bad, n);
                for (size_t i = n * es; i < n * 4; i++) assert_int_equal(got[i], 0xA5);
                compared += n;
            }
        }
        free(raw);
        free(ref);
        free(got);
        free(f32);
    }
    fprintf(stderr, "edge scales: %zu values compared against the scalar path\n", compared);
}

/* ---- known answers from ggml ------------------------------------------- */

/* SHA-256 of the F32 output of ggml's own dequantize_row_<type> (ggml-org/ggml
 * commit d99724f2, src/ggml-quants.c, built apart from this project with gcc
 * 12 at -O2 -ffp-contract=off and again at -O3 -march=native: same hashes) for
 * 16384 elements of the blocks kat_blocks() generates. This is what covers
 * Q2_K and IQ1_M, which have no golden file. */
static const struct {
    uint32_t type;
    const char *sha;
} kat_hashes[] = {
    {GGUF_TYPE_Q4_0, "50620949550dafc0b0080a150fac56433e4cc69c356cb14932fde955d9878060"},
    {GGUF_TYPE_Q4_1, "ba4c1dbc842bb6f010bfb211238ffe88a57e8adc48eeb9c908eb8a4991e1a18b"},
    {GGUF_TYPE_Q5_0, "82f509aebbc98acb0a4fcd1cebe24842c466138b202d4a45d90422fe02380abb"},
    {GGUF_TYPE_Q5_1, "2eb73f60c2756ed60c83adeabf2f69782b116b50453f3fc077237542ff4f1ae1"},
    {GGUF_TYPE_Q8_0, "8baccbb7bbe82a152eaeedc3c6ccfbf2e0e803ec9260c16b0c42b2284db9fa44"},
    {GGUF_TYPE_Q2_K, "04d126624a93c2e310c515c300523e8166b39b8396e53b6883f04ace3cf00580"},
    {GGUF_TYPE_Q3_K, "f6ecb301bb695aab8e371b5d7dc3048637dc30b43dabab7e0e929a74e3b34c62"},
    {GGUF_TYPE_Q4_K, "4fea4132a3bc9b1afef8a1400d3a3d58d6fee489a9d305183256916dc36d0b2e"},
    {GGUF_TYPE_Q5_K, "9c393f28d6f7fdd6a77845a53892c8a56a1128bb1f790612c7c1ef59633399da"},
    {GGUF_TYPE_Q6_K, "a53dc2fc3f2cf47719e2a0f2995098a6858794ffae4bcdbf1653d348bed203cf"},
    {GGUF_TYPE_IQ2_XXS, "a756093b387e9c96e85fa0324d13913bbf25a525ac1d38eb5a65d43f94bc5bcf"},
    {GGUF_TYPE_IQ2_XS, "77ecdb8d3a78f885e10a4f0163ad2203a881bc97862d2ad8b25639df7b858614"},
    {GGUF_TYPE_IQ2_S, "47df97b0d7a2a495c0f229c361e51c5d83de94d626534da9af6110bcd444e34d"},
    {GGUF_TYPE_IQ3_XXS, "6339ac9a1c97d83a2330dc77091b09f24ee2ba5119f35d228e7f6a083b6931f8"},
    {GGUF_TYPE_IQ3_S, "5ce4c82cf75f12b4c3225aedeaa0d737d293c2660f77c2fd6e3622dd8d7f0f2b"},
    {GGUF_TYPE_IQ1_S, "4df94549ac54233742d65e62b62ae7b91d68deaa348418883ec9a8100c732fe0"},
    {GGUF_TYPE_IQ1_M, "420f58a817b468e43b27938d60617518f6c15481b26fb33fd55bb6f2197d360a"},
    {GGUF_TYPE_IQ4_NL, "444c306926c890a4dc681cf5ea185741abe24a8dfde72acd8f705b957c03b1df"},
    {GGUF_TYPE_IQ4_XS, "74e3679631450d4000246c135e3313de24f77e641cfe80ef8cd1d798beeebbbc"},
    {GGUF_TYPE_TQ1_0, "60ce4168ab2ecd1c47d39c2270579129770636074902c89340783c669859d540"},
    {GGUF_TYPE_TQ2_0, "27a728f65b38f4c54babcfb10c17689c177caebfbeed73efff24b3e1091438d0"},
    {GGUF_TYPE_MXFP4, "70118e2e05ec758e418b9a3b5ef92e53d7d7ed0fae19ef5bfb9f4d94d55317fc"},
};

#define KAT_ELEMS 16384

static void kat_blocks(const gguf_type_traits *tr, uint8_t *raw) {
    rng_state = 0x4B41540000000000ull ^ tr->id; /* "KAT" */
    for (size_t k = 0; k < KAT_ELEMS / tr->block_elems; k++) {
        uint8_t *b = raw + k * tr->block_bytes;
        for (size_t j = 0; j < tr->block_bytes; j++) b[j] = (uint8_t)rng();
        finite_scales(tr->id, b);
    }
}

static void test_known_answers(void **state) {
    (void)state;
    amn_simd paths[MAX_PATHS];
    const size_t npaths = simd_paths(paths);
    const size_t nkat = sizeof kat_hashes / sizeof kat_hashes[0];
    assert_int_equal(nkat, N_BLOCK_TYPES - 2); /* all but Q1_0 / Q2_0 */
    float *out = malloc(KAT_ELEMS * 4);
    assert_non_null(out);
    for (size_t i = 0; i < nkat; i++) {
        const gguf_type_traits *tr = gguf_type_traits_get(kat_hashes[i].type);
        uint8_t *raw = malloc(KAT_ELEMS / tr->block_elems * tr->block_bytes);
        assert_non_null(raw);
        kat_blocks(tr, raw);
        for (size_t p = 0; p < npaths; p++) {
            char hex[65];
            assert_int_equal(
                gguf_dequantize_simd(tr->id, raw, KAT_ELEMS, AMN_DTYPE_F32, out, paths[p]), AMN_OK);
            sha256_of(out, KAT_ELEMS * 4, hex);
            if (strcmp(hex, kat_hashes[i].sha) != 0)
                fail_msg("%s on %s: output differs from ggml's (sha256 %s)", tr->name,
                         amn_simd_name(paths[p]), hex);
        }
        free(raw);
    }
    free(out);
}

/* A run split anywhere gives the same bytes: each call is independent. Runs
 * through gguf_dequantize, so under each AMN_SIMD setting as well. */
static void test_split_invariance(void **state) {
    (void)state;
    const char *levels[] = {"scalar", "avx2", "avx512"};
    char saved[32] = "";
    const char *env = getenv("AMN_SIMD");
    if (env) snprintf(saved, sizeof saved, "%s", env);
    for (size_t ti = 0; ti < N_BLOCK_TYPES; ti++) {
        const gguf_type_traits *tr = gguf_type_traits_get(block_types[ti]);
        const size_t nb = 37, n = nb * tr->block_elems;
        uint8_t *raw = malloc(nb * tr->block_bytes);
        uint8_t *whole = malloc(n * 2), *parts = malloc(n * 2);
        assert_true(raw && whole && parts);
        for (size_t i = 0; i < nb; i++)
            random_block(tr->id, raw + i * tr->block_bytes, tr->block_bytes);
        assert_int_equal(
            gguf_dequantize_simd(tr->id, raw, n, AMN_DTYPE_BF16, whole, AMN_SIMD_SCALAR), AMN_OK);
        for (size_t lv = 0; lv < 3; lv++) {
            assert_int_equal(setenv("AMN_SIMD", levels[lv], 1), 0);
            memset(parts, 0, n * 2);
            for (size_t i = 0; i < nb;) {
                const size_t step = 1 + (size_t)(rng() % 9), k = step < nb - i ? step : nb - i;
                assert_int_equal(gguf_dequantize(tr->id, raw + i * tr->block_bytes,
                                                 k * tr->block_elems, AMN_DTYPE_BF16,
                                                 parts + i * tr->block_elems * 2),
                                 AMN_OK);
                i += k;
            }
            assert_memory_equal(whole, parts, n * 2);
        }
        if (env)
            setenv("AMN_SIMD", saved, 1);
        else
            unsetenv("AMN_SIMD");
        free(raw);
        free(whole);
        free(parts);
    }
}

/* ---- the type table and bad arguments ----------------------------------- */

static void test_type_table(void **state) {
    (void)state;
    size_t quant = 0;
    for (uint32_t id = 0; id < GGUF_TYPE_COUNT; id++) {
        const gguf_type_traits *tr = gguf_type_traits_get(id);
        assert_non_null(tr);
        assert_int_equal(tr->id, id);
        assert_non_null(tr->name);
        if (tr->kind == GGUF_KIND_QUANT) {
            quant++;
            assert_non_null(gguf_scalar_kernel(id));
            assert_true(gguf_type_can_dequantize(tr));
        } else {
            assert_null(gguf_scalar_kernel(id));
        }
    }
    assert_int_equal(quant, N_BLOCK_TYPES);
    for (size_t i = 0; i < N_BLOCK_TYPES; i++)
        assert_int_equal(gguf_type_traits_get(block_types[i])->kind, GGUF_KIND_QUANT);
    assert_null(gguf_type_traits_get(GGUF_TYPE_COUNT));
    assert_null(gguf_type_traits_get(UINT32_MAX));
    assert_int_equal(gguf_type_traits_get(GGUF_TYPE_Q4_2)->kind, GGUF_KIND_RETIRED);
    assert_int_equal(gguf_type_traits_get(GGUF_TYPE_Q8_K)->kind, GGUF_KIND_NO_KERNEL);
    assert_string_equal(gguf_type_traits_get(GGUF_TYPE_Q4_K)->name, "Q4_K");
    assert_string_equal(gguf_type_traits_get(GGUF_TYPE_IQ2_XXS)->label, "GGUF IQ2_XXS");

    uint64_t nb = 0;
    assert_true(gguf_type_nbytes(gguf_type_traits_get(GGUF_TYPE_Q4_K), 512, &nb));
    assert_int_equal(nb, 288);
    assert_false(gguf_type_nbytes(gguf_type_traits_get(GGUF_TYPE_Q4_K), 100, &nb));
    assert_false(gguf_type_nbytes(gguf_type_traits_get(GGUF_TYPE_Q4_2), 32, &nb));
    assert_false(gguf_type_nbytes(gguf_type_traits_get(GGUF_TYPE_Q8_0), UINT64_MAX - 31, &nb));
    assert_true(gguf_type_nbytes(gguf_type_traits_get(GGUF_TYPE_F16), 3, &nb));
    assert_int_equal(nb, 6);
}

static void test_bad_arguments(void **state) {
    (void)state;
    uint8_t blk[256] = {0};
    float out[256];
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q8_K, blk, 256, AMN_DTYPE_F32, out),
                     AMN_E_UNSUPPORTED);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_3, blk, 32, AMN_DTYPE_F32, out),
                     AMN_E_UNSUPPORTED);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_I32, blk, 4, AMN_DTYPE_F32, out), AMN_E_UNSUPPORTED);
    assert_int_equal(gguf_dequantize(1000, blk, 32, AMN_DTYPE_F32, out), AMN_E_UNSUPPORTED);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_0, blk, 31, AMN_DTYPE_F32, out), AMN_E_INVALID);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_0, blk, 32, AMN_DTYPE_I8, out), AMN_E_INVALID);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_0, blk, 32, AMN_DTYPE_F64, out), AMN_E_INVALID);
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_0, blk, 0, AMN_DTYPE_F32, out), AMN_OK);
    /* Element counts whose byte size cannot exist. */
    assert_int_equal(gguf_dequantize(GGUF_TYPE_Q4_0, blk, UINT64_MAX - 31, AMN_DTYPE_F32, out),
                     AMN_E_INVALID);
    /* Plain float types go through the core's exact conversions. */
    const uint16_t h[4] = {amn_htole16(0x3c00), amn_htole16(0xc000), amn_htole16(0x8000),
                           amn_htole16(0x7bff)};
    assert_int_equal(gguf_dequantize(GGUF_TYPE_F16, h, 4, AMN_DTYPE_F32, out), AMN_OK);
    amn_le_to_host_n(out, 4, 4);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && amn_f32_bits(out[2]) == 0x80000000u &&
                out[3] == 65504.0f);
}

/* The shared f16 decoder equals the core's on every non-NaN half, and
 * quiets NaNs as F16C does. */
static void test_f16_decoder(void **state) {
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        const uint32_t got = amn_f32_bits(gguf_f16_to_f32((uint16_t)h));
        const uint32_t want = amn_f32_bits(amn_f16_to_f32((uint16_t)h));
        if (((h >> 10) & 31) == 31 && (h & 0x3ff))
            assert_int_equal(got, want | 0x400000u);
        else
            assert_int_equal(got, want);
    }
    assert_int_equal(amn_f32_bits(gguf_e8m0_half(0)), 0x00200000u);
    assert_int_equal(amn_f32_bits(gguf_e8m0_half(1)), 0x00400000u);
    assert_true(gguf_e8m0_half(128) == 1.0f);
    assert_true(gguf_e8m0_half(255) == 0x1p127f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),       cmocka_unit_test(test_f16_decoder),
        cmocka_unit_test(test_bad_arguments),    cmocka_unit_test(test_goldens),
        cmocka_unit_test(test_random_paths),     cmocka_unit_test(test_random_any_bits),
        cmocka_unit_test(test_known_answers),    cmocka_unit_test(test_split_invariance),
        cmocka_unit_test(test_bf16_scale_edges),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
