/* amn-mxfp4: gpt-oss MXFP4 expert weights (E2M1 values with an E8M0 scale
 * per 32), dequantized as transformers' convert_moe_packed_tensors does. */
#include "amn/kit/quant_common.h"
#include "amn/plugin.h"
#include "amn/simd.h"
#include "mxfp4_kernels.h"
#include "mxfp4_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const mxfp4_plan *p = plan;
    const uint64_t rows = p->experts * p->groups * 32; /* checked by amn_claimset_add */
    int rc = quant_check_request(p->name, rows, row0, nrows, out, err);
    if (rc) return rc;
    const uint64_t nscales = p->experts * p->rows * p->groups;
    const mxfp4_layout l = {.blocks = quant_member(m, p->blocks, p->own[0], nscales * 16),
                            .scales = quant_member(m, p->scales, p->own[1], nscales),
                            .experts = p->experts,
                            .rows = p->rows,
                            .groups = p->groups,
                            .cache = p->cache};
    if (!l.blocks || !l.scales)
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    mxfp4_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level());
    return AMN_OK;
}

/* detect() starts from a U8 _blocks tensor; orphans are checked after one. */
static const amn_detect_key mxfp4_keys[] = {{"_blocks", 1ull << AMN_DTYPE_U8}, {NULL, 0}};

static const amn_scheme mxfp4_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "mxfp4",
    .description = "gpt-oss MXFP4 experts (E2M1 with E8M0 scales per 32; _blocks / _scales)",
    .detect = mxfp4_detect,
    .dequantize = dequantize,
    .detect_keys = mxfp4_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &mxfp4_scheme);
}

AMN_PLUGIN_DEFINE(mxfp4, AMN_VERSION_STRING, "gpt-oss MXFP4 expert weights", "MIT", init);
