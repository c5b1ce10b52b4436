/* Finding gpt-oss MXFP4 expert tensors: "<stem>_blocks" U8 [E, R, G, 16]
 * with "<stem>_scales" U8 [E, R, G] (transformers' Mxfp4GptOssExperts:
 * gate_up_proj and down_proj). The output is "<stem>" [E, 32 G, R], as
 * transformers' dequantizing loader leaves it; biases, the router, the
 * attention sinks and the norms are not ours and pass through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/kit/quant_common.h"
#include "mxfp4_kernels.h"
#include "mxfp4_plan.h"

void mxfp4_plan_free(void *plan) {
    mxfp4_plan *p = plan;
    if (!p) return;
    mxfp4_scale_cache_free(p->cache);
    free(p->own[0]);
    free(p->own[1]);
    free(p->name);
    free(p->label);
    free(p);
}

static int check_pair(const amn_tensor *b, const amn_tensor *s, amn_error *err) {
    char b1[96], b2[96];
    if (b->ndim != 4 || b->shape[3] != 16 || b->shape[0] == 0 || b->shape[1] == 0 ||
        b->shape[2] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected MXFP4 blocks U8 [experts, rows, groups, 16], found %s",
                             b->name, quant_shape(b, b1, sizeof b1));
    if (s->dtype != AMN_DTYPE_U8 || s->ndim != 3 || s->shape[0] != b->shape[0] ||
        s->shape[1] != b->shape[1] || s->shape[2] != b->shape[2])
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: expected U8 [%llu, %llu, %llu] (one E8M0 scale per 32 values of "
                             "%s %s), found %s %s",
                             s->name, (unsigned long long)b->shape[0],
                             (unsigned long long)b->shape[1], (unsigned long long)b->shape[2],
                             b->name, quant_shape(b, b2, sizeof b2), amn_dtype_name(s->dtype),
                             quant_shape(s, b1, sizeof b1));
    int rc = quant_check_bytes(b, err);
    if (!rc) rc = quant_check_bytes(s, err);
    uint64_t k;
    if (!rc && !amn_mul_u64(b->shape[2], 32, &k))
        rc = amn_error_set(err, AMN_E_PARSE, "%s: too many groups", b->name);
    return rc;
}

static int claim(const amn_model *m, amn_claimset *cs, size_t bi, size_t plen, amn_error *err) {
    const amn_tensor *b = amn_model_tensor(m, bi);
    int rc = AMN_OK;
    const int64_t si = quant_find_companion(m, b->name, plen, "_scales", &rc, err);
    if (rc) return rc;
    if (si < 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: MXFP4 blocks without their %.*s_scales",
                             b->name, (int)plen, b->name);
    const amn_tensor *s = amn_model_tensor(m, (size_t)si);
    if ((rc = check_pair(b, s, err))) return rc;
    if (amn_claimset_is_claimed(cs, (size_t)si))
        return amn_error_set(err, AMN_E_PARSE, "%s: already claimed by another weight", s->name);

    mxfp4_plan *p = calloc(1, sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    p->blocks = bi;
    p->scales = (size_t)si;
    p->experts = b->shape[0];
    p->rows = b->shape[1];
    p->groups = b->shape[2];
    p->cache = mxfp4_scale_cache_new(p->experts, p->rows, p->groups); /* NULL is fine */
    const uint8_t *unused;
    rc = quant_tensor_bytes(b, &p->own[0], &unused, err);
    if (!rc) rc = quant_tensor_bytes(s, &p->own[1], &unused, err);
    char label[96];
    snprintf(label, sizeof label, "MXFP4 (gpt-oss), E2M1 with E8M0 scales per 32%s",
             p->experts > 1 ? ", MoE experts" : "");
    if (!rc) {
        p->name = quant_join(b->name, plen, "");
        p->label = strdup(label);
        if (!p->name || !p->label) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (!rc && amn_model_find(m, p->name) >= 0)
        rc = amn_error_set(err, AMN_E_PARSE,
                           "%s: %s already exists, so the dequantized weight would have two "
                           "tensors",
                           b->name, p->name);
    if (rc) {
        mxfp4_plan_free(p);
        return rc;
    }
    amn_group_spec g = {.struct_size = sizeof(amn_group_spec),
                        .out_name = p->name,
                        .ndim = 3,
                        .shape = {p->experts, p->groups * 32, p->rows},
                        .row_elems = p->rows,
                        .label = p->label,
                        .plan = p,
                        .plan_free = mxfp4_plan_free,
                        /* A group's 32 output rows share every input line
                         * the kernel reads; a slice that splits a group
                         * reads those lines twice (chunks of 91 rows ran
                         * at 0.85x chunks of 64 on a Skylake-SP). */
                        .row_quantum = 32};
    g.members[g.n_members] = bi;
    g.roles[g.n_members++] = AMN_ROLE_WEIGHT;
    g.members[g.n_members] = (size_t)si;
    g.roles[g.n_members++] = AMN_ROLE_SCALE;
    return amn_claimset_add(cs, &g, err);
}

int mxfp4_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    size_t claimed = 0;
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (t->dtype != AMN_DTYPE_U8 || !quant_suffix(t->name, "_blocks", &plen) ||
            amn_claimset_is_claimed(cs, i))
            continue;
        int rc = claim(m, cs, i, plen, err);
        if (rc) return rc;
        claimed++;
    }
    if (!claimed) return AMN_OK;
    /* In an MXFP4 model, scales without their blocks mean a broken file. */
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        size_t plen;
        if (t->dtype != AMN_DTYPE_U8 || amn_claimset_is_claimed(cs, i) ||
            !quant_suffix(t->name, "_scales", &plen))
            continue;
        return amn_error_set(err, AMN_E_PARSE, "%s: MXFP4 scales without their %.*s_blocks",
                             t->name, (int)plen, t->name);
    }
    return AMN_OK;
}
