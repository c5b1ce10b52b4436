/* amn-fp8: FP8 (E4M3 / E5M2) weights with per-tensor, per-channel or
 * fine-grained block scales, as Hugging Face FP8 checkpoints store them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/dtype.h"

#include "amn/plugin.h"
#include "amn/simd.h"
#include "amn/kit/quant_common.h"
#include "fp8_kernels.h"
#include "fp8_plan.h"

/* Products in the scale's dtype first, then converted to `out` as
 * compressed-tensors' .to(dtype) does (BF16 -> F16 rounds a second time).
 * A call covers about one output chunk, so the staging buffer is small. */
static int dequantize_rounded(const fp8_plan *p, const fp8_layout *l, uint64_t row0, uint64_t nrows,
                              amn_dtype out, void *dst, amn_error *err) {
    uint64_t n, bytes;
    if (!amn_mul_u64(nrows, p->cols, &n) || !amn_mul_u64(n, 2, &bytes) || bytes > SIZE_MAX)
        return amn_error_set(err, AMN_E_LIMIT, "%s: %llu rows too large", p->name,
                             (unsigned long long)nrows);
    void *tmp = malloc(bytes ? (size_t)bytes : 1);
    if (!tmp) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    fp8_dequant_rows(l, row0, nrows, p->round_to, tmp, amn_simd_level());
    const int rc = amn_convert_elems(p->round_to, tmp, out, dst, (size_t)n);
    free(tmp);
    if (rc)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: no conversion from %s to %s", p->name,
                             amn_dtype_name(p->round_to), amn_dtype_name(out));
    return AMN_OK;
}

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const fp8_plan *p = plan;
    int rc = quant_check_request(p->name, p->rows, row0, nrows, out, err);
    if (rc) return rc;
    const amn_tensor *w = amn_model_tensor(m, p->weight);
    const amn_tensor *s = p->has_scale ? amn_model_tensor(m, p->scale) : NULL;
    const uint8_t *wd = p->own_weight ? p->own_weight : w ? w->data : NULL;
    const uint8_t *sd = !s ? NULL : p->own_scale ? p->own_scale : s->data;
    if (!w || !wd || w->nbytes != p->rows * p->cols || (p->has_scale && (!s || !sd)))
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    /* This call's rows, read the way the core finds cheapest for the input
     * (pread into this thread's buffer, or the mapping itself). */
    const uint8_t *rows =
        amn_model_fetch(m, wd + row0 * p->cols, (size_t)(nrows * p->cols), 0, err);
    if (!rows) return err ? err->code : AMN_E_IO;
    const fp8_layout l = {.weight = rows,
                          .weight_row0 = row0,
                          .wtype = p->wtype,
                          .rows = p->rows,
                          .cols = p->cols,
                          .scale = sd,
                          .stype = p->stype,
                          .block_rows = p->block_rows,
                          .block_cols = p->block_cols,
                          .grid_cols = p->grid_cols};
    if (!p->round_to || p->round_to == out) {
        fp8_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level());
        return AMN_OK;
    }
    return dequantize_rounded(p, &l, row0, nrows, out, dst, err);
}

/* detect() starts from an FP8 .weight; scales are checked only after one. */
static const amn_detect_key fp8_keys[] = {
    {".weight", (1ull << AMN_DTYPE_F8_E4M3) | (1ull << AMN_DTYPE_F8_E5M2)},
    {NULL, 0},
};

static const amn_scheme fp8_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "fp8",
    .description = "FP8 E4M3/E5M2 with per-tensor, per-channel or block scales",
    .detect = fp8_detect,
    .dequantize = dequantize,
    .detect_keys = fp8_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &fp8_scheme);
}

AMN_PLUGIN_DEFINE(fp8, AMN_VERSION_STRING, "FP8 weights (E4M3, E5M2) with their scales", "MIT",
                  init);
