/* amn-bnb: bitsandbytes NF4 / FP4 (with or without double quant) and
 * LLM.int8 weights, as transformers saves them. */
#include <string.h>

#include "amn/plugin.h"
#include "amn/simd.h"
#include "amn/kit/quant_common.h"
#include "bnb_encode.h"
#include "bnb_kernels.h"
#include "bnb_plan.h"

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const bnb_plan *p = plan;
    int rc = quant_check_request(p->name, p->rows, row0, nrows, out, err);
    if (rc) return rc;
    if (!p->checked)
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    const amn_tensor *w = amn_model_tensor(m, p->weight);
    if (p->kind == BNB_INT8) {
        const uint8_t *wd = quant_member(m, p->weight, p->own[0], p->rows * p->cols);
        const uint8_t *sd = quant_member(m, p->scb, p->own[1], p->rows * 4);
        if (!wd || !sd)
            return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
        const bnb8_layout l = {
            .weight = (const int8_t *)wd, .scb = sd, .rows = p->rows, .cols = p->cols};
        bnb8_dequant_rows(&l, row0, nrows, out, dst, amn_simd_level());
        return AMN_OK;
    }
    const uint64_t blocks = p->n / p->block + (p->n % p->block != 0);
    const uint8_t *wd = quant_member(m, p->weight, p->own[0], w ? w->nbytes : 0);
    const uint8_t *ad = quant_member(m, p->absmax, p->own[1], blocks * (p->nested ? 1 : 4));
    const uint8_t *nd =
        p->nested ? quant_member(m, p->nested_absmax, p->own[2],
                                 (blocks / p->nested_block + (blocks % p->nested_block != 0)) * 4)
                  : NULL;
    if (!wd || !ad || (p->nested && !nd))
        return amn_error_set(err, AMN_E_INVALID, "%s: tensor data not loaded", p->name);
    bnb4_layout l = {.weight = wd,
                     .n = p->n,
                     .block = p->block,
                     .absmax = ad,
                     .nested = p->nested,
                     .nested_absmax = nd,
                     .nested_map = p->nested_map,
                     .nested_block = p->nested_block,
                     .nested_offset = p->nested_offset};
    memcpy(l.codebook, p->codebook, sizeof l.codebook);
    bnb4_dequant(&l, row0 * p->cols, nrows * p->cols, out, dst, amn_simd_level());
    return AMN_OK;
}

/* detect() starts from a quant_state or an SCB, and refuses any orphaned
 * companion even when nothing was claimed: all of them are keys. */
static const amn_detect_key bnb_keys[] = {
    {".weight.quant_state.bitsandbytes__nf4", 0},
    {".weight.quant_state.bitsandbytes__fp4", 0},
    {".SCB", 0},
    {".weight.absmax", 0},
    {".weight.quant_map", 0},
    {".weight.nested_absmax", 0},
    {".weight.nested_quant_map", 0},
    {".weight_format", 0},
    {NULL, 0},
};

static const amn_scheme bnb_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "bnb",
    .description = "bitsandbytes NF4 / FP4 (double quant) and LLM.int8",
    .detect = bnb_detect,
    .dequantize = dequantize,
    .encoder = &bnb_encoder,
    .detect_keys = bnb_keys,
};

static int init(amn_registrar *r) {
    return amn_register_scheme(r, &bnb_scheme);
}

AMN_PLUGIN_DEFINE(bnb, AMN_VERSION_STRING, "bitsandbytes NF4 / FP4 / INT8 weights", "MIT", init);
