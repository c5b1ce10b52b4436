/* Finding GPTQ layers in a model and checking every companion.
 *
 * A layer "<p>" is "<p>.qweight" (I32 [in*bits/32, out]), "<p>.scales"
 * ([groups, out]), "<p>.qzeros" (I32 [groups, out*bits/32]) and optionally
 * "<p>.g_idx" (I32 [in]). The bit width follows from qzeros' width and must
 * agree with qweight's height and with the config, when one says; the group
 * size follows from scales' height. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "gptq_plan.h"
#include "amn/kit/quant_common.h"

void gptq_plan_free(void *plan) {
    gptq_plan *p = plan;
    if (!p) return;
    free(p->gidx);
    for (int k = 0; k < 3; k++) free(p->own[k]);
    free(p->name);
    free(p->label);
    free(p);
}

static bool is_word(amn_dtype t) {
    return t == AMN_DTYPE_I32 || t == AMN_DTYPE_U32;
}

/* Read g_idx (I32 or I64) into p->gidx, every value checked against the
 * groups. Keeps the array only when the kernels need it. */
static int load_gidx(const amn_tensor *t, gptq_plan *p, bool *act_order, amn_error *err) {
    uint8_t *own;
    const uint8_t *b;
    int rc = quant_tensor_bytes(t, &own, &b, err);
    if (rc) return rc;
    int32_t *g = malloc(p->in * sizeof *g);
    if (!g) {
        free(own);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    bool sequential = true;
    for (uint64_t i = 0; i < p->in; i++) {
        int64_t v;
        if (t->dtype == AMN_DTYPE_I64) {
            v = (int64_t)amn_load_le64(b + i * 8);
        } else {
            v = (int32_t)amn_load_le32(b + i * 4);
        }
        if (v < 0 || (uint64_t)v >= p->groups) {
            free(own);
            free(g);
            return amn_error_set(
                err, AMN_E_PARSE, "%s: value %lld at %llu is not a group of 0..%llu", t->name,
                (long long)v, (unsigned long long)i, (unsigned long long)p->groups - 1);
        }
        g[i] = (int32_t)v;
        if ((uint64_t)v != i / p->group_size) sequential = false;
    }
    free(own);
    *act_order = !sequential;
    /* Sequential groups whose size is a multiple of 8 need no table. */
    if (sequential && p->group_size % 8 == 0) {
        free(g);
        g = NULL;
    }
    p->gidx = g;
    return AMN_OK;
}

static int check_layer(const amn_model *m, const quant_config *qc, gptq_plan *p,
                       const amn_tensor *qw, const amn_tensor *sc, const amn_tensor *qz,
                       const amn_tensor *gi, amn_error *err) {
    char b1[96], b2[96];
    if (!is_word(qw->dtype) || qw->ndim != 2 || qw->shape[0] == 0 || qw->shape[1] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected a non-empty 2-D I32 tensor, found %s %s", qw->name,
                             amn_dtype_name(qw->dtype), quant_shape(qw, b1, sizeof b1));
    const uint64_t R = qw->shape[0], N = qw->shape[1];
    if (sc->ndim != 2 || sc->shape[1] != N || sc->shape[0] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shape %s does not fit %s %s (expected [groups, %llu])", sc->name,
                             quant_shape(sc, b1, sizeof b1), qw->name,
                             quant_shape(qw, b2, sizeof b2), (unsigned long long)N);
    if (sc->dtype != AMN_DTYPE_F16 && sc->dtype != AMN_DTYPE_BF16 && sc->dtype != AMN_DTYPE_F32)
        return amn_error_set(err, AMN_E_PARSE, "%s: scale dtype %s is not F16, BF16 or F32",
                             sc->name, amn_dtype_name(sc->dtype));
    const uint64_t G = sc->shape[0];
    if (!is_word(qz->dtype) || qz->ndim != 2 || qz->shape[0] != G || qz->shape[1] == 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected I32 [%llu, out*bits/32], found %s %s",
                             qz->name, (unsigned long long)G, amn_dtype_name(qz->dtype),
                             quant_shape(qz, b1, sizeof b1));
    int rc;
    if ((rc = quant_check_bytes(qw, err)) || (rc = quant_check_bytes(sc, err)) ||
        (rc = quant_check_bytes(qz, err)))
        return rc;

    /* Bit width: qzeros holds out*bits/32 words per group. */
    const uint64_t Z = qz->shape[1];
    uint64_t zb;
    unsigned bits = 0;
    if (amn_mul_u64(Z, 32, &zb) && zb % N == 0 && zb / N <= 8) bits = (unsigned)(zb / N);
    if (bits >= 5 && bits <= 7)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: %u-bit GPTQ zero points (a planar layout) are not supported",
                             qz->name, bits);
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %llu words per group do not pack %llu zero points at 2, 3, 4 "
                             "or 8 bits",
                             qz->name, (unsigned long long)Z, (unsigned long long)N);
    if (qc->bits >= 5 && qc->bits <= 7)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: %d-bit GPTQ (from %s) is not supported",
                             qw->name, qc->bits, qc->file);
    if (qc->bits && qc->bits != (int)bits)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: %d bits in %s contradict %s %s, which packs %u-bit zero points",
            qw->name, qc->bits, qc->file, qz->name, quant_shape(qz, b1, sizeof b1), bits);
    if (bits == 3 && R % 3 != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %llu rows cannot hold 3-bit values (not a multiple of 3)",
                             qw->name, (unsigned long long)R);
    const uint64_t in = bits == 3 ? R / 3 * 32 : R * (32 / bits);

    if (gi) {
        if ((gi->dtype != AMN_DTYPE_I32 && gi->dtype != AMN_DTYPE_I64) || gi->ndim != 1 ||
            gi->shape[0] != in)
            return amn_error_set(
                err, AMN_E_PARSE,
                "%s: expected I32 [%llu] (in_features of %u-bit %s %s), found %s %s", gi->name,
                (unsigned long long)in, bits, qw->name, quant_shape(qw, b2, sizeof b2),
                amn_dtype_name(gi->dtype), quant_shape(gi, b1, sizeof b1));
        if ((rc = quant_check_bytes(gi, err))) return rc;
    }

    /* Group size: from the config when it says, else from scales' height. */
    uint64_t gs;
    if (qc->group_size == -1 && G != 1)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %llu groups, but %s says per-channel (group_size -1)", sc->name,
                             (unsigned long long)G, qc->file);
    if ((rc = quant_group_size(qc, sc, qw, in, G, &gs, err))) return rc;
    (void)m;
    p->bits = bits;
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
    const int64_t sci = c.scales, qzi = c.qzeros, gii = c.g_idx;
    const amn_tensor *sc = sci >= 0 ? amn_model_tensor(m, (size_t)sci) : NULL;
    if (quant_classify(qc, qw, sc, gii >= 0) != QUANT_GPTQ) return AMN_OK;

    if (qc->checkpoint_format[0] && strcmp(qc->checkpoint_format, "gptq") != 0 &&
        strcmp(qc->checkpoint_format, "gptq_v2") != 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: GPTQ checkpoint_format \"%s\" (from %s) is not supported (only "
                             "gptq and gptq_v2)",
                             qw->name, qc->checkpoint_format, qc->file);
    if ((rc = quant_qweight_check(m, qw, plen, &c, "GPTQ", err))) return rc;
    const amn_tensor *qz = amn_model_tensor(m, (size_t)qzi);
    const amn_tensor *gi = gii >= 0 ? amn_model_tensor(m, (size_t)gii) : NULL;

    gptq_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->qweight = qwi;
    p->scales = (size_t)sci;
    p->qzeros = (size_t)qzi;
    p->zeros_v1 = strcmp(qc->checkpoint_format, "gptq_v2") != 0;
    rc = check_layer(m, qc, p, qw, sc, qz, gi, err);
    bool act_order = gi && qc->desc_act == 1;
    const bool have_data = qw->data && sc->data && qz->data && (!gi || gi->data);
    if (!rc && have_data) {
        const uint8_t *unused;
        if (gi) rc = load_gidx(gi, p, &act_order, err);
        if (!rc) rc = quant_tensor_bytes(qw, &p->own[0], &unused, err);
        if (!rc) rc = quant_tensor_bytes(sc, &p->own[1], &unused, err);
        if (!rc) rc = quant_tensor_bytes(qz, &p->own[2], &unused, err);
        p->checked = true;
    }
    if (!rc && !gi && p->group_size % 8 != 0) {
        /* Give the vector path a table rather than a divide per value. */
        p->gidx = malloc(p->in * sizeof *p->gidx);
        if (!p->gidx) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        for (uint64_t i = 0; !rc && i < p->in; i++) p->gidx[i] = (int32_t)(i / p->group_size);
    }
    char label[128];
    if (!rc) {
        int k;
        if (p->groups == 1)
            k = snprintf(label, sizeof label, "GPTQ %u-bit, per-channel", p->bits);
        else
            k = snprintf(label, sizeof label, "GPTQ %u-bit, group %llu", p->bits,
                         (unsigned long long)p->group_size);
        if (act_order) k += snprintf(label + k, sizeof label - (size_t)k, ", act-order");
        if (!p->zeros_v1) snprintf(label + k, sizeof label - (size_t)k, ", v2 zero points");
        p->label = strdup(label);
        p->name = quant_join(qw->name, plen, ".weight");
        if (!p->label || !p->name) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (rc) {
        gptq_plan_free(p);
        return rc;
    }
    amn_group_spec g = {.struct_size = sizeof g,
                        .out_name = p->name,
                        .ndim = 2,
                        .shape = {p->out, p->in},
                        .row_elems = p->in,
                        .label = p->label,
                        .plan = p,
                        .plan_free = gptq_plan_free};
    g.members[g.n_members] = qwi;
    g.roles[g.n_members++] = AMN_ROLE_WEIGHT;
    g.members[g.n_members] = (size_t)sci;
    g.roles[g.n_members++] = AMN_ROLE_SCALE;
    g.members[g.n_members] = (size_t)qzi;
    g.roles[g.n_members++] = AMN_ROLE_ZERO;
    if (gi) {
        g.members[g.n_members] = (size_t)gii;
        g.roles[g.n_members++] = AMN_ROLE_GROUP_INDEX;
    }
    return amn_claimset_add(cs, &g, err);
}

int gptq_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    /* In a GPTQ model, zero points or group indices without their qweight mean
     * a broken file. */
    static const char *const orphans[] = {".qzeros", ".g_idx"};
    return quant_detect_layers(m, cs, claim_layer, orphans, sizeof orphans / sizeof *orphans, err);
}
