/* Finding AutoAWQ GEMM layers in a model and checking every companion.
 *
 * A layer "<p>" is "<p>.qweight" (I32 [in, out/8]), "<p>.qzeros" (I32
 * [groups, out/8]) and "<p>.scales" ([groups, out]). Other AWQ layouts (GEMV,
 * GEMV-fast, Marlin, other bit widths) are recognised and refused by name:
 * guessing at them would give silently wrong weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "awq_plan.h"
#include "amn/kit/quant_common.h"

void awq_plan_free(void *plan) {
    awq_plan *p = plan;
    if (!p) return;
    for (int k = 0; k < 3; k++) free(p->own[k]);
    free(p->name);
    free(p->label);
    free(p);
}

static bool is_word(amn_dtype t) {
    return t == AMN_DTYPE_I32 || t == AMN_DTYPE_U32;
}

/* The config or shapes name a layout other than 4-bit GEMM: say which. */
static int refuse(const quant_config *qc, const amn_tensor *qw, const amn_tensor *sc,
                  amn_error *err) {
    char b1[96], b2[96];
    const bool says_awq = strcmp(qc->method, "awq") == 0;
    if (says_awq && qc->bits && qc->bits != 4)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: %d-bit AWQ (from %s) is not supported (only 4-bit GEMM)",
                             qw->name, qc->bits, qc->file);
    if (says_awq && qc->version[0] && strcmp(qc->version, "gemm") != 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: AWQ version \"%s\" (from %s) is not supported (only GEMM)",
                             qw->name, qc->version, qc->file);
    if ((!says_awq && qc->method[0]) || !sc || sc->ndim != 2 || qw->ndim != 2) return AMN_OK;
    if (sc->shape[0] == qw->shape[0] && sc->shape[1] != qw->shape[1] * 8)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: %s with scales %s is AutoAWQ's GEMV layout (one row per "
                             "output); only GEMM is supported",
                             qw->name, quant_shape(qw, b1, sizeof b1),
                             quant_shape(sc, b2, sizeof b2));
    if (qw->shape[1] && sc->shape[1] % qw->shape[1] == 0 && sc->shape[1] != qw->shape[1] * 8) {
        const uint64_t per = sc->shape[1] / qw->shape[1];
        if (per == 4 || per == 16)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "%s: %s packs %llu outputs per word (%llu-bit) beside scales "
                                 "%s; only 4-bit AWQ GEMM is supported",
                                 qw->name, quant_shape(qw, b1, sizeof b1), (unsigned long long)per,
                                 (unsigned long long)(32 / per), quant_shape(sc, b2, sizeof b2));
    }
    return AMN_OK;
}

static int check_layer(const quant_config *qc, awq_plan *p, const amn_tensor *qw,
                       const amn_tensor *sc, const amn_tensor *qz, amn_error *err) {
    char b1[96], b2[96];
    if (!is_word(qw->dtype) || qw->ndim != 2 || qw->shape[0] == 0 || qw->shape[1] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected a non-empty 2-D I32 tensor, found %s %s", qw->name,
                             amn_dtype_name(qw->dtype), quant_shape(qw, b1, sizeof b1));
    const uint64_t in = qw->shape[0], W = qw->shape[1];
    uint64_t N;
    if (!amn_mul_u64(W, 8, &N) || sc->ndim != 2 || sc->shape[1] != N || sc->shape[0] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shape %s does not fit %s %s (expected [groups, %llu])", sc->name,
                             quant_shape(sc, b1, sizeof b1), qw->name,
                             quant_shape(qw, b2, sizeof b2), (unsigned long long)W * 8);
    if (sc->dtype != AMN_DTYPE_F16 && sc->dtype != AMN_DTYPE_BF16 && sc->dtype != AMN_DTYPE_F32)
        return amn_error_set(err, AMN_E_PARSE, "%s: scale dtype %s is not F16, BF16 or F32",
                             sc->name, amn_dtype_name(sc->dtype));
    const uint64_t G = sc->shape[0];
    if (!is_word(qz->dtype) || qz->ndim != 2 || qz->shape[0] != G || qz->shape[1] != W)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected I32 [%llu, %llu], found %s %s",
                             qz->name, (unsigned long long)G, (unsigned long long)W,
                             amn_dtype_name(qz->dtype), quant_shape(qz, b1, sizeof b1));
    int rc;
    if ((rc = quant_check_bytes(qw, err)) || (rc = quant_check_bytes(sc, err)) ||
        (rc = quant_check_bytes(qz, err)))
        return rc;
    uint64_t gs;
    if ((rc = quant_group_size(qc, sc, qw, in, G, &gs, err))) return rc;
    p->in = in;
    p->out = N;
    p->groups = G;
    p->group_size = gs;
    p->stype = sc->dtype;
    return AMN_OK;
}

static int claim_layer(const amn_model *m, amn_claimset *cs, const quant_config *qc, size_t qwi,
                       size_t plen, amn_error *err) {
    const amn_tensor *qw = amn_model_tensor(m, qwi);
    quant_qweight_layer c;
    int rc = quant_qweight_companions(m, qw, plen, &c, err);
    if (rc) return rc;
    const int64_t sci = c.scales, qzi = c.qzeros;
    const amn_tensor *sc = sci >= 0 ? amn_model_tensor(m, (size_t)sci) : NULL;
    const quant_kind kind = quant_classify(qc, qw, sc, c.g_idx >= 0);
    if (kind == QUANT_GPTQ) return AMN_OK;
    /* Unknown shapes are refused only when the config says AWQ, or when they
     * match another AWQ layout; otherwise they are left to other schemes. */
    if ((rc = refuse(qc, qw, sc, err))) return rc;
    if (kind != QUANT_AWQ) return AMN_OK;
    if ((rc = quant_qweight_check(m, qw, plen, &c, "AWQ", err))) return rc;
    const amn_tensor *qz = amn_model_tensor(m, (size_t)qzi);

    awq_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->qweight = qwi;
    p->scales = (size_t)sci;
    p->qzeros = (size_t)qzi;
    rc = check_layer(qc, p, qw, sc, qz, err);
    if (!rc && qw->data && sc->data && qz->data) {
        const uint8_t *unused;
        rc = quant_tensor_bytes(qw, &p->own[0], &unused, err);
        if (!rc) rc = quant_tensor_bytes(sc, &p->own[1], &unused, err);
        if (!rc) rc = quant_tensor_bytes(qz, &p->own[2], &unused, err);
        p->checked = true;
    }
    if (!rc) {
        char label[96];
        if (p->groups == 1)
            snprintf(label, sizeof label, "AWQ 4-bit GEMM, per-channel");
        else
            snprintf(label, sizeof label, "AWQ 4-bit GEMM, group %llu",
                     (unsigned long long)p->group_size);
        p->label = strdup(label);
        p->name = quant_join(qw->name, plen, ".weight");
        if (!p->label || !p->name) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (rc) {
        awq_plan_free(p);
        return rc;
    }
    amn_group_spec g = {.struct_size = sizeof g,
                        .out_name = p->name,
                        .ndim = 2,
                        .shape = {p->out, p->in},
                        .row_elems = p->in,
                        .n_members = 3,
                        .label = p->label,
                        .plan = p,
                        .plan_free = awq_plan_free};
    g.members[0] = qwi;
    g.roles[0] = AMN_ROLE_WEIGHT;
    g.members[1] = (size_t)sci;
    g.roles[1] = AMN_ROLE_SCALE;
    g.members[2] = (size_t)qzi;
    g.roles[2] = AMN_ROLE_ZERO;
    return amn_claimset_add(cs, &g, err);
}

int awq_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    /* In an AWQ model, zero points without their qweight mean a broken file. */
    static const char *const orphans[] = {".qzeros"};
    return quant_detect_layers(m, cs, claim_layer, orphans, sizeof orphans / sizeof *orphans, err);
}
