/* Finding NVFP4 weights.
 *
 * ModelOpt (hf_quant_config.json quant_algo NVFP4): "<p>.weight" U8
 * [O, I/2], "<p>.weight_scale" F8_E4M3 [O, I/16], "<p>.weight_scale_2" F32
 * (one value); "<p>.input_scale" is dropped. Per-expert MoE layers are
 * ordinary layers named "...experts.<n>.<proj>".
 * ModelOpt fused 3-D experts (modelopt/torch/export: the fused export that
 * keeps each projection whole, and _export_quantized_weight on Llama4 /
 * gpt-oss batched experts): "<p>" U8 with "<p>_weight_scale" F8_E4M3,
 * "<p>_weight_scale_2" F32 (one value, or one per expert) and
 * "<p>_input_scale" dropped (or the dotted ".weight" names with a 3-D
 * weight). Either [E, O, I/2] with scales [E, O, I/16] (output [E, O, I]),
 * or the batched-matmul layout [E, I/2, O] with scales [E, I/16, O], which
 * ModelOpt transposes back after quantizing (output [E, I, O], as the model
 * holds it). The output keeps the name "<p>".
 * compressed-tensors nvfp4-pack-quantized: "<p>.weight_packed" U8 [O, I/2],
 * "<p>.weight_scale" F8_E4M3 [O, I/16], "<p>.weight_global_scale" F32 [1];
 * "<p>.input_global_scale" is dropped; the output is "<p>.weight". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "amn/kit/quant_common.h"
#include "nvfp4_plan.h"

void nvfp4_plan_free(void *plan) {
    nvfp4_plan *p = plan;
    if (!p) return;
    free(p->seconds);
    free(p->own[0]);
    free(p->own[1]);
    free(p->name);
    free(p->label);
    free(p);
}

static int drop_activation(const amn_model *m, amn_claimset *cs, int64_t i, amn_error *err) {
    if (i < 0 || amn_claimset_is_claimed(cs, (size_t)i)) return AMN_OK;
    const amn_tensor *a = amn_model_tensor(m, (size_t)i);
    amn_group_spec d = {.struct_size = sizeof(amn_group_spec),
                        .out_name = NULL,
                        .ndim = a->ndim,
                        .row_elems = 1,
                        .n_members = 1,
                        .label = "activation scale (dropped)"};
    memcpy(d.shape, a->shape, sizeof d.shape);
    d.members[0] = (size_t)i;
    d.roles[0] = AMN_ROLE_ACT_SCALE;
    return amn_claimset_add(cs, &d, err);
}

/* The names of one layout's companions: "<prefix><suffix>". */
typedef struct nvfp4_names {
    const char *scale, *second, *act, *out;
} nvfp4_names;

static const nvfp4_names modelopt_names = {".weight_scale", ".weight_scale_2", ".input_scale",
                                           ".weight"};
static const nvfp4_names ct_names = {".weight_scale", ".weight_global_scale", ".input_global_scale",
                                     ".weight"};
static const nvfp4_names fused_names = {"_weight_scale", "_weight_scale_2", "_input_scale", ""};

/* A 3-D weight [E, a, b] whose scale is [E, a / 8, b]: the batched layout. */
static bool is_bmm(const amn_tensor *w, const amn_tensor *s) {
    return w->ndim == 3 && s->ndim == 3 && s->dtype == AMN_DTYPE_F8_E4M3 &&
           s->shape[0] == w->shape[0] && w->shape[1] % 8 == 0 && s->shape[1] == w->shape[1] / 8 &&
           s->shape[2] == w->shape[2] && !(w->shape[2] % 8 == 0 && s->shape[2] == w->shape[2] / 8);
}

static int check_shapes(nvfp4_plan *p, const amn_tensor *w, const amn_tensor *s,
                        const amn_tensor *s2, amn_error *err) {
    char b1[96], b2[96];
    bool ok = (w->ndim == 2 || w->ndim == 3);
    for (uint32_t d = 0; ok && d < w->ndim; d++) ok = w->shape[d] != 0;
    if (!ok)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected U8 [out, in/2] or fused experts [experts, out, in/2], "
                             "found %s",
                             w->name, quant_shape(w, b1, sizeof b1));
    p->bmm = is_bmm(w, s);
    /* The packed axis: the last one, or the middle one of the batched layout. */
    const uint64_t cols = p->bmm ? w->shape[1] : w->shape[w->ndim - 1], in = 2 * cols;
    if (in % 16 != 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: %llu values per row are not whole blocks of 16",
                             w->name, (unsigned long long)in);
    ok = p->bmm ||
         (s->dtype == AMN_DTYPE_F8_E4M3 && s->ndim == w->ndim && s->shape[s->ndim - 1] == in / 16);
    for (uint32_t d = 0; ok && !p->bmm && d + 1 < w->ndim; d++) ok = s->shape[d] == w->shape[d];
    if (!ok)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected F8_E4M3 with one scale per 16 values of %s %s (last "
                             "dimension %llu), found %s %s",
                             s->name, w->name, quant_shape(w, b2, sizeof b2),
                             (unsigned long long)in / 16, amn_dtype_name(s->dtype),
                             quant_shape(s, b1, sizeof b1));
    p->experts = w->ndim == 3 ? w->shape[0] : 1;
    uint64_t n2;
    amn_tensor_numel(s2, &n2);
    if (s2->dtype != AMN_DTYPE_F32 || s2->ndim > 1 || (n2 != 1 && n2 != p->experts))
        return amn_error_set(err, AMN_E_PARSE, "%s: expected F32 with one value%s, found %s %s",
                             s2->name, p->experts > 1 ? " or one per expert" : "",
                             amn_dtype_name(s2->dtype), quant_shape(s2, b1, sizeof b1));
    int rc = quant_check_bytes(w, err);
    if (!rc) rc = quant_check_bytes(s, err);
    if (!rc) rc = quant_check_bytes(s2, err);
    if (rc) return rc;
    p->n_seconds = n2;
    if (p->bmm) {
        p->bmm_in = in;
        p->bmm_outs = w->shape[2];
        p->in = w->shape[2]; /* an output row: one (expert, input) pair */
        p->rows = w->shape[0] * in;
    } else {
        p->in = in;
        p->rows = w->ndim == 3 ? w->shape[0] * w->shape[1] : w->shape[0];
    }
    return AMN_OK;
}

static int claim(const amn_model *m, amn_claimset *cs, size_t wi, size_t plen, bool ct,
                 const nvfp4_names *nm, amn_error *err) {
    const amn_tensor *w = amn_model_tensor(m, wi);
    int rc = AMN_OK;
    const int64_t si = quant_find_companion(m, w->name, plen, nm->scale, &rc, err);
    const int64_t s2i = rc ? -1 : quant_find_companion(m, w->name, plen, nm->second, &rc, err);
    const int64_t ai = rc ? -1 : quant_find_companion(m, w->name, plen, nm->act, &rc, err);
    if (rc) return rc;
    if (s2i < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: NVFP4 weight without its %.*s%s", w->name,
                             (int)plen, w->name, nm->second);
    nvfp4_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->weight = wi;
    p->scale = (size_t)si;
    p->second = (size_t)s2i;
    p->divide = p->neg_zero = ct;
    const amn_tensor *s = amn_model_tensor(m, (size_t)si), *s2 = amn_model_tensor(m, (size_t)s2i);
    rc = check_shapes(p, w, s, s2, err);
    if (!rc && s2->data) {
        uint8_t *own;
        const uint8_t *b;
        rc = quant_tensor_bytes(s2, &own, &b, err);
        p->seconds = rc ? NULL : malloc(p->n_seconds * sizeof *p->seconds);
        if (!rc && !p->seconds) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        for (uint64_t e = 0; !rc && e < p->n_seconds; e++)
            p->seconds[e] = amn_load_le_f32(b + 4 * e);
        free(own);
    }
    const uint8_t *unused;
    if (!rc) rc = quant_tensor_bytes(w, &p->own[0], &unused, err);
    if (!rc) rc = quant_tensor_bytes(s, &p->own[1], &unused, err);
    char label[96];
    snprintf(label, sizeof label, "NVFP4 (%s), E2M1 with E4M3 scales per 16%s",
             ct ? "compressed-tensors" : "ModelOpt",
             w->ndim != 3 ? ""
             : p->bmm     ? ", fused experts [E, in, out]"
                          : ", fused experts");
    if (!rc) {
        p->name = quant_join(w->name, plen, nm->out);
        p->label = strdup(label);
        if (!p->name || !p->label) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (rc) {
        nvfp4_plan_free(p);
        return rc;
    }
    amn_group_spec g = {.struct_size = sizeof(amn_group_spec),
                        .out_name = p->name,
                        .ndim = w->ndim,
                        .row_elems = p->in,
                        .label = p->label,
                        .plan = p,
                        .plan_free = nvfp4_plan_free};
    memcpy(g.shape, w->shape, sizeof g.shape);
    if (p->bmm)
        g.shape[1] = p->bmm_in;
    else
        g.shape[w->ndim - 1] = p->in;
    g.members[g.n_members] = wi;
    g.roles[g.n_members++] = AMN_ROLE_WEIGHT;
    g.members[g.n_members] = (size_t)si;
    g.roles[g.n_members++] = AMN_ROLE_SCALE;
    g.members[g.n_members] = (size_t)s2i;
    g.roles[g.n_members++] = AMN_ROLE_SCALE;
    if ((rc = amn_claimset_add(cs, &g, err))) return rc;
    return drop_activation(m, cs, ai, err);
}

/* A weight this plugin reads: its layout (names) and prefix length, or false. */
static bool weight_layout(const amn_model *m, const amn_tensor *t, const nvfp4_names **nm,
                          size_t *plen, int *rc, amn_error *err) {
    if (t->dtype != AMN_DTYPE_U8) return false;
    if (quant_suffix(t->name, ".weight_packed", plen)) {
        *nm = &ct_names;
        return true;
    }
    if (quant_suffix(t->name, ".weight", plen)) {
        *nm = &modelopt_names;
        return true;
    }
    /* Fused experts keep the projection's own name: "<p>" beside "<p>_weight_scale". */
    *plen = strlen(t->name);
    const int64_t s = quant_find_companion(m, t->name, *plen, fused_names.scale, rc, err);
    *nm = &fused_names;
    return s >= 0 && t->ndim == 3;
}

int nvfp4_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    size_t claimed = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        const nvfp4_names *nm;
        int rc = AMN_OK;
        if (amn_claimset_is_claimed(cs, i)) continue;
        const bool ours = weight_layout(m, t, &nm, &plen, &rc, err);
        if (rc) return rc;
        if (!ours) continue;
        const bool ct = nm == &ct_names;
        /* Ours only with an E4M3 block scale beside it (bitsandbytes keeps
         * U8 weights too, with absmax). */
        const int64_t s = quant_find_companion(m, t->name, plen, nm->scale, &rc, err);
        if (rc) return rc;
        if (s < 0 || amn_model_tensor(m, (size_t)s)->dtype != AMN_DTYPE_F8_E4M3) {
            if (ct && s < 0)
                return amn_error_set(err, AMN_E_PARSE,
                                     "%s: NVFP4 weight without its %.*s.weight_scale", t->name,
                                     (int)plen, t->name);
            continue;
        }
        if ((rc = claim(m, cs, i, plen, ct, nm, err))) return rc;
        claimed++;
    }
    if (!claimed) return AMN_OK;
    static const char *const orphans[] = {".weight_scale_2", ".weight_global_scale",
                                          "_weight_scale_2"};
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (amn_claimset_is_claimed(cs, i)) continue;
        for (size_t k = 0; k < 3; k++)
            if (quant_suffix(t->name, orphans[k], &plen))
                return amn_error_set(err, AMN_E_PARSE, "%s: no NVFP4 weight %.*s for it", t->name,
                                     (int)plen, t->name);
    }
    return AMN_OK;
}
