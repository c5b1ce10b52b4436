/* Element types: names, sizes and exact scalar conversions. */
#include <math.h>
#include <string.h>

#include "amn/dtype.h"
#include "amn/byteorder.h"
#include "dtype_internal.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[AMN_DTYPE_COUNT] = {
    [AMN_DTYPE_INVALID] = {"INVALID", 0}, [AMN_DTYPE_BOOL] = {"BOOL", 1},
    [AMN_DTYPE_U8] = {"U8", 1},           [AMN_DTYPE_I8] = {"I8", 1},
    [AMN_DTYPE_U16] = {"U16", 2},         [AMN_DTYPE_I16] = {"I16", 2},
    [AMN_DTYPE_U32] = {"U32", 4},         [AMN_DTYPE_I32] = {"I32", 4},
    [AMN_DTYPE_U64] = {"U64", 8},         [AMN_DTYPE_I64] = {"I64", 8},
    [AMN_DTYPE_F8_E4M3] = {"F8_E4M3", 1}, [AMN_DTYPE_F8_E5M2] = {"F8_E5M2", 1},
    [AMN_DTYPE_F16] = {"F16", 2},         [AMN_DTYPE_BF16] = {"BF16", 2},
    [AMN_DTYPE_F32] = {"F32", 4},         [AMN_DTYPE_F64] = {"F64", 8},
    [AMN_DTYPE_BLOCK] = {"BLOCK", 0},     [AMN_DTYPE_C64] = {"C64", 8},
    [AMN_DTYPE_C128] = {"C128", 16},
};

size_t amn_dtype_size(amn_dtype t) {
    return (unsigned)t < AMN_DTYPE_COUNT ? dtype_info[t].size : 0;
}

const char *amn_dtype_name(amn_dtype t) {
    return (unsigned)t < AMN_DTYPE_COUNT ? dtype_info[t].name : "INVALID";
}

amn_dtype amn_dtype_from_name(const char *name) {
    if (!name) return AMN_DTYPE_INVALID;
    for (int t = AMN_DTYPE_BOOL; t < AMN_DTYPE_COUNT; t++)
        if (t != AMN_DTYPE_BLOCK && strcmp(dtype_info[t].name, name) == 0) return (amn_dtype)t;
    return AMN_DTYPE_INVALID;
}

amn_dtype amn_dtype_from_cli(const char *name) {
    if (!name) return AMN_DTYPE_INVALID;
    if (strcmp(name, "bf16") == 0 || strcmp(name, "BF16") == 0) return AMN_DTYPE_BF16;
    if (strcmp(name, "f16") == 0 || strcmp(name, "F16") == 0) return AMN_DTYPE_F16;
    if (strcmp(name, "f32") == 0 || strcmp(name, "F32") == 0) return AMN_DTYPE_F32;
    return AMN_DTYPE_INVALID;
}

bool amn_dtype_is_float(amn_dtype t) {
    return t == AMN_DTYPE_F8_E4M3 || t == AMN_DTYPE_F8_E5M2 || t == AMN_DTYPE_F16 ||
           t == AMN_DTYPE_BF16 || t == AMN_DTYPE_F32 || t == AMN_DTYPE_F64;
}

float amn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    /* A NaN comes back quiet, as F16C's conversion returns it. */
    if (exp == 0x1f) return amn_bits_f32(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (man == 0) return amn_bits_f32(sign);
        /* Subnormal: man * 2^-24 is exact in binary32. */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return amn_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* Round a finite or special double to a binary format with `ebits` exponent and
 * `mbits` stored mantissa bits (IEEE layout, <= 16 bits), nearest-even, once. */
static uint32_t round_f64_small(double d, int ebits, int mbits) {
    uint64_t u;
    memcpy(&u, &d, 8);
    const uint32_t sbit = (uint32_t)(u >> 63) << (ebits + mbits);
    const uint64_t exp = (u >> 52) & 0x7ffu, man = u & ((1ull << 52) - 1);
    const int bias = (1 << (ebits - 1)) - 1;
    const uint32_t expmax = (1u << ebits) - 1;
    if (exp == 0x7ff) {
        if (man == 0) return sbit | (expmax << mbits);
        return sbit | (expmax << mbits) | (1u << (mbits - 1)) | (uint32_t)(man >> (52 - mbits));
    }
    if (exp == 0 && man == 0) return sbit;
    int64_t e = exp ? (int64_t)exp - 1075 : -1074;
    uint64_t sig = exp ? (man | (1ull << 52)) : man;
    const int64_t lg = (63 - __builtin_clzll(sig)) + e; /* floor(log2 |d|) */
    const int64_t emin = 1 - bias;
    const bool subnormal = lg < emin;
    const int64_t qexp = (subnormal ? emin : lg) - mbits; /* exponent of one ulp */
    const int64_t shift = qexp - e;                       /* > 0 for every f64 here */
    uint64_t q;
    if (shift >= 64) {
        q = 0; /* below half an ulp of the smallest subnormal */
    } else {
        const uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
        q = sig >> shift;
        if (rem > half || (rem == half && (q & 1))) q++;
    }
    if (subnormal) return sbit | (uint32_t)q; /* q == 2^mbits encodes the min normal */
    int64_t be = qexp + mbits + bias;
    if (q >> (mbits + 1)) {
        q >>= 1;
        be++;
    }
    if (be >= (int64_t)expmax) return sbit | (expmax << mbits);
    return sbit | (uint32_t)(be << mbits) | (uint32_t)(q & ((1u << mbits) - 1));
}

uint16_t amn_f32_to_f16(float f) {
    return (uint16_t)round_f64_small((double)f, 5, 10);
}
uint16_t amn_f64_to_f16(double d) {
    return (uint16_t)round_f64_small(d, 5, 10);
}
uint16_t amn_f64_to_bf16(double d) {
    return (uint16_t)round_f64_small(d, 8, 7);
}

float amn_f8e4m3_to_f32(uint8_t b) {
    const uint32_t s = b >> 7, e = (b >> 3) & 15u, m = b & 7u;
    float v;
    if ((b & 0x7f) == 0x7f) return amn_bits_f32((s << 31) | 0x7fc00000u);
    if (e == 0)
        v = (float)m * 0x1p-9f;
    else
        v = amn_bits_f32(((e + 120u) << 23) | (m << 20));
    return s ? -v : v;
}

float amn_f8e5m2_to_f32(uint8_t b) {
    const uint32_t s = b >> 7, e = (b >> 2) & 31u, m = b & 3u;
    float v;
    if (e == 31) return amn_bits_f32((s << 31) | 0x7f800000u | (m ? 0x00400000u | (m << 21) : 0));
    if (e == 0)
        v = (float)m * 0x1p-16f;
    else
        v = amn_bits_f32(((e + 112u) << 23) | (m << 21));
    return s ? -v : v;
}

/* ---- bulk conversion ---------------------------------------------------- */

static float load_f32(amn_dtype t, const uint8_t *p) {
    switch (t) {
    case AMN_DTYPE_F8_E4M3:
        return amn_f8e4m3_to_f32(*p);
    case AMN_DTYPE_F8_E5M2:
        return amn_f8e5m2_to_f32(*p);
    case AMN_DTYPE_F16:
        return amn_f16_to_f32(amn_load_le16(p));
    case AMN_DTYPE_BF16:
        return amn_bf16_to_f32(amn_load_le16(p));
    default:
        return amn_load_le_f32(p);
    }
}

static double load_f64(const uint8_t *p) {
    const uint64_t u = amn_load_le64(p);
    double x;
    memcpy(&x, &u, 8);
    return x;
}

static void store_f64(uint8_t *p, double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    amn_store_le64(p, u);
}

void amni_convert_scalar(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    const size_t ss = amn_dtype_size(from), ds = amn_dtype_size(to);
    for (size_t i = 0; i < n; i++, s += ss, d += ds) {
        if (from == AMN_DTYPE_F64) {
            const double x = load_f64(s);
            switch (to) {
            case AMN_DTYPE_F64:
                store_f64(d, x);
                break;
            case AMN_DTYPE_F32:
                amn_store_le_f32(d, (float)x);
                break;
            case AMN_DTYPE_F16:
                amn_store_le16(d, amn_f64_to_f16(x));
                break;
            default:
                amn_store_le16(d, amn_f64_to_bf16(x));
                break;
            }
            continue;
        }
        const float x = load_f32(from, s); /* exact: every source fits binary32 */
        switch (to) {
        case AMN_DTYPE_F64:
            store_f64(d, x);
            break;
        case AMN_DTYPE_F32:
            amn_store_le_f32(d, x);
            break;
        case AMN_DTYPE_F16:
            amn_store_le16(d, amn_f32_to_f16(x));
            break;
        default:
            amn_store_le16(d, amn_f32_to_bf16(x));
            break;
        }
    }
}

static bool convertible(amn_dtype from, amn_dtype to) {
    const bool src_ok = amn_dtype_is_float(from);
    const bool dst_ok =
        to == AMN_DTYPE_F16 || to == AMN_DTYPE_BF16 || to == AMN_DTYPE_F32 || to == AMN_DTYPE_F64;
    return src_ok && dst_ok;
}

int amn_convert_elems(amn_dtype from, const void *src, amn_dtype to, void *dst, size_t n) {
    if (!convertible(from, to)) return -1;
    if (from == to) {
        memcpy(dst, src, n * amn_dtype_size(from));
        return 0;
    }
    const amni_simd_level lvl = amni_simd_level_get();
    if (AMN_SIMD_X86 && lvl >= AMNI_SIMD_AVX512 && amni_convert_avx512(from, src, to, dst, n))
        return 0;
    if (AMN_SIMD_X86 && lvl >= AMNI_SIMD_AVX2 && amni_convert_avx2(from, src, to, dst, n)) return 0;
    amni_convert_scalar(from, src, to, dst, n);
    return 0;
}

int amn_store_f32(const float *src, amn_dtype to, void *dst, size_t n) {
    if (to != AMN_DTYPE_F32 && to != AMN_DTYPE_F16 && to != AMN_DTYPE_BF16) return -1;
    if (AMN_HOST_BIG_ENDIAN) { /* src holds host floats, not little-endian bytes */
        uint8_t *d = dst;
        const size_t ds = amn_dtype_size(to);
        for (size_t i = 0; i < n; i++, d += ds)
            if (to == AMN_DTYPE_F32)
                amn_store_le_f32(d, src[i]);
            else
                amn_store_le16(d, to == AMN_DTYPE_F16 ? amn_f32_to_f16(src[i])
                                                      : amn_f32_to_bf16(src[i]));
        return 0;
    }
    return amn_convert_elems(AMN_DTYPE_F32, src, to, dst, n);
}
