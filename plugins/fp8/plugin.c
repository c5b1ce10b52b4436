/* amn-fp8: FP8 (E4M3 / E5M2) weights with per-tensor, per-channel or
 * fine-grained block scales, as Hugging Face FP8 checkpoints store them. */
#include <string.h>

#include "amn/plugin.h"
#include "amn/simd.h"
#include "amn/kit/quant_common.h"
#include "fp8_kernels.h"
#include "fp8_plan.h"

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
    fp8_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level());
    return AMN_OK;
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
