/* ggml_validate_row_data (gguf_validate.h). Where each block keeps its
 * scale comes from ggml-common.h's block structs. */
#include "gguf_validate.h"

#include <stddef.h>
#include <string.h>

#include "gguf_quant_impl.h"
#include "gguf_types.h"

typedef enum {
    V_NONE, /* nothing to check (integers, NVFP4) */
    V_F32,  /* plain values */
    V_F16,
    V_BF16,
    V_F64,
    V_D16,   /* an F16 scale at .d in each block */
    V_DM16,  /* F16 scale and minimum at .d, .d + 2 */
    V_D32,   /* an F32 scale (Q8_K) */
    V_E8M0,  /* MXFP4's exponent byte */
    V_IQ1_M, /* IQ1_M's scale, spread over the top nibbles of its scales */
} v_kind;

static const struct {
    uint32_t type;
    v_kind kind;
    uint16_t d; /* byte offset of the scale in the block */
} checks[] = {
    {GGUF_TYPE_F32, V_F32, 0},      {GGUF_TYPE_F16, V_F16, 0},     {GGUF_TYPE_BF16, V_BF16, 0},
    {GGUF_TYPE_F64, V_F64, 0},      {GGUF_TYPE_Q4_0, V_D16, 0},    {GGUF_TYPE_Q4_1, V_DM16, 0},
    {GGUF_TYPE_Q5_0, V_D16, 0},     {GGUF_TYPE_Q5_1, V_DM16, 0},   {GGUF_TYPE_Q8_0, V_D16, 0},
    {GGUF_TYPE_Q1_0, V_D16, 0},     {GGUF_TYPE_Q2_0, V_D16, 0},    {GGUF_TYPE_MXFP4, V_E8M0, 0},
    {GGUF_TYPE_Q2_K, V_DM16, 80},   {GGUF_TYPE_Q3_K, V_D16, 108},  {GGUF_TYPE_Q4_K, V_DM16, 0},
    {GGUF_TYPE_Q5_K, V_DM16, 0},    {GGUF_TYPE_Q6_K, V_D16, 208},  {GGUF_TYPE_Q8_K, V_D32, 0},
    {GGUF_TYPE_TQ1_0, V_D16, 52},   {GGUF_TYPE_TQ2_0, V_D16, 64},  {GGUF_TYPE_IQ1_S, V_D16, 0},
    {GGUF_TYPE_IQ1_M, V_IQ1_M, 48}, {GGUF_TYPE_IQ2_XXS, V_D16, 0}, {GGUF_TYPE_IQ2_XS, V_D16, 0},
    {GGUF_TYPE_IQ2_S, V_D16, 0},    {GGUF_TYPE_IQ3_XXS, V_D16, 0}, {GGUF_TYPE_IQ3_S, V_D16, 0},
    {GGUF_TYPE_IQ4_XS, V_D16, 0},   {GGUF_TYPE_IQ4_NL, V_D16, 0},
};

static uint16_t le16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

static const char *f16_bad(uint16_t h) {
    if ((h & 0x7C00u) != 0x7C00u) return NULL;
    return h & 0x03FFu ? "NaN" : "infinity";
}

static const char *f32_bad(uint32_t w) {
    if ((w & 0x7F800000u) != 0x7F800000u) return NULL;
    return w & 0x007FFFFFu ? "NaN" : "infinity";
}

static const char *bf16_bad(uint16_t h) {
    return f32_bad((uint32_t)h << 16);
}

static const char *f64_bad(uint64_t w) {
    if ((w & 0x7FF0000000000000ull) != 0x7FF0000000000000ull) return NULL;
    return w & 0x000FFFFFFFFFFFFFull ? "NaN" : "infinity";
}

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16;
}

/* Element or block i's flaw, or NULL. */
static const char *bad(v_kind k, const uint8_t *p, uint16_t d) {
    switch (k) {
    case V_F32:
        return f32_bad(le32(p));
    case V_F16:
        return f16_bad(le16(p));
    case V_BF16:
        return bf16_bad(le16(p));
    case V_F64:
        return f64_bad((uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32);
    case V_D16:
        return f16_bad(le16(p + d));
    case V_DM16: {
        const char *w = f16_bad(le16(p + d));
        return w ? w : f16_bad(le16(p + d + 2));
    }
    case V_D32:
        return f32_bad(le32(p + d));
    case V_E8M0:
        return p[d] == 0xFF ? "exponent 0xFF" : NULL;
    case V_IQ1_M: { /* iq1m_scale_t: bits 12..15 of its four 16-bit scales */
        const uint8_t *s = p + d;
        return f16_bad((uint16_t)((le16(s) >> 12) | ((le16(s + 2) >> 8) & 0x00F0u) |
                                  ((le16(s + 4) >> 4) & 0x0F00u) | (le16(s + 6) & 0xF000u)));
    }
    default:
        return NULL;
    }
}

bool gguf_valid_bytes(uint32_t type, const uint8_t *data, uint64_t nbytes, uint64_t *at,
                      const char **what) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    for (size_t c = 0; tr && c < sizeof checks / sizeof *checks; c++) {
        if (checks[c].type != type) continue;
        const uint64_t step = tr->block_bytes; /* a plain type's: its element's */
        for (uint64_t i = 0; step && i < nbytes / step; i++) {
            const char *w = bad(checks[c].kind, data + i * step, checks[c].d);
            if (w) {
                *at = i;
                *what = w;
                return false;
            }
        }
        return true;
    }
    return true;
}

/* Whether any of 256 floats has the exponent of an infinity or a NaN:
 * (bits & exponent) + one exponent step carries into the sign bit exactly
 * then. Branch-free, a fixed count: compilers vectorize it (this check
 * runs beside every quantizer; AVX2 takes 8 values a step where the CPU
 * has it). */
static bool any_nonfinite_256(const float *x) {
    uint32_t w[256], acc = 0;
    memcpy(w, x, sizeof w);
    for (int i = 0; i < 256; i++) acc |= (w[i] & 0x7F800000u) + 0x00800000u;
    return acc & 0x80000000u;
}

bool gguf_valid_floats(const float *x, uint64_t n, amn_simd level, uint64_t *at,
                       const char **what) {
    uint64_t i = 0;
#if AMN_GGUF_QUANT_AVX2
    if (level >= AMN_SIMD_AVX2)
        while (i + 256 <= n && gq_all_finite_avx2(x + i, 256)) i += 256;
#else
    (void)level; /* one path off x86-64 */
#endif
    while (i + 256 <= n && !any_nonfinite_256(x + i)) i += 256;
    for (; i < n; i++) {
        uint32_t w;
        memcpy(&w, &x[i], sizeof w);
        const char *b = f32_bad(w);
        if (b) {
            *at = i;
            *what = b;
            return false;
        }
    }
    return true;
}
