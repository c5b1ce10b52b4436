/* Private to core: the plan shared by plan.c and convert.c. */
#ifndef AMN_PLAN_INTERNAL_H
#define AMN_PLAN_INTERNAL_H

#include "amn/convert.h"
#include "amn/scheme.h"
#include "known_internal.h"

typedef struct group {
    amn_group_spec spec; /* out_name and label are owned copies */
    const amn_scheme *scheme;
} group;

struct amn_claimset {
    const amn_model *model;
    const amn_scheme *current; /* the scheme whose detect() is running */
    size_t n_tensors;
    uint8_t *role;  /* per tensor: 0 = passthrough, else amn_role */
    int64_t *owner; /* per tensor: group index or -1 */
    group *groups;
    size_t n_groups, cap_groups;
};

struct amn_plan {
    struct amn_claimset cs;
    const amn_ctx *ctx;
    amni_quant_decl decl;      /* what the model's settings files declare */
    amni_unhandled *unhandled; /* per tensor: why it looks quantized though no
                                  scheme claimed it; .what NULL otherwise */
};

/* AMN_E_UNSUPPORTED naming the tensors that look quantized but that no
 * loaded scheme claimed; conversions refuse to copy them as they are. */
int amni_plan_check_unclaimed(const amn_plan *p, const amn_model *m, amn_error *err);

#endif
