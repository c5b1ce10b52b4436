/* Finding bitsandbytes weights in a model and checking every companion.
 *
 * 4-bit (as transformers saves Linear4bit): "<p>.weight" U8 holding
 * (n + 1) / 2 packed bytes, "<p>.weight.absmax", "<p>.weight.quant_map"
 * F32[16] and "<p>.weight.quant_state.bitsandbytes__nf4" (or __fp4), U8 bytes
 * of a JSON object with quant_type, blocksize, dtype and the original shape;
 * with double quant also "<p>.weight.nested_absmax" F32,
 * "<p>.weight.nested_quant_map" F32[256] and the JSON's nested_blocksize and
 * nested_offset (absmax then holds U8 codes).
 * INT8 (Linear8bitLt): "<p>.weight" I8 [out, in], "<p>.SCB" F32 [out] and
 * optionally "<p>.weight_format" U8 (0 = row-major; others are refused). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "amn/byteorder.h"
#include "amn/checked.h"
#include "amn/kit/quant_common.h"
#include "bnb_plan.h"

#define BLOB_MAX (64u << 10) /* a quant_state is ~150 bytes */

void bnb_plan_free(void *plan) {
    bnb_plan *p = plan;
    if (!p) return;
    for (int k = 0; k < 3; k++) free(p->own[k]);
    free(p->name);
    free(p->label);
    free(p);
}

static uint64_t ceil_div(uint64_t a, uint64_t b) {
    return a / b + (a % b != 0);
}

typedef struct qstate {
    char quant_type[8];
    int64_t blocksize;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    bool has_nested;
    int64_t nested_blocksize;
    double nested_offset;
} qstate;

static bool get_i64(json_object *o, const char *key, int64_t *v) {
    json_object *x;
    if (!json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_int))
        return false;
    *v = json_object_get_int64(x);
    return true;
}

/* Parse the quant_state blob of tensor b (its data is present). */
static int parse_blob(const amn_tensor *b, bool want_nested, qstate *q, amn_error *err) {
    memset(q, 0, sizeof *q);
    if (b->nbytes == 0 || b->nbytes > BLOB_MAX)
        return amn_error_set(err, AMN_E_PARSE, "%s: a quant_state of %llu bytes is not plausible",
                             b->name, (unsigned long long)b->nbytes);
    char *s = malloc((size_t)b->nbytes + 1);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = amn_tensor_read(b, 0, s, b->nbytes, err);
    if (rc) {
        free(s);
        return rc;
    }
    s[b->nbytes] = '\0';
    json_tokener *tok = json_tokener_new_ex(4);
    json_object *o = tok ? json_tokener_parse_ex(tok, s, (int)b->nbytes) : NULL;
    const bool ok = tok && json_tokener_get_error(tok) == json_tokener_success && o &&
                    json_object_is_type(o, json_type_object) &&
                    json_tokener_get_parse_end(tok) == b->nbytes;
    if (tok) json_tokener_free(tok);
    free(s);
    if (!ok) {
        json_object_put(o);
        return amn_error_set(err, AMN_E_PARSE, "%s: quant_state is not a JSON object", b->name);
    }
    json_object *v, *shape;
    rc = AMN_OK;
    if (!json_object_object_get_ex(o, "quant_type", &v) ||
        !json_object_is_type(v, json_type_string) ||
        snprintf(q->quant_type, sizeof q->quant_type, "%s", json_object_get_string(v)) >=
            (int)sizeof q->quant_type)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_state has no quant_type string", b->name);
    else if (!get_i64(o, "blocksize", &q->blocksize) || q->blocksize <= 0 ||
             q->blocksize > (1 << 24))
        rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_state blocksize missing or out of range",
                           b->name);
    else if (!json_object_object_get_ex(o, "shape", &shape) ||
             !json_object_is_type(shape, json_type_array) || json_object_array_length(shape) < 1 ||
             json_object_array_length(shape) > AMN_MAX_DIMS)
        rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_state has no shape array", b->name);
    if (!rc) {
        q->ndim = (uint32_t)json_object_array_length(shape);
        for (uint32_t d = 0; !rc && d < q->ndim; d++) {
            json_object *e = json_object_array_get_idx(shape, d);
            if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0)
                rc = amn_error_set(err, AMN_E_PARSE,
                                   "%s: quant_state shape holds something not a size", b->name);
            else
                q->shape[d] = (uint64_t)json_object_get_int64(e);
        }
    }
    if (!rc && json_object_object_get_ex(o, "dtype", &v) &&
        !json_object_is_type(v, json_type_string))
        rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_state dtype is not a string", b->name);
    if (!rc && want_nested) {
        q->has_nested = true;
        if (!get_i64(o, "nested_blocksize", &q->nested_blocksize) || q->nested_blocksize <= 0 ||
            q->nested_blocksize > (1 << 24))
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: double quant without a positive nested_blocksize", b->name);
        else if (!json_object_object_get_ex(o, "nested_offset", &v) ||
                 !(json_object_is_type(v, json_type_double) ||
                   json_object_is_type(v, json_type_int)))
            rc = amn_error_set(err, AMN_E_PARSE, "%s: double quant without a nested_offset number",
                               b->name);
        else if (!isfinite(q->nested_offset = json_object_get_double(v)) ||
                 !isfinite((float)q->nested_offset))
            rc = amn_error_set(err, AMN_E_PARSE, "%s: nested_offset is not finite", b->name);
    }
    json_object_put(o);
    return rc;
}

/* Every F32 of t finite (scales and codebooks). */
static int check_finite(const amn_tensor *t, const uint8_t *bytes, uint64_t count, amn_error *err) {
    for (uint64_t i = 0; i < count; i++) {
        const float f = amn_load_le_f32(bytes + i * 4);
        if (!isfinite(f))
            return amn_error_set(err, AMN_E_PARSE, "%s: value %llu is %s", t->name,
                                 (unsigned long long)i, f != f ? "NaN" : "infinite");
    }
    return AMN_OK;
}

static int check_dtype_count(const amn_tensor *t, amn_dtype want, uint64_t count, const char *what,
                             amn_error *err) {
    char sb[96];
    uint64_t n;
    int rc = quant_check_bytes(t, err);
    if (rc) return rc;
    amn_tensor_numel(t, &n);
    if (t->dtype != want || n != count)
        return amn_error_set(err, AMN_E_PARSE, "%s: expected %s %s of %llu values, found %s %s",
                             t->name, what, amn_dtype_name(want), (unsigned long long)count,
                             amn_dtype_name(t->dtype), quant_shape(t, sb, sizeof sb));
    return AMN_OK;
}

static int config_conflict(const quant_config *qc, bool four_bit, const char *kind, bool nested,
                           const char *who, amn_error *err) {
    if (strcmp(qc->method, "bitsandbytes") != 0) return AMN_OK;
    const int says4 = qc->load_in_4bit, says8 = qc->load_in_8bit;
    if ((four_bit && says8 == 1 && says4 != 1) || (!four_bit && says4 == 1 && says8 != 1))
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: %s-bit tensors, but %s's quantization_config says load_in_%s",
                             who, four_bit ? "4" : "8", qc->file, four_bit ? "8bit" : "4bit");
    if (four_bit && qc->bnb_quant_type[0] && strcmp(qc->bnb_quant_type, kind) != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: quant_state says %s, %s's bnb_4bit_quant_type says %s", who, kind,
                             qc->file, qc->bnb_quant_type);
    if (four_bit && qc->bnb_double_quant >= 0 && (qc->bnb_double_quant != 0) != nested)
        return amn_error_set(
            err, AMN_E_PARSE, "%s: %s double quant, but %s's bnb_4bit_use_double_quant says %s",
            who, nested ? "has" : "has no", qc->file, qc->bnb_double_quant ? "true" : "false");
    return AMN_OK;
}

static int finish_claim(amn_claimset *cs, bnb_plan *p, const amn_group_spec *g0, amn_error *err) {
    amn_group_spec g = *g0;
    g.out_name = p->name;
    g.label = p->label;
    g.plan = p;
    g.plan_free = bnb_plan_free;
    return amn_claimset_add(cs, &g, err);
}

static int64_t companion(const amn_model *m, const char *name, size_t plen, const char *suffix,
                         int *rc, amn_error *err) {
    return quant_find_companion(m, name, plen, suffix, rc, err);
}

/* A 4-bit weight from its quant_state blob bi; plen: length of "<p>.weight". */
static int claim_4bit(const amn_model *m, amn_claimset *cs, const quant_config *qc, size_t bi,
                      size_t plen, const char *kind, amn_error *err) {
    const amn_tensor *b = amn_model_tensor(m, bi);
    int rc = AMN_OK;
    const int64_t wi = companion(m, b->name, plen, "", &rc, err);
    const int64_t ai = rc ? -1 : companion(m, b->name, plen, ".absmax", &rc, err);
    const int64_t qi = rc ? -1 : companion(m, b->name, plen, ".quant_map", &rc, err);
    const int64_t ni = rc ? -1 : companion(m, b->name, plen, ".nested_absmax", &rc, err);
    const int64_t nqi = rc ? -1 : companion(m, b->name, plen, ".nested_quant_map", &rc, err);
    if (rc) return rc;
    if (wi < 0 || ai < 0 || qi < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: its %.*s%s is missing", b->name, (int)plen,
                             b->name,
                             wi < 0   ? ""
                             : ai < 0 ? ".absmax"
                                      : ".quant_map");
    if ((ni < 0) != (nqi < 0))
        return amn_error_set(err, AMN_E_PARSE, "%s: %.*s.%s without %s", b->name, (int)plen,
                             b->name, ni < 0 ? "nested_quant_map" : "nested_absmax",
                             ni < 0 ? "nested_absmax" : "nested_quant_map");
    const size_t idx[5] = {(size_t)wi, (size_t)ai, (size_t)qi, (size_t)ni, (size_t)nqi};
    const bool nested = ni >= 0;
    for (int k = 0; k < (nested ? 5 : 3); k++)
        if (amn_claimset_is_claimed(cs, idx[k]))
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: tensor %s already belongs to another weight", b->name,
                                 amn_model_tensor(m, idx[k])->name);
    const amn_tensor *w = amn_model_tensor(m, (size_t)wi), *a = amn_model_tensor(m, (size_t)ai),
                     *q = amn_model_tensor(m, (size_t)qi);
    const amn_tensor *na = nested ? amn_model_tensor(m, (size_t)ni) : NULL,
                     *nq = nested ? amn_model_tensor(m, (size_t)nqi) : NULL;
    char sb[96];
    if (b->dtype != AMN_DTYPE_U8 || b->ndim != 1)
        return amn_error_set(err, AMN_E_PARSE, "%s: a quant_state must be 1-D U8, found %s %s",
                             b->name, amn_dtype_name(b->dtype), quant_shape(b, sb, sizeof sb));
    if (w->dtype != AMN_DTYPE_U8)
        return amn_error_set(err, AMN_E_PARSE, "%s: a 4-bit weight must be U8, found %s", w->name,
                             amn_dtype_name(w->dtype));
    if ((rc = quant_check_bytes(w, err))) return rc;
    if ((rc = config_conflict(qc, true, kind, nested, w->name, err))) return rc;

    bnb_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->kind = strcmp(kind, "fp4") == 0 ? BNB_FP4 : BNB_NF4;
    p->nested = nested;
    p->weight = (size_t)wi;
    p->absmax = (size_t)ai;
    p->nested_absmax = nested ? (size_t)ni : 0;
    amn_group_spec g = {.struct_size = sizeof(amn_group_spec), .row_elems = 1};
    qstate qs = {0};
    const bool have_data =
        b->data && w->data && a->data && q->data && (!nested || (na->data && nq->data));
    if (have_data) {
        rc = parse_blob(b, nested, &qs, err);
        if (!rc && strcmp(qs.quant_type, kind) != 0)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_type \"%s\" in a __%s quant_state",
                               b->name, qs.quant_type, kind);
        uint64_t n = 1;
        for (uint32_t d = 0; !rc && d < qs.ndim; d++)
            if (!amn_mul_u64(n, qs.shape[d], &n))
                rc = amn_error_set(err, AMN_E_PARSE, "%s: quant_state shape overflows", b->name);
        if (!rc && w->nbytes != n / 2 + (n & 1))
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: %llu packed bytes, but quant_state shape holds %llu values "
                               "(%llu bytes)",
                               w->name, (unsigned long long)w->nbytes, (unsigned long long)n,
                               (unsigned long long)(n / 2 + (n & 1)));
        if (!rc) {
            p->n = n;
            p->block = (uint64_t)qs.blocksize;
            const uint64_t blocks = ceil_div(n, p->block);
            rc = check_dtype_count(a, nested ? AMN_DTYPE_U8 : AMN_DTYPE_F32, blocks,
                                   nested ? "absmax codes" : "absmax", err);
            if (!rc) rc = check_dtype_count(q, AMN_DTYPE_F32, 16, "quant_map", err);
            if (!rc && nested) {
                p->nested_block = (uint64_t)qs.nested_blocksize;
                p->nested_offset = (float)qs.nested_offset;
                rc = check_dtype_count(na, AMN_DTYPE_F32, ceil_div(blocks, p->nested_block),
                                       "nested_absmax (one per nested block)", err);
                if (!rc) rc = check_dtype_count(nq, AMN_DTYPE_F32, 256, "nested_quant_map", err);
            }
        }
        const uint8_t *bytes;
        uint8_t *own = NULL;
        if (!rc && !(rc = quant_tensor_bytes(q, &own, &bytes, err))) {
            float qm[16];
            for (int k = 0; k < 16; k++) qm[k] = amn_load_le_f32(bytes + 4 * k);
            rc = check_finite(q, bytes, 16, err);
            free(own);
            bnb4_codebook(qm, p->codebook);
        }
        if (!rc && nested && !(rc = quant_tensor_bytes(nq, &own, &bytes, err))) {
            memcpy(p->nested_map, bytes, sizeof p->nested_map);
            free(own);
            rc = check_finite(nq, (const uint8_t *)p->nested_map, 256, err);
            amn_le_to_host_n(p->nested_map, 4, 256); /* file bytes to host floats */
        }
        const uint8_t *unused;
        if (!rc) rc = quant_tensor_bytes(w, &p->own[0], &unused, err);
        if (!rc) rc = quant_tensor_bytes(a, &p->own[1], &bytes, err);
        if (!rc && !nested) rc = check_finite(a, bytes, ceil_div(p->n, p->block), err);
        if (!rc && nested && !(rc = quant_tensor_bytes(na, &p->own[2], &bytes, err)))
            rc = check_finite(na, bytes, na->nbytes / 4, err);
        if (!rc) {
            g.ndim = qs.ndim;
            memcpy(g.shape, qs.shape, sizeof g.shape);
            p->cols = qs.shape[qs.ndim - 1];
            p->rows = p->cols ? p->n / p->cols : 0;
            g.row_elems = p->cols ? p->cols : 1;
            p->checked = true;
        }
    } else {
        /* Header only (inspect): the shape is in the blob's bytes, which are
         * not read; report the values the packed bytes hold. */
        uint64_t nb;
        amn_tensor_numel(w, &nb);
        p->n = nb * 2;
        g.ndim = 1;
        g.shape[0] = p->n;
    }
    char label[96];
    if (!rc) {
        if (p->checked)
            snprintf(label, sizeof label, "bitsandbytes %s, block %llu%s",
                     p->kind == BNB_FP4 ? "FP4" : "NF4", (unsigned long long)p->block,
                     nested ? ", double quant" : "");
        else
            snprintf(label, sizeof label, "bitsandbytes %s%s", p->kind == BNB_FP4 ? "FP4" : "NF4",
                     nested ? ", double quant" : "");
        p->name = quant_join(w->name, strlen(w->name), "");
        p->label = quant_join(label, strlen(label), "");
        if (!p->name || !p->label) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (rc) {
        bnb_plan_free(p);
        return rc;
    }
    if (p->n == 0) { /* nothing to dequantize: the weight's shape is empty */
        g.row_elems = 1;
    }
    const uint8_t roles[5] = {AMN_ROLE_WEIGHT, AMN_ROLE_SCALE, AMN_ROLE_AUX, AMN_ROLE_SCALE,
                              AMN_ROLE_AUX};
    for (int k = 0; k < (nested ? 5 : 3); k++) {
        g.members[g.n_members] = idx[k];
        g.roles[g.n_members++] = roles[k];
    }
    g.members[g.n_members] = bi;
    g.roles[g.n_members++] = AMN_ROLE_AUX;
    return finish_claim(cs, p, &g, err);
}

/* An INT8 weight from its SCB tensor si; plen: length of "<p>". */
static int claim_int8(const amn_model *m, amn_claimset *cs, const quant_config *qc, size_t si,
                      size_t plen, amn_error *err) {
    const amn_tensor *s = amn_model_tensor(m, si);
    int rc = AMN_OK;
    const int64_t wi = companion(m, s->name, plen, ".weight", &rc, err);
    const int64_t fi = rc ? -1 : companion(m, s->name, plen, ".weight_format", &rc, err);
    if (rc) return rc;
    if (wi < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: its weight %.*s.weight is missing", s->name,
                             (int)plen, s->name);
    if (amn_claimset_is_claimed(cs, (size_t)wi) ||
        (fi >= 0 && amn_claimset_is_claimed(cs, (size_t)fi)))
        return amn_error_set(err, AMN_E_PARSE, "%s: its weight already belongs to another scheme",
                             s->name);
    const amn_tensor *w = amn_model_tensor(m, (size_t)wi);
    char sb[96];
    if (w->dtype != AMN_DTYPE_I8 || w->ndim != 2)
        return amn_error_set(err, AMN_E_PARSE, "%s: an LLM.int8 weight must be 2-D I8, found %s %s",
                             w->name, amn_dtype_name(w->dtype), quant_shape(w, sb, sizeof sb));
    if ((rc = quant_check_bytes(w, err))) return rc;
    if ((rc = check_dtype_count(s, AMN_DTYPE_F32, w->shape[0], "SCB (one per row)", err)))
        return rc;
    if ((rc = config_conflict(qc, false, "int8", false, w->name, err))) return rc;
    if (fi >= 0) {
        const amn_tensor *f = amn_model_tensor(m, (size_t)fi);
        if ((rc = check_dtype_count(f, AMN_DTYPE_U8, 1, "weight_format", err))) return rc;
        uint8_t v = 0;
        if (f->data && (rc = amn_tensor_read(f, 0, &v, 1, err))) return rc;
        if (v != 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "%s: weight_format %u (a GPU tile layout) is not supported; only "
                                 "0 (row-major) is",
                                 f->name, v);
    }
    bnb_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->kind = BNB_INT8;
    p->weight = (size_t)wi;
    p->scb = si;
    p->rows = w->shape[0];
    p->cols = w->shape[1];
    p->n = p->rows * p->cols;
    const uint8_t *unused, *sbytes;
    if (w->data && s->data) {
        rc = quant_tensor_bytes(w, &p->own[0], &unused, err);
        if (!rc) rc = quant_tensor_bytes(s, &p->own[1], &sbytes, err);
        if (!rc) rc = check_finite(s, sbytes, p->rows, err);
        p->checked = !rc;
    }
    p->name = quant_join(w->name, strlen(w->name), "");
    p->label = quant_join("bitsandbytes LLM.int8, row-wise", 31, "");
    if (!rc && (!p->name || !p->label)) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (rc) {
        bnb_plan_free(p);
        return rc;
    }
    amn_group_spec g = {
        .struct_size = sizeof(amn_group_spec), .ndim = 2, .row_elems = p->cols ? p->cols : 1};
    g.shape[0] = p->rows;
    g.shape[1] = p->cols;
    g.members[0] = (size_t)wi;
    g.roles[0] = AMN_ROLE_WEIGHT;
    g.members[1] = si;
    g.roles[1] = AMN_ROLE_SCALE;
    g.n_members = 2;
    if (fi >= 0) {
        g.members[2] = (size_t)fi;
        g.roles[2] = AMN_ROLE_AUX;
        g.n_members = 3;
    }
    return finish_claim(cs, p, &g, err);
}

static const char *const orphan_suffixes[] = {".weight.absmax", ".weight.quant_map",
                                              ".weight.nested_absmax", ".weight.nested_quant_map",
                                              ".weight_format"};

int bnb_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    quant_config qc;
    bool loaded = false;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        const char *kind = NULL;
        if (quant_suffix(t->name, ".weight.quant_state.bitsandbytes__nf4", &plen))
            kind = "nf4";
        else if (quant_suffix(t->name, ".weight.quant_state.bitsandbytes__fp4", &plen))
            kind = "fp4";
        else if (!quant_suffix(t->name, ".SCB", &plen))
            continue;
        if (amn_claimset_is_claimed(cs, i)) continue;
        if (!loaded) {
            quant_config_load(m, &qc);
            loaded = true;
        }
        int rc = kind ? claim_4bit(m, cs, &qc, i, plen + strlen(".weight"), kind, err)
                      : claim_int8(m, cs, &qc, i, plen, err);
        if (rc) return rc;
    }
    /* A companion nothing claimed is a broken file, not a tensor to copy. */
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (amn_claimset_is_claimed(cs, i)) continue;
        for (size_t k = 0; k < sizeof orphan_suffixes / sizeof *orphan_suffixes; k++)
            if (quant_suffix(t->name, orphan_suffixes[k], &plen))
                return amn_error_set(err, AMN_E_PARSE,
                                     "%s: a bitsandbytes companion without its %s", t->name,
                                     k == 4 ? "SCB" : "quant_state");
    }
    return AMN_OK;
}
