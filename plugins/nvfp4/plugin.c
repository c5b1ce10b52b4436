/* amn-nvfp4: NVFP4 weights (E2M1 values, an E4M3 scale per 16 and a
 * binary32 second-level scale) from NVIDIA ModelOpt and from
 * compressed-tensors' nvfp4-pack-quantized format. */
#include "amn/kit/quant_common.h"
#include "amn/plugin.h"
#include "amn/simd.h"
#include "nvfp4_kernels.h"
#include "nvfp4_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const nvfp4_plan *p = plan;
    int rc = quant_check_request(p->name, p->rows, row0, nrows, out, err);
    if (rc) return rc;
    if (p->bmm) {
        const uint64_t bytes = p->rows * p->bmm_outs;
        const nvfp4_bmm_layout b = {.weight = quant_member(m, p->weight, p->own[0], bytes / 2),
                                    .scales = quant_member(m, p->scale, p->own[1], bytes / 16),
                                    .experts = p->experts,
                                    .in = p->bmm_in,
                                    .outs = p->bmm_outs,
                                    .second = p->seconds,
                                    .n_second = p->n_seconds};
        if (!b.weight || !b.scales || !b.second)
            return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
        if (nvfp4_bmm_rows(&b, row0, nrows, out, dst, amn_simd_level()))
            return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", p->name);
        return AMN_OK;
    }
    const nvfp4_layout l = {.weight = quant_member(m, p->weight, p->own[0], p->rows * p->in / 2),
                            .scales = quant_member(m, p->scale, p->own[1], p->rows * p->in / 16),
                            .rows = p->rows,
                            .in = p->in,
                            .second = p->seconds,
                            .rows_per_second = p->rows / p->n_seconds,
                            .divide = p->divide,
                            .neg_zero = p->neg_zero};
    if (!l.weight || !l.scales || !l.second)
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    nvfp4_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level());
    return AMN_OK;
}

/* detect() (weight_layout) looks only at U8 tensors; orphans are checked
 * after a claim. */
static const amn_detect_key nvfp4_keys[] = {{"", 1ull << AMN_DTYPE_U8}, {NULL, 0}};

static const amn_scheme nvfp4_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "nvfp4",
    .description = "NVFP4 (ModelOpt; compressed-tensors nvfp4-pack-quantized)",
    .detect = nvfp4_detect,
    .dequantize = dequantize,
    .detect_keys = nvfp4_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &nvfp4_scheme);
}

AMN_PLUGIN_DEFINE(nvfp4, AMN_VERSION_STRING, "NVFP4 weights (ModelOpt, compressed-tensors)", "MIT",
                  init);
