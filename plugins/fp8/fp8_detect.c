/* Finding FP8 weights and their scales in a model.
 *
 * A weight is a tensor "<p>.weight" stored as F8_E4M3 or F8_E5M2. Its scale
 * is "<p>.weight_scale_inv" (DeepSeek / Qwen fine-grained blocks, Ministral)
 * or "<p>.weight_scale" (compressed-tensors, ModelOpt); either is multiplied.
 * "<p>.input_scale" belongs to the activations: it is claimed only to be
 * dropped, and only when its weight exists (CLIP's logit_scale and similar
 * parameters are never scales). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "fp8_plan.h"
#include "amn/kit/quant_common.h"

void fp8_plan_free(void *plan) {
    fp8_plan *p = plan;
    if (!p) return;
    free(p->own_weight);
    free(p->own_scale);
    free(p->name);
    free(p->label);
    free(p);
}

static bool is_fp8(amn_dtype t) {
    return t == AMN_DTYPE_F8_E4M3 || t == AMN_DTYPE_F8_E5M2;
}

static bool is_scale_dtype(amn_dtype t) {
    return t == AMN_DTYPE_F32 || t == AMN_DTYPE_BF16 || t == AMN_DTYPE_F16;
}

static int64_t find_suffix(const amn_model *m, const char *prefix, size_t plen, const char *suffix,
                           amn_error *err, int *rc) {
    char *name = quant_join(prefix, plen, suffix);
    if (!name) {
        *rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        return -1;
    }
    int64_t i = amn_model_find(m, name);
    free(name);
    return i;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

/* Decide how the scale tensor s maps onto weight w; fills the plan's block
 * geometry and a label fragment. */
static int scale_layout(const amn_tensor *w, const amn_tensor *s, const quant_config *qc,
                        fp8_plan *p, char *what, size_t what_size, amn_error *err) {
    char sb[96], wb[96];
    if (!is_scale_dtype(s->dtype))
        return amn_error_set(err, AMN_E_PARSE, "%s: scale dtype %s is not F32, BF16 or F16",
                             s->name, amn_dtype_name(s->dtype));
    int rc = quant_check_bytes(s, err);
    if (rc) return rc;
    uint64_t n;
    amn_tensor_numel(s, &n); /* checked above */
    if (n == 1) {
        p->block_rows = p->rows;
        p->block_cols = p->cols;
        p->grid_cols = 1;
        snprintf(what, what_size, "per-tensor scale");
        return AMN_OK;
    }
    if (w->ndim == 2) {
        const uint64_t out = w->shape[0], in = w->shape[1];
        if ((s->ndim == 2 && s->shape[0] == out && s->shape[1] == 1) ||
            (s->ndim == 1 && s->shape[0] == out)) {
            p->block_rows = 1;
            p->block_cols = in;
            p->grid_cols = 1;
            snprintf(what, what_size, "per-channel scale");
            return AMN_OK;
        }
        const uint64_t bo = qc->block[0] > 0 ? (uint64_t)qc->block[0] : 128;
        const uint64_t bi = qc->block[1] > 0 ? (uint64_t)qc->block[1] : 128;
        uint64_t br = 0, bc = 0;
        if (s->ndim == 2 && s->shape[0] == ceil_div(out, bo) && s->shape[1] == ceil_div(in, bi)) {
            br = bo;
            bc = bi;
        } else if (!qc->block[0] && s->ndim == 2 && s->shape[0] && s->shape[1] &&
                   out % s->shape[0] == 0 && in % s->shape[1] == 0) {
            /* No configured block size and no 128-grid: blocks that tile
             * the weight exactly (as GPTQModel's infer_block_shape does). */
            br = out / s->shape[0];
            bc = in / s->shape[1];
        }
        if (br && bc) {
            p->block_rows = br;
            p->block_cols = bc;
            p->grid_cols = s->shape[1];
            snprintf(what, what_size, "%llux%llu blocks", (unsigned long long)br,
                     (unsigned long long)bc);
            return AMN_OK;
        }
        return amn_error_set(
            err, AMN_E_PARSE,
            "%s: shape %s fits neither a per-tensor scale, a per-channel [%llu, 1] "
            "scale nor %llux%llu blocks [%llu, %llu] of weight %s %s",
            s->name, quant_shape(s, sb, sizeof sb), (unsigned long long)out, (unsigned long long)bo,
            (unsigned long long)bi, (unsigned long long)ceil_div(out, bo),
            (unsigned long long)ceil_div(in, bi), w->name, quant_shape(w, wb, sizeof wb));
    }
    return amn_error_set(err, AMN_E_UNSUPPORTED,
                         "%s: a scale of shape %s for the %u-dimensional FP8 weight %s is not "
                         "supported (only 2-D weights take per-channel or block scales)",
                         s->name, quant_shape(s, sb, sizeof sb), w->ndim, w->name);
}

static int claim_weight(const amn_model *m, amn_claimset *cs, size_t wi, size_t plen,
                        const quant_config *qc, amn_error *err) {
    const amn_tensor *w = amn_model_tensor(m, wi);
    int rc = AMN_OK;
    const int64_t s_inv = find_suffix(m, w->name, plen, ".weight_scale_inv", err, &rc);
    const int64_t s_dir = rc ? -1 : find_suffix(m, w->name, plen, ".weight_scale", err, &rc);
    const int64_t act = rc ? -1 : find_suffix(m, w->name, plen, ".input_scale", err, &rc);
    if (rc) return rc;
    if (s_inv >= 0 && s_dir >= 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: both %s and %s are present; which one scales "
                             "the weight is ambiguous",
                             w->name, amn_model_tensor(m, (size_t)s_inv)->name,
                             amn_model_tensor(m, (size_t)s_dir)->name);
    const int64_t si = s_inv >= 0 ? s_inv : s_dir;
    if ((rc = quant_check_bytes(w, err))) return rc;
    uint64_t numel;
    amn_tensor_numel(w, &numel);
    if (numel == 0) return AMN_OK; /* nothing to dequantize: copied as it is */

    fp8_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->weight = wi;
    p->wtype = w->dtype;
    /* Rows are the first dimension (the output features of a 2-D weight). */
    p->cols = w->ndim == 0 ? 1 : w->shape[w->ndim - 1];
    p->rows = numel / p->cols;
    char what[64];
    const uint8_t *unused;
    if (si >= 0) {
        const amn_tensor *s = amn_model_tensor(m, (size_t)si);
        p->scale = (size_t)si;
        p->has_scale = true;
        p->stype = s->dtype;
        if (strcmp(qc->method, "compressed-tensors") == 0 && s->dtype != AMN_DTYPE_F32)
            p->round_to = s->dtype;
        rc = scale_layout(w, s, qc, p, what, sizeof what, err);
        if (!rc) rc = quant_tensor_bytes(s, &p->own_scale, &unused, err);
    } else {
        p->block_rows = p->rows;
        p->block_cols = p->cols;
        p->grid_cols = 1;
        snprintf(what, sizeof what, "unscaled");
    }
    if (!rc) rc = quant_tensor_bytes(w, &p->own_weight, &unused, err);
    if (rc) {
        fp8_plan_free(p);
        return rc;
    }
    const char *fmt = w->dtype == AMN_DTYPE_F8_E5M2 ? "E5M2" : "E4M3";
    char label[128];
    snprintf(label, sizeof label, "%sFP8 (%s), %s", strstr(what, "blocks") ? "Fine-grained " : "",
             fmt, what);
    p->name = strdup(w->name);
    p->label = strdup(label);
    if (!p->name || !p->label) {
        fp8_plan_free(p);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }

    amn_group_spec g = {.struct_size = sizeof g,
                        .out_name = p->name,
                        .ndim = w->ndim,
                        .label = p->label,
                        .plan = p,
                        .plan_free = fp8_plan_free};
    memcpy(g.shape, w->shape, sizeof g.shape);
    g.row_elems = p->cols;
    g.members[g.n_members] = wi;
    g.roles[g.n_members++] = AMN_ROLE_WEIGHT;
    if (si >= 0) {
        g.members[g.n_members] = (size_t)si;
        g.roles[g.n_members++] = AMN_ROLE_SCALE;
    }
    if ((rc = amn_claimset_add(cs, &g, err))) return rc;

    if (act >= 0 && !amn_claimset_is_claimed(cs, (size_t)act)) {
        const amn_tensor *a = amn_model_tensor(m, (size_t)act);
        amn_group_spec d = {.struct_size = sizeof d,
                            .out_name = NULL,
                            .ndim = a->ndim,
                            .row_elems = 1,
                            .n_members = 1,
                            .label = "activation scale (dropped)"};
        memcpy(d.shape, a->shape, sizeof d.shape);
        d.members[0] = (size_t)act;
        d.roles[0] = AMN_ROLE_ACT_SCALE;
        if ((rc = amn_claimset_add(cs, &d, err))) return rc;
    }
    return AMN_OK;
}

int fp8_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    quant_config qc;
    bool loaded = false, any = false;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (!is_fp8(t->dtype) || !quant_suffix(t->name, ".weight", &plen)) continue;
        if (amn_claimset_is_claimed(cs, i)) continue;
        if (!loaded) {
            quant_config_load(m, &qc);
            loaded = true;
        }
        any = true;
        int rc = claim_weight(m, cs, i, plen, &qc, err);
        if (rc) return rc;
    }
    if (!any) return AMN_OK;
    /* In an FP8 model a weight scale whose weight is missing is a broken file,
     * not a parameter to copy. */
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (amn_claimset_is_claimed(cs, i)) continue;
        if (!quant_suffix(t->name, ".weight_scale_inv", &plen) &&
            !quant_suffix(t->name, ".weight_scale", &plen))
            continue;
        int rc = AMN_OK;
        const int64_t w = find_suffix(m, t->name, plen, ".weight", err, &rc);
        const int64_t packed = rc ? -1 : find_suffix(m, t->name, plen, ".weight_packed", err, &rc);
        if (rc) return rc;
        if (w < 0 && packed < 0)
            return amn_error_set(err, AMN_E_PARSE, "%s: scale without its weight %.*s.weight",
                                 t->name, (int)plen, t->name);
    }
    return AMN_OK;
}
