/* amn-gptq: GPTQ / GPTQModel 2-, 3-, 4- and 8-bit layers (qweight, qzeros,
 * scales, g_idx), dequantized to nn.Linear's [out_features, in_features]. */
#include "amn/plugin.h"
#include "amn/simd.h"
#include "amn/kit/quant_common.h"
#include "gptq_kernels.h"
#include "gptq_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const gptq_plan *p = plan;
    int rc = quant_check_request(p->name, p->out, row0, nrows, out, err);
    if (rc) return rc;
    const gptq_layout l = {
        .bits = p->bits,
        .in = p->in,
        .out = p->out,
        .groups = p->groups,
        .group_size = p->group_size,
        .qweight = quant_member(m, p->qweight, p->own[0], p->in * p->bits / 32 * p->out * 4),
        .scales =
            quant_member(m, p->scales, p->own[1], p->groups * p->out * amn_dtype_size(p->stype)),
        .qzeros = quant_member(m, p->qzeros, p->own[2], p->groups * (p->out * p->bits / 32) * 4),
        .stype = p->stype,
        .gidx = p->gidx,
        .zeros_v1 = p->zeros_v1,
    };
    if (!p->checked || !l.qweight || !l.scales || !l.qzeros)
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    if (gptq_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level()))
        return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", p->name);
    return AMN_OK;
}

/* detect() (quant_detect_layers) starts from a .qweight: without one it
 * claims nothing, and orphans are checked only after a claim. */
static const amn_detect_key gptq_keys[] = {{".qweight", 0}, {NULL, 0}};

static const amn_scheme gptq_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "gptq",
    .description = "GPTQ 2/3/4/8-bit (qweight, qzeros, scales, g_idx; v1 and v2 zero points)",
    .detect = gptq_detect,
    .dequantize = dequantize,
    .detect_keys = gptq_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &gptq_scheme);
}

AMN_PLUGIN_DEFINE(gptq, AMN_VERSION_STRING, "GPTQ quantized layers", "MIT", init);
