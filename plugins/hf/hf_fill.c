/* Writing one output's rows (hf_convert.h): read the source rows as F32
 * (permuted for llama's q / k), apply the family's transform, store as the
 * output type: F32, F16 or BF16 rounded to nearest even, or Q8_0, TQ1_0,
 * TQ2_0 as gguf-py's quants.py (and ggml's reference quantize_row_*)
 * makes them. */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/kit/ternary.h"
#include "hf_convert.h"

/* The source row of output row r (LlamaModel.permute: the halves of each
 * head's rows interleaved). */
static uint64_t source_row(const hf_out *t, uint64_t r) {
    if (t->xform != HF_X_PERMUTE_Q && t->xform != HF_X_PERMUTE_K) return r;
    const uint64_t half = t->rows / t->n_head / 2;
    const uint64_t h = r / (2 * half), rem = r % (2 * half);
    return h * 2 * half + (rem % 2) * half + rem / 2;
}

/* The source row of output row r, and into *run how many of the next
 * rows (at most max) follow it there: one read each run. */
static uint64_t source_run(const hf_out *t, uint64_t r, uint64_t max, uint64_t *run) {
    if (t->part_rows) {
        const uint64_t per = t->part_rows, in = r % per;
        *run = per - in < max ? per - in : max;
        return (r / per) * t->part_stride + t->part_off + in;
    }
    if (t->xform == HF_X_PERMUTE_Q || t->xform == HF_X_PERMUTE_K) {
        *run = 1;
        return source_row(t, r);
    }
    *run = max;
    return r;
}

/* x + 1 as the converter computes it: in the dtype the tensor has when
 * modify_tensors runs, i.e. F16 stays F16 (the sum rounded to F16) while
 * BF16 was already widened to F32 (prepare_tensors), so its sum is F32. */
static void plus_one(float *x, uint64_t n, amn_dtype src) {
    for (uint64_t i = 0; i < n; i++) {
        const float y = x[i] + 1.0f;
        if (src == AMN_DTYPE_F16) {
            x[i] = amn_f16_to_f32(amn_f32_to_f16(y));
        } else {
            x[i] = y;
        }
    }
}

/* np_roundf: round half away from zero. */
static float roundf_np(float v) {
    const float a = fabsf(v), f = floorf(a);
    const float b = f + floorf(2.0f * (a - f));
    return v < 0 ? -b : (v > 0 ? b : 0.0f * b);
}

/* abs(x).max() as numpy computes it: where any value is NaN, its default
 * NaN (0x7FC00000, whatever the NaNs' signs and payloads). */
static float np_absmax(const float *x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; j++) {
        if (isnan(x[j])) return amn_bits_f32(0x7FC00000u);
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]);
    }
    return amax;
}

/* A float cast to int8 as numpy casts it on x86-64: the low byte of its
 * truncation to int32 (cvttss2si), 0 for NaN and what lies out of range. */
static uint8_t np_int8(float f) {
    if (!(f >= -2147483648.0f && f < 2147483648.0f)) return 0;
    return (uint8_t)(int32_t)f;
}

/* gguf-py's Q8_0.quantize_blocks. */
static void q8_0_row(const float *x, uint64_t n, uint8_t *dst) {
    for (uint64_t b = 0; b < n / 32; b++, x += 32, dst += 34) {
        const float d = np_absmax(x, 32) / 127.0f;
        const float id = d == 0.0f ? 0.0f : 1.0f / d;
        amn_store_le16(dst, amn_f32_to_f16(d)); /* GGUF blocks are little-endian */
        for (int j = 0; j < 32; j++) dst[2 + j] = np_int8(roundf_np(x[j] * id));
    }
}

/* gguf-py's TQ1_0 / TQ2_0.quantize_blocks: d the largest magnitude, codes
 * np_roundf(x / d) + 1 (every |x / d| is at most 1, where that is the
 * kit's lroundf; a NaN block's codes are 1 either way), ggml's packing. */
static void tq_row(const float *x, uint64_t n, uint32_t type, uint8_t *dst) {
    const bool one = type == HF_TQ1_0;
    const size_t codes = one ? KIT_TQ1_0_CODES : KIT_TQ2_0_CODES;
    const size_t bytes = one ? KIT_TQ1_0_BYTES : KIT_TQ2_0_BYTES;
    int8_t t[KIT_TQ_BLOCK];
    for (uint64_t b = 0; b < n / KIT_TQ_BLOCK; b++, x += KIT_TQ_BLOCK, dst += bytes) {
        const float d = np_absmax(x, KIT_TQ_BLOCK);
        kit_tq_codes(x, d == 0.0f ? 0.0f : 1.0f / d, t);
        if (one)
            kit_tq1_0_pack(t, dst);
        else
            kit_tq2_0_pack(t, dst);
        amn_store_le16(dst + codes, amn_f32_to_f16(d));
    }
}

static void block_row(const hf_out *t, const float *x, uint8_t *dst) {
    if (t->block == HF_Q8_0)
        q8_0_row(x, t->cols, dst);
    else
        tq_row(x, t->cols, t->block, dst);
}

/* A group of a transposed part read whole when it is at most this many
 * values (DeepSeek's k_b: 128 x 512), else only the columns the rows need,
 * a span per source row (gpt-oss-20b's experts: 2880 x 5760 a group, and a
 * chunk needs a few hundred of its columns). */
#define GROUP_WHOLE (1u << 18)

/* Elements [e0, e0 + n) of a stored float tensor as host F32 (what the
 * core's read gives), through bytes (n elements of its dtype). */
static int read_raw(const amn_tensor *t, uint64_t e0, uint64_t n, uint8_t *bytes, float *dst,
                    amn_error *err) {
    const size_t es = amn_dtype_size(t->dtype);
    int rc = amn_tensor_read(t, e0 * es, bytes, n * es, err);
    if (!rc && amn_convert_elems(t->dtype, bytes, AMN_DTYPE_F32, dst, (size_t)n))
        rc = amn_error_set(err, AMN_E_INVALID, "%s: %s values cannot be read", t->name,
                           amn_dtype_name(t->dtype));
    if (!rc) amn_le_to_host_n(dst, 4, (size_t)n);
    return rc;
}

/* Rows [r0, r0 + n) of a transposed part (DeepSeek's k_b, gpt-oss's
 * experts): output row r of group g = r / per is source column
 * col_off + (r % per) x col_step of g's k part rows. */
static int read_transposed(const hf_out *t, uint64_t r0, uint64_t n, const amn_values *v,
                           float *tmp, amn_error *err) {
    const uint64_t per = t->shape[1], k = t->part_rows;
    const uint64_t step = t->col_step ? t->col_step : 1, scols = t->col_step ? t->src_cols : per;
    const uint64_t most = per < n ? per : n, span_max = (most - 1) * step + 1;
    const bool whole = k * scols <= GROUP_WHOLE || 2 * span_max >= scols;
    /* a whole group, or one source row's span (and its stored bytes) */
    const uint64_t floats = whole ? k * scols : 2 * span_max;
    float *buf = malloc((size_t)floats * sizeof *buf);
    if (!buf) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    /* the core's check of the input files, once (the raw spans skip it) */
    int rc = whole || !t->raw ? AMN_OK : v->read(v->ctx, 0, 1, buf, err);
    for (uint64_t r = 0, m; !rc && r < n; r += m) {
        const uint64_t g = (r0 + r) / per, l0 = (r0 + r) % per;
        m = per - l0 < n - r ? per - l0 : n - r;
        const uint64_t first = (g * t->part_stride + t->part_off) * scols;
        const uint64_t c0 = t->col_off + l0 * step, span = (m - 1) * step + 1;
        if (whole) {
            rc = v->read(v->ctx, first, k * scols, buf, err);
            for (uint64_t i = 0; !rc && i < m; i++)
                for (uint64_t j = 0; j < k; j++)
                    tmp[(r + i) * k + j] = buf[j * scols + c0 + i * step];
            continue;
        }
        /* the span of each source row the m output rows take, scattered */
        for (uint64_t j = 0; !rc && j < k; j++) {
            const uint64_t e0 = first + j * scols + c0;
            rc = t->raw ? read_raw(t->raw, e0, span, (uint8_t *)(buf + span_max), buf, err)
                        : v->read(v->ctx, e0, span, buf, err);
            for (uint64_t i = 0; !rc && i < m; i++) tmp[(r + i) * k + j] = buf[i * step];
        }
    }
    free(buf);
    return rc;
}

/* Rows [r0, r0 + n) of a selection of the source's columns (gpt-oss's
 * gate or up bias): each source row read, its columns picked. */
static int read_columns(const hf_out *t, uint64_t r0, uint64_t n, const amn_values *v, float *tmp,
                        amn_error *err) {
    const uint64_t scols = t->src_cols, cols = t->cols;
    float *row = malloc((size_t)scols * sizeof *row);
    if (!row) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    for (uint64_t r = 0; !rc && r < n; r++) {
        rc = v->read(v->ctx, (r0 + r) * scols, scols, row, err);
        for (uint64_t c = 0; !rc && c < cols; c++)
            tmp[r * cols + c] = row[t->col_off + c * t->col_step];
    }
    free(row);
    return rc;
}

/* ggml's block_mxfp4 from transformers' packing (GptOssModel.repack_mxfp4):
 * the E8M0 scale, then byte j holding value j in its low nibble and value
 * j + 16 in its high one, where the checkpoint's byte j holds values 2j
 * (low nibble) and 2j + 1 (high). */
static void mxfp4_block(uint8_t scale, const uint8_t *q, uint8_t *dst) {
    dst[0] = scale;
    for (int j = 0; j < 16; j++) {
        const int a = j, b = j + 16;
        const unsigned lo = (q[a / 2] >> (4 * (a % 2))) & 15u;
        const unsigned hi = (q[b / 2] >> (4 * (b % 2))) & 15u;
        dst[1 + j] = (uint8_t)(lo | hi << 4);
    }
}

/* Repacked MXFP4 rows read per run of about this many bytes of the parts. */
#define MX_RUN_BYTES (1u << 20)

/* Rows [r0, r0 + n) of a repacked MXFP4 output (hf_out.mx_*), straight
 * from the packed parts: runs of source rows read at once, the output's
 * picked from them (gate_up's every other row). */
static int fill_mxfp4(const hf_out *t, uint64_t r0, uint64_t n, const amn_values *v, uint8_t *dst,
                      amn_error *err) {
    /* the core's check that the input files are still whole (a file cut
     * short under the mapping), which a read through it runs first */
    float probe;
    int rc = v->read(v->ctx, 0, 1, &probe, err);
    if (rc) return rc;
    const uint64_t g = t->mx_groups, step = t->part_rows ? t->part_stride : 1;
    uint64_t per = MX_RUN_BYTES / (step * g * 17);
    if (per < 1) per = 1;
    if (per > n) per = n;
    const uint64_t span = (per - 1) * step + 1;
    uint8_t *qb = malloc((size_t)(span * g * 17));
    if (!qb) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    uint8_t *sb = qb + span * g * 16;
    for (uint64_t r = 0, m; !rc && r < n; r += m) {
        m = n - r < per ? n - r : per;
        const uint64_t s0 = t->part_rows ? (r0 + r) * step + t->part_off : r0 + r;
        const uint64_t rows = (m - 1) * step + 1;
        rc = amn_tensor_read(t->mx_blocks, s0 * g * 16, qb, rows * g * 16, err);
        if (!rc) rc = amn_tensor_read(t->mx_scales, s0 * g, sb, rows * g, err);
        for (uint64_t i = 0; !rc && i < m; i++)
            for (uint64_t k = 0; k < g; k++)
                mxfp4_block(sb[i * step * g + k], qb + (i * step * g + k) * 16,
                            dst + ((r + i) * g + k) * 17);
    }
    free(qb);
    return rc;
}

/* Rows [r0, r0 + n) of t as F32 into tmp: generated values, rows of stacked
 * experts, or the source's rows (permuted, a part of a fused tensor, or
 * one contiguous span). */
static int read_rows(const hf_out *t, uint64_t r0, uint64_t n, const amn_values *v, float *tmp,
                     amn_error *err) {
    const uint64_t cols = t->cols;
    if (t->values) {
        memcpy(tmp, t->values + r0 * cols, (size_t)(n * cols) * sizeof *tmp);
        return AMN_OK;
    }
    if (t->n_stack) { /* row r of expert e: source stack_src[e] */
        const uint64_t per = t->rows / t->n_stack;
        if (v->struct_size < offsetof(amn_values, read_source) + sizeof v->read_source ||
            !v->read_source)
            return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: the core cannot read other sources",
                                 t->name);
        int rc = AMN_OK;
        /* one read per run of rows of one expert: each read checks the
         * input files (a syscall), a row at a time cost more than the rows */
        for (uint64_t r = 0, k; !rc && r < n; r += k) {
            const uint64_t g = r0 + r, in = g % per;
            k = per - in < n - r ? per - in : n - r;
            rc = v->read_source(v->all, t->stack_src[g / per], in * cols, k * cols, tmp + r * cols,
                                err);
        }
        return rc;
    }
    if (t->xform == HF_X_TRANSPOSE) return read_transposed(t, r0, n, v, tmp, err);
    if (t->col_step) return read_columns(t, r0, n, v, tmp, err);
    int rc = AMN_OK;
    for (uint64_t r = 0, k; !rc && r < n; r += k) {
        const uint64_t s = source_run(t, r0 + r, n - r, &k);
        rc = v->read(v->ctx, s * cols, k * cols, tmp + r * cols, err);
    }
    return rc;
}

/* Whether t's rows can be read straight into the output type (the core's
 * amn_values.read_as, ABI 2.6): a stored F16 or BF16 tensor, rows taken as
 * they are, permuted or a fused tensor's part, into another float type. The bytes are those of
 * the F32 route below (the widening is exact, the rounding the same); one
 * pass skips the F32 tile, a third of the conversion's time. */
static bool direct(const hf_out *t, const amn_values *v) {
    if (v->struct_size < offsetof(amn_values, read_as) + sizeof v->read_as || !v->read_as)
        return false;
    if (t->values || t->n_stack || t->col_step) return false;
    if (t->xform != HF_X_NONE && t->xform != HF_X_PERMUTE_Q && t->xform != HF_X_PERMUTE_K)
        return false;
    if (t->src != AMN_DTYPE_F16 && t->src != AMN_DTYPE_BF16) return false;
    return t->src != t->dtype &&
           (t->dtype == AMN_DTYPE_F16 || t->dtype == AMN_DTYPE_BF16 || t->dtype == AMN_DTYPE_F32);
}

static int fill_direct(const hf_out *t, uint64_t r0, uint64_t n, const amn_values *v, uint8_t *dst,
                       amn_error *err) {
    const uint64_t cols = t->cols, row_bytes = hf_unit_bytes(t);
    int rc = AMN_OK;
    for (uint64_t r = 0, k; !rc && r < n; r += k) {
        const uint64_t s = source_run(t, r0 + r, n - r, &k);
        rc = v->read_as(v->ctx, s * cols, k * cols, t->dtype, dst + r * row_bytes, err);
    }
    return rc;
}

/* Rows go through in tiles of about this many floats (64 KiB), so the F32
 * values are stored while still in cache (256 KiB: L2) rather than after a chunk-sized
 * round trip through memory; each element is computed the same either way. */
#define TILE_FLOATS 65536u

int hf_fill(const hf_out *t, uint64_t unit0, uint64_t n, const amn_values *v, void *dst,
            amn_error *err) {
    if (unit0 > t->rows || n > t->rows - unit0)
        return amn_error_set(err, AMN_E_INVALID, "%s: rows out of range", t->name);
    if (t->mx_blocks) return fill_mxfp4(t, unit0, n, v, dst, err);
    if (direct(t, v)) return fill_direct(t, unit0, n, v, dst, err);
    const uint64_t cols = t->cols, row_bytes = hf_unit_bytes(t);
    uint64_t step = cols < TILE_FLOATS ? TILE_FLOATS / cols : 1;
    /* a transposed part in one tile: its reads take a span of each source
     * row, the fewer the better (a piece is a few MiB at most) */
    if (t->xform == HF_X_TRANSPOSE || step > n) step = n;
    float *tmp = malloc((size_t)(step * cols) * sizeof *tmp + 1);
    if (!tmp) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    for (uint64_t r = 0; !rc && r < n; r += step) {
        const uint64_t k = n - r < step ? n - r : step;
        uint8_t *out = (uint8_t *)dst + r * row_bytes;
        rc = read_rows(t, unit0 + r, k, v, tmp, err);
        if (!rc && t->xform == HF_X_PLUS1) plus_one(tmp, k * cols, t->src);
        if (rc) break;
        if (t->dtype == AMN_DTYPE_BLOCK) {
            for (uint64_t i = 0; i < k; i++) block_row(t, tmp + i * cols, out + i * row_bytes);
        } else if (amn_store_f32(tmp, t->dtype, out, (size_t)(k * cols))) {
            rc = amn_error_set(err, AMN_E_INVALID, "%s: cannot store as %s", t->name,
                               amn_dtype_name(t->dtype));
        }
    }
    free(tmp);
    return rc;
}
