/* What gptq's detect() hands to dequantize() for one layer. */
#ifndef AMN_GPTQ_PLAN_H
#define AMN_GPTQ_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"

typedef struct gptq_plan {
    size_t qweight, scales, qzeros; /* tensor indices */
    unsigned bits;
    uint64_t in, out, groups, group_size;
    amn_dtype stype;
    bool zeros_v1;
    bool checked;    /* detect() saw the data (g_idx validated); else dequantize refuses */
    int32_t *gidx;   /* validated group of each input, or NULL when sequential */
    uint8_t *own[3]; /* plain copies of strided qweight, scales, qzeros, or NULL */
    char *name;      /* "<prefix>.weight" */
    char *label;     /* "GPTQ 4-bit, group 128, act-order" */
} gptq_plan;

void gptq_plan_free(void *plan);
int gptq_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
