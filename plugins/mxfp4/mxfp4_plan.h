/* What mxfp4's detect() hands to dequantize() for one expert tensor. */
#ifndef AMN_MXFP4_PLAN_H
#define AMN_MXFP4_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"

typedef struct mxfp4_plan {
    size_t blocks, scales;           /* tensor indices */
    uint64_t experts, rows, groups;  /* blocks [experts][rows][groups][16] */
    uint8_t *own[2];                 /* plain copies of strided inputs, or NULL */
    struct mxfp4_scale_cache *cache; /* see mxfp4_scales.c; NULL reads in place */
    char *name;                      /* "<stem>": the _blocks suffix removed */
    char *label;
} mxfp4_plan;

void mxfp4_plan_free(void *plan);
int mxfp4_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
