/* Finding compressed-tensors integer weights and checking every companion.
 *
 * pack-quantized: "<p>.weight_packed" I32 [O, ceil(I/pf)], "<p>.weight_shape"
 * (I64 or I32 [2] = [O, I]), "<p>.weight_scale" [O, G] / [O, 1] / [1],
 * optional "<p>.weight_zero_point" and "<p>.weight_g_idx"; the output is
 * "<p>.weight". int-quantized: "<p>.weight" I8 [O, I] with "<p>.weight_scale"
 * (and the same optional companions); the output keeps the name.
 * "<p>.input_scale" / "<p>.input_zero_point" belong to the activations and
 * are dropped. The bit width follows from the packed width and weight_shape
 * and must agree with config_groups' num_bits when the config says; the
 * group size follows from the scale's width. A model whose config.json
 * names another quant_method is left to that method's plugin. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "amn/kit/quant_common.h"
#include "ct_plan.h"

void ct_plan_free(void *plan) {
    ct_plan *p = plan;
    if (!p) return;
    free(p->gidx);
    for (int k = 0; k < 3; k++) free(p->own[k]);
    free(p->name);
    free(p->label);
    free(p);
}

static bool is_scale_dtype(amn_dtype t) {
    return t == AMN_DTYPE_BF16 || t == AMN_DTYPE_F16 || t == AMN_DTYPE_F32;
}

static uint64_t ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

/* weight_shape's two values. */
static int read_shape(const amn_tensor *t, uint64_t v[2], amn_error *err) {
    char b1[96];
    if ((t->dtype != AMN_DTYPE_I64 && t->dtype != AMN_DTYPE_I32) || t->ndim != 1 ||
        t->shape[0] != 2)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected I64 or I32 [2], found %s %s", t->name,
                             amn_dtype_name(t->dtype), quant_shape(t, b1, sizeof b1));
    int rc = quant_check_bytes(t, err);
    uint8_t *own;
    const uint8_t *b;
    if (!rc) rc = quant_tensor_bytes(t, &own, &b, err);
    if (rc) return rc;
    for (int k = 0; k < 2; k++) {
        int64_t x;
        if (t->dtype == AMN_DTYPE_I64) {
            x = (int64_t)amn_load_le64(b + 8 * k);
        } else {
            const int32_t y = (int32_t)amn_load_le32(b + 4 * k);
            x = y;
        }
        if (x <= 0) {
            free(own);
            return amn_error_set(err, AMN_E_PARSE, "%s: dimension %d is %lld", t->name, k,
                                 (long long)x);
        }
        v[k] = (uint64_t)x;
    }
    free(own);
    return AMN_OK;
}

/* Block strategy: scale [R, G] with R != O. dequantize() (forward.py)
 * infers block_structure [O / R, I / G] from the shapes; a model whose
 * shapes do not divide its blocks (the scale then has initialize.py's
 * ceil(O / bo) x ceil(I / bi) grid) needs config_groups' block_structure,
 * and its edge blocks are partial: each element takes its block's scale, as
 * vLLM's padded block kernels read such files (the library's own
 * _process_quantization refuses those shapes). */
static int block_layout(ct_plan *p, const amn_tensor *w, const amn_tensor *s,
                        const quant_config *qc, amn_error *err) {
    char b1[96];
    const uint64_t O = p->l.out, I = p->l.in, R = s->shape[0], G = s->shape[1];
    uint64_t bo = 0, bi = 0;
    if (qc->block[0] > 0 && R == ceil_div(O, (uint64_t)qc->block[0]) &&
        G == ceil_div(I, (uint64_t)qc->block[1])) {
        bo = (uint64_t)qc->block[0];
        bi = (uint64_t)qc->block[1];
    } else if (O % R == 0 && I % G == 0) {
        bo = O / R;
        bi = I / G;
    } else if (!p->checked) {
        /* Header only: in_features is known only up to the last word's padding. */
        bo = ceil_div(O, R);
        bi = ceil_div(I, G);
    }
    if (!bo || !bi)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shape %s fits neither [%llu, groups], a per-tensor scale nor "
                             "blocks of %s ([%llu, %llu]; block_structure %d x %d in %s)",
                             s->name, quant_shape(s, b1, sizeof b1), (unsigned long long)O, w->name,
                             (unsigned long long)O, (unsigned long long)I, qc->block[0],
                             qc->block[1], qc->file[0] ? qc->file : "no config");
    p->block = true;
    p->l.block_rows = bo;
    p->l.groups = G;
    p->l.group_size = bi;
    return AMN_OK;
}

/* The scale's layout: per-tensor, per-channel, groups along the input or
 * 2-D blocks. */
static int scale_layout(ct_plan *p, const amn_tensor *w, const amn_tensor *s,
                        const quant_config *qc, amn_error *err) {
    char b1[96];
    if (!is_scale_dtype(s->dtype))
        return amn_error_set(err, AMN_E_PARSE, "%s: scale dtype %s is not BF16, F16 or F32",
                             s->name, amn_dtype_name(s->dtype));
    int rc = quant_check_bytes(s, err);
    if (rc) return rc;
    uint64_t n;
    amn_tensor_numel(s, &n);
    const uint64_t O = p->l.out, I = p->l.in;
    p->l.stype = s->dtype;
    if (s->ndim <= 1 && n == 1) {
        p->l.per_tensor = true;
        p->l.groups = 1;
        p->l.group_size = I;
        return AMN_OK;
    }
    if (s->ndim == 2 && s->shape[0] != O && s->shape[0] != 0 && s->shape[1] != 0)
        return block_layout(p, w, s, qc, err);
    if (s->ndim != 2 || s->shape[0] != O || s->shape[1] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: shape %s fits neither [%llu, groups] nor a per-tensor scale "
                             "of %s ([%llu, %llu])",
                             s->name, quant_shape(s, b1, sizeof b1), (unsigned long long)O, w->name,
                             (unsigned long long)O, (unsigned long long)I);
    const uint64_t G = s->shape[1];
    if (!p->checked) {
        /* Header only: in_features is known only up to the last word's padding. */
        p->l.groups = G;
        p->l.group_size = I / G ? I / G : 1;
        return AMN_OK;
    }
    if (I % G != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %llu groups do not divide in_features %llu of %s", s->name,
                             (unsigned long long)G, (unsigned long long)I, w->name);
    p->l.groups = G;
    p->l.group_size = I / G;
    return AMN_OK;
}

static int zero_layout(ct_plan *p, const amn_tensor *z, amn_error *err) {
    char b1[96];
    const uint64_t O = p->l.out, G = p->l.groups;
    int rc = quant_check_bytes(z, err);
    if (rc) return rc;
    if (p->l.per_tensor)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: zero points with a per-tensor scale are not supported", z->name);
    if (p->block) {
        /* Stored as the scale is (pack_quantized packs group and channel
         * zero points only). */
        const uint64_t R = ceil_div(O, p->l.block_rows);
        if (z->dtype == AMN_DTYPE_I8 && z->ndim == 2 && z->shape[0] == R && z->shape[1] == G) {
            p->l.zkind = CT_ZERO_I8;
            p->zero_bytes = R * G;
            return AMN_OK;
        }
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected I8 [%llu, %llu] beside block scales, found %s %s",
                             z->name, (unsigned long long)R, (unsigned long long)G,
                             amn_dtype_name(z->dtype), quant_shape(z, b1, sizeof b1));
    }
    if (z->dtype == AMN_DTYPE_I8 && z->ndim == 2 && z->shape[0] == O && z->shape[1] == G) {
        p->l.zkind = CT_ZERO_I8;
        p->zero_bytes = O * G;
        return AMN_OK;
    }
    if (p->l.packed && z->dtype == AMN_DTYPE_I32 && z->ndim == 2 &&
        z->shape[0] == ceil_div(O, 32 / p->l.bits) && z->shape[1] == G) {
        p->l.zkind = CT_ZERO_PACKED;
        p->zero_bytes = z->shape[0] * G * 4;
        return AMN_OK;
    }
    return amn_error_set(
        err, AMN_E_PARSE,
        "%s: expected I8 [%llu, %llu]%s%llu, %llu] (packed along the outputs), "
        "found %s %s",
        z->name, (unsigned long long)O, (unsigned long long)G, p->l.packed ? " or I32 [" : "",
        p->l.packed ? (unsigned long long)ceil_div(O, 32 / p->l.bits) : 0ull, (unsigned long long)G,
        amn_dtype_name(z->dtype), quant_shape(z, b1, sizeof b1));
}

/* g_idx: every column's group. Both library versions agree only when each
 * group holds exactly group_size columns; a -1 anywhere means column order. */
static int load_gidx(ct_plan *p, const amn_tensor *t, bool *act_order, amn_error *err) {
    char b1[96];
    *act_order = false;
    if ((t->dtype != AMN_DTYPE_I32 && t->dtype != AMN_DTYPE_I64) || t->ndim != 1 ||
        t->shape[0] != p->l.in)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected I32 [%llu], found %s %s", t->name,
                             (unsigned long long)p->l.in, amn_dtype_name(t->dtype),
                             quant_shape(t, b1, sizeof b1));
    int rc = quant_check_bytes(t, err);
    uint8_t *own;
    const uint8_t *b;
    if (!rc) rc = quant_tensor_bytes(t, &own, &b, err);
    if (rc || !b) return rc;
    const uint64_t I = p->l.in, G = p->l.groups;
    int32_t *g = malloc(I * sizeof *g);
    uint64_t *count = calloc(G, sizeof *count);
    bool column_order = false, sequential = true;
    for (uint64_t i = 0; g && count && !rc && i < I; i++) {
        int64_t v;
        if (t->dtype == AMN_DTYPE_I64) {
            v = (int64_t)amn_load_le64(b + 8 * i);
        } else {
            const int32_t y = (int32_t)amn_load_le32(b + 4 * i);
            v = y;
        }
        if (v == -1) {
            column_order = true;
            continue;
        }
        if (v < 0 || (uint64_t)v >= G)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: value %lld at %llu is not a group of 0..%llu",
                               t->name, (long long)v, (unsigned long long)i,
                               (unsigned long long)G - 1);
        else {
            g[i] = (int32_t)v;
            count[v]++;
            if ((uint64_t)v != i / p->l.group_size) sequential = false;
        }
    }
    if (!rc && (!g || !count)) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (uint64_t k = 0; !rc && !column_order && k < G; k++)
        if (count[k] != p->l.group_size)
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: group %llu has %llu columns, not the group size %llu", t->name,
                               (unsigned long long)k, (unsigned long long)count[k],
                               (unsigned long long)p->l.group_size);
    free(own);
    free(count);
    if (rc || column_order || sequential) {
        free(g);
        return rc;
    }
    p->gidx = g;
    *act_order = true;
    return AMN_OK;
}

/* Index of "<prefix><suffix>" or -1; *rc set when out of memory. */
static int64_t companion(const amn_model *m, const char *name, size_t plen, const char *suffix,
                         int *rc, amn_error *err) {
    return *rc ? -1 : quant_find_companion(m, name, plen, suffix, rc, err);
}

static int drop_activation(const amn_model *m, amn_claimset *cs, int64_t i, amn_error *err) {
    if (i < 0 || amn_claimset_is_claimed(cs, (size_t)i)) return AMN_OK;
    const amn_tensor *a = amn_model_tensor(m, (size_t)i);
    amn_group_spec d = {.struct_size = sizeof(amn_group_spec),
                        .out_name = NULL,
                        .ndim = a->ndim,
                        .row_elems = 1,
                        .n_members = 1,
                        .label = "activation quantization (dropped)"};
    memcpy(d.shape, a->shape, sizeof d.shape);
    d.members[0] = (size_t)i;
    d.roles[0] = AMN_ROLE_ACT_SCALE;
    return amn_claimset_add(cs, &d, err);
}

static int claim(const amn_model *m, amn_claimset *cs, const quant_config *qc, size_t wi,
                 size_t plen, bool packed, amn_error *err) {
    const amn_tensor *w = amn_model_tensor(m, wi);
    char b1[96];
    int rc = AMN_OK;
    const int64_t si = companion(m, w->name, plen, ".weight_scale", &rc, err);
    const int64_t zi = companion(m, w->name, plen, ".weight_zero_point", &rc, err);
    const int64_t gi = companion(m, w->name, plen, ".weight_g_idx", &rc, err);
    const int64_t shi = packed ? companion(m, w->name, plen, ".weight_shape", &rc, err) : -1;
    const int64_t ai = companion(m, w->name, plen, ".input_scale", &rc, err);
    const int64_t azi = companion(m, w->name, plen, ".input_zero_point", &rc, err);
    if (rc) return rc;
    if (si < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: quantized weight without its %.*s.weight_scale",
                             w->name, (int)plen, w->name);
    if (packed && shi < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: packed weight without its %.*s.weight_shape",
                             w->name, (int)plen, w->name);
    if ((rc = quant_check_bytes(w, err))) return rc;
    if (w->ndim != 2 || w->shape[0] == 0 || w->shape[1] == 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected a non-empty 2-D %s, found %s", w->name,
                             packed ? "I32" : "I8", quant_shape(w, b1, sizeof b1));

    ct_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->weight = wi;
    p->scale = (size_t)si;
    p->l.packed = packed;
    p->l.out = w->shape[0];
    p->checked = true;
    const amn_tensor *sh = shi >= 0 ? amn_model_tensor(m, (size_t)shi) : NULL;
    if (!packed) {
        p->l.bits = 8;
        p->l.in = w->shape[1];
        p->weight_bytes = p->l.out * p->l.in;
        if (qc->num_bits && qc->num_bits != 8)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: num_bits %d in %s, but the weight is I8",
                               w->name, qc->num_bits, qc->file);
    } else {
        const uint64_t P = w->shape[1];
        uint64_t v[2] = {0, 0};
        if (sh->data)
            rc = read_shape(sh, v, err);
        else
            p->checked = false; /* header only: sizes from the packing */
        if (!rc && p->checked && v[0] != p->l.out)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: %llu rows, but %s says %llu", w->name,
                               (unsigned long long)p->l.out, sh->name, (unsigned long long)v[0]);
        unsigned bits = 0;
        if (!rc && qc->num_bits) {
            if (qc->num_bits < 1 || qc->num_bits > 8)
                rc = amn_error_set(err, AMN_E_UNSUPPORTED, "%s: num_bits %d (from %s)", w->name,
                                   qc->num_bits, qc->file);
            bits = (unsigned)qc->num_bits;
        } else if (!rc && p->checked) {
            /* The widths whose packing gives P words per row. */
            for (unsigned b = 2; b <= 8; b *= 2)
                if (ceil_div(v[1], 32 / b) == P) {
                    if (bits)
                        rc = amn_error_set(err, AMN_E_PARSE,
                                           "%s: %llu words of %llu values fit %u and %u bits; "
                                           "config.json num_bits is needed",
                                           w->name, (unsigned long long)P, (unsigned long long)v[1],
                                           bits, b);
                    bits = b;
                }
        } else if (!rc) {
            bits = 4;
        }
        if (!rc && !bits)
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: %llu words per row do not pack %llu values (%s) at 2, 4 or 8 "
                               "bits",
                               w->name, (unsigned long long)P, (unsigned long long)v[1], sh->name);
        if (!rc) {
            p->l.bits = bits;
            p->l.in = p->checked ? v[1] : P * (32 / bits);
            p->l.words = P;
            if (p->checked && ceil_div(p->l.in, 32 / bits) != P)
                rc = amn_error_set(err, AMN_E_PARSE,
                                   "%s: packed length %llu does not match %s [%llu, %llu] at %u "
                                   "bits (%llu words)",
                                   w->name, (unsigned long long)P, sh->name,
                                   (unsigned long long)v[0], (unsigned long long)v[1], bits,
                                   (unsigned long long)ceil_div(p->l.in, 32 / bits));
            p->weight_bytes = p->l.out * P * 4;
        }
    }
    if (!rc) rc = scale_layout(p, w, amn_model_tensor(m, (size_t)si), qc, err);
    if (!rc) p->scale_bytes = amn_model_tensor(m, (size_t)si)->nbytes;
    if (!rc && zi >= 0) {
        p->zero = (size_t)zi;
        rc = zero_layout(p, amn_model_tensor(m, (size_t)zi), err);
    }
    bool act_order = false;
    if (!rc && gi >= 0 && p->block)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "%s: g_idx beside block scales %s",
                           amn_model_tensor(m, (size_t)gi)->name,
                           amn_model_tensor(m, (size_t)si)->name);
    if (!rc && gi >= 0) {
        const amn_tensor *g = amn_model_tensor(m, (size_t)gi);
        if (g->data && p->checked)
            rc = load_gidx(p, g, &act_order, err);
        else
            p->checked = false;
    }
    const uint8_t *unused;
    if (!rc) rc = quant_tensor_bytes(w, &p->own[0], &unused, err);
    if (!rc) rc = quant_tensor_bytes(amn_model_tensor(m, (size_t)si), &p->own[1], &unused, err);
    if (!rc && zi >= 0)
        rc = quant_tensor_bytes(amn_model_tensor(m, (size_t)zi), &p->own[2], &unused, err);
    char label[128];
    if (!rc) {
        int k = snprintf(label, sizeof label, "compressed-tensors %s int%u, ",
                         packed ? "pack-quantized" : "int-quantized", p->l.bits);
        if (p->l.per_tensor)
            k += snprintf(label + k, sizeof label - (size_t)k, "per-tensor");
        else if (p->block)
            k += snprintf(label + k, sizeof label - (size_t)k, "%llux%llu blocks",
                          (unsigned long long)p->l.block_rows, (unsigned long long)p->l.group_size);
        else if (p->l.groups == 1)
            k += snprintf(label + k, sizeof label - (size_t)k, "per-channel");
        else
            k += snprintf(label + k, sizeof label - (size_t)k, "group %llu",
                          (unsigned long long)p->l.group_size);
        k += snprintf(label + k, sizeof label - (size_t)k, "%s%s",
                      p->l.zkind ? ", asymmetric" : ", symmetric", act_order ? ", act-order" : "");
        p->label = strdup(label);
        p->name = quant_join(w->name, plen, ".weight");
        if (!p->label || !p->name) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (rc) {
        ct_plan_free(p);
        return rc;
    }
    amn_group_spec g = {.struct_size = sizeof(amn_group_spec),
                        .out_name = p->name,
                        .ndim = 2,
                        .shape = {p->l.out, p->l.in},
                        .row_elems = p->l.in,
                        .label = p->label,
                        .plan = p,
                        .plan_free = ct_plan_free,
                        .row_quantum = ct_row_quantum(&p->l)};
    g.members[g.n_members] = wi;
    g.roles[g.n_members++] = AMN_ROLE_WEIGHT;
    g.members[g.n_members] = (size_t)si;
    g.roles[g.n_members++] = AMN_ROLE_SCALE;
    if (zi >= 0) {
        g.members[g.n_members] = (size_t)zi;
        g.roles[g.n_members++] = AMN_ROLE_ZERO;
    }
    if (gi >= 0) {
        g.members[g.n_members] = (size_t)gi;
        g.roles[g.n_members++] = AMN_ROLE_GROUP_INDEX;
    }
    if (shi >= 0) {
        g.members[g.n_members] = (size_t)shi;
        g.roles[g.n_members++] = AMN_ROLE_AUX;
    }
    if ((rc = amn_claimset_add(cs, &g, err))) return rc;
    if ((rc = drop_activation(m, cs, ai, err))) return rc;
    return drop_activation(m, cs, azi, err);
}

int ct_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    quant_config qc;
    bool loaded = false;
    size_t claimed = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        bool packed;
        if (amn_claimset_is_claimed(cs, i)) continue;
        if (t->dtype == AMN_DTYPE_I32 && quant_suffix(t->name, ".weight_packed", &plen))
            packed = true;
        else if (t->dtype == AMN_DTYPE_I8 && quant_suffix(t->name, ".weight", &plen))
            packed = false;
        else
            continue;
        if (!loaded) {
            quant_config_load(m, &qc);
            loaded = true;
            /* Another method's model (bitsandbytes INT8 has I8 weights too). */
            if (qc.method[0] && strcmp(qc.method, "compressed-tensors") != 0) return AMN_OK;
        }
        if (!packed) {
            int rc = AMN_OK;
            const int64_t s = quant_find_companion(m, t->name, plen, ".weight_scale", &rc, err);
            if (rc) return rc;
            if (s < 0) continue; /* not ours (bitsandbytes keeps SCB) */
        }
        int rc = claim(m, cs, &qc, i, plen, packed, err);
        if (rc) return rc;
        claimed++;
    }
    if (!claimed) return AMN_OK;
    /* In such a model, companions without their weight mean a broken file. */
    static const char *const orphans[] = {".weight_zero_point", ".weight_g_idx", ".weight_shape"};
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen = 0;
        if (amn_claimset_is_claimed(cs, i)) continue;
        for (size_t k = 0; k < 3; k++)
            if (quant_suffix(t->name, orphans[k], &plen))
                return amn_error_set(err, AMN_E_PARSE, "%s: no quantized weight %.*s for it",
                                     t->name, (int)plen, t->name);
    }
    return AMN_OK;
}
