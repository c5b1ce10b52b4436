/* amn-ctensors: compressed-tensors (llm-compressor, neuralmagic) integer
 * weights: pack-quantized int2/4/8 and int-quantized int8, group, channel
 * or tensor scales, symmetric or with zero points, act-order g_idx. */
#include "amn/kit/quant_common.h"
#include "amn/plugin.h"
#include "amn/simd.h"
#include "ct_kernels.h"
#include "ct_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const ct_plan *p = plan;
    int rc = quant_check_request(p->name, p->l.out, row0, nrows, out, err);
    if (rc) return rc;
    ct_layout l = p->l;
    l.weight = quant_member(m, p->weight, p->own[0], p->weight_bytes);
    l.scales = quant_member(m, p->scale, p->own[1], p->scale_bytes);
    l.zeros = l.zkind ? quant_member(m, p->zero, p->own[2], p->zero_bytes) : NULL;
    l.gidx = p->gidx;
    if (!p->checked || !l.weight || !l.scales || (l.zkind && !l.zeros))
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    if (ct_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level()))
        return amn_error_set(err, AMN_E_NOMEM, "%s: out of memory", p->name);
    return AMN_OK;
}

/* detect() starts from an I32 .weight_packed or an I8 .weight; orphans are
 * checked only after a claim. */
static const amn_detect_key ct_keys[] = {
    {".weight_packed", 1ull << AMN_DTYPE_I32},
    {".weight", 1ull << AMN_DTYPE_I8},
    {NULL, 0},
};

static const amn_scheme ct_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "ctensors",
    .description = "compressed-tensors pack-quantized / int-quantized integer weights",
    .detect = ct_detect,
    .dequantize = dequantize,
    .detect_keys = ct_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &ct_scheme);
}

AMN_PLUGIN_DEFINE(ctensors, AMN_VERSION_STRING, "compressed-tensors quantized weights", "MIT",
                  init);
