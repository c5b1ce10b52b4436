/* amn-gptq: GPTQ / GPTQModel 2-, 3-, 4- and 8-bit layers (qweight, qzeros,
 * scales, g_idx), dequantized to nn.Linear's [out_features, in_features]. */
#include "amn/plugin.h"
#include "amn/simd.h"
#include "gptq_kernels.h"
#include "gptq_plan.h"

static const uint8_t *member(const amn_model *m, size_t i, const uint8_t *own, uint64_t nbytes) {
    if (own) return own;
    const amn_tensor *t = amn_model_tensor(m, i);
    return t && t->data && t->nbytes == nbytes ? t->data : NULL;
}

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const gptq_plan *p = plan;
    if (out != AMN_DTYPE_F32 && out != AMN_DTYPE_F16 && out != AMN_DTYPE_BF16)
        return amn_error_set(err, AMN_E_INVALID, "%s: cannot dequantize to %s", p->name,
                             amn_dtype_name(out));
    if (row0 > p->out || nrows > p->out - row0)
        return amn_error_set(err, AMN_E_INVALID, "%s: rows %llu+%llu outside its %llu rows",
                             p->name, (unsigned long long)row0, (unsigned long long)nrows,
                             (unsigned long long)p->out);
    const gptq_layout l = {
        .bits = p->bits,
        .in = p->in,
        .out = p->out,
        .groups = p->groups,
        .group_size = p->group_size,
        .qweight = member(m, p->qweight, p->own[0], p->in * p->bits / 32 * p->out * 4),
        .scales = member(m, p->scales, p->own[1], p->groups * p->out * amn_dtype_size(p->stype)),
        .qzeros = member(m, p->qzeros, p->own[2], p->groups * (p->out * p->bits / 32) * 4),
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

static const amn_scheme gptq_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "gptq",
    .description = "GPTQ 2/3/4/8-bit (qweight, qzeros, scales, g_idx; v1 and v2 zero points)",
    .detect = gptq_detect,
    .dequantize = dequantize,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &gptq_scheme);
}

AMN_PLUGIN_DEFINE(gptq, AMN_VERSION_STRING, "GPTQ quantized layers", "MIT", init);
