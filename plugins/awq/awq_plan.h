/* What awq's detect() hands to dequantize() for one layer. */
#ifndef AMN_AWQ_PLAN_H
#define AMN_AWQ_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"

typedef struct awq_plan {
    size_t qweight, scales, qzeros; /* tensor indices */
    uint64_t in, out, groups, group_size;
    amn_dtype stype;
    bool checked;    /* detect() saw the data */
    uint8_t *own[3]; /* plain copies of strided qweight, scales, qzeros, or NULL */
    char *name;      /* "<prefix>.weight" */
    char *label;     /* "AWQ 4-bit GEMM, group 128" */
} awq_plan;

void awq_plan_free(void *plan);
int awq_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
