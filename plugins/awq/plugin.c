/* amn-awq: AutoAWQ GEMM 4-bit layers (qweight, qzeros, scales), dequantized
 * to nn.Linear's [out_features, in_features]. */
#include "amn/plugin.h"
#include "amn/simd.h"
#include "amn/kit/quant_common.h"
#include "awq_kernels.h"
#include "awq_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const awq_plan *p = plan;
    int rc = quant_check_request(p->name, p->out, row0, nrows, out, err);
    if (rc) return rc;
    const awq_layout l = {
        .in = p->in,
        .out = p->out,
        .groups = p->groups,
        .group_size = p->group_size,
        .qweight = quant_member(m, p->qweight, p->own[0], p->in * p->out / 8 * 4),
        .scales =
            quant_member(m, p->scales, p->own[1], p->groups * p->out * amn_dtype_size(p->stype)),
        .qzeros = quant_member(m, p->qzeros, p->own[2], p->groups * p->out / 8 * 4),
        .stype = p->stype,
    };
    if (!p->checked || !l.qweight || !l.scales || !l.qzeros)
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    if (awq_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level()))
        return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", p->name);
    return AMN_OK;
}

/* detect() (quant_detect_layers) starts from a .qweight: without one it
 * claims nothing, and orphans are checked only after a claim. */
static const amn_detect_key awq_keys[] = {{".qweight", 0}, {NULL, 0}};

static const amn_scheme awq_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "awq",
    .description = "AutoAWQ GEMM 4-bit (qweight, qzeros, scales)",
    .detect = awq_detect,
    .dequantize = dequantize,
    .detect_keys = awq_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &awq_scheme);
}

AMN_PLUGIN_DEFINE(awq, AMN_VERSION_STRING, "AutoAWQ quantized layers", "MIT", init);
