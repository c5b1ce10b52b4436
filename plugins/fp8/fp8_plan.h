/* What fp8's detect() hands to dequantize() for one weight. */
#ifndef AMN_FP8_PLAN_H
#define AMN_FP8_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"

typedef struct fp8_plan {
    size_t weight, scale; /* tensor indices; scale valid when has_scale */
    bool has_scale;
    amn_dtype wtype, stype;
    /* compressed-tensors multiplies in the scale's dtype (x_q.to(scale.dtype)
     * * scale), so a BF16 or F16 product is rounded to it before it becomes
     * the output; AMN_DTYPE_INVALID (0) when the product is the output. */
    amn_dtype round_to;
    uint64_t rows, cols; /* the output as [rows][cols] */
    uint64_t block_rows, block_cols, grid_cols;
    uint8_t *own_weight, *own_scale; /* plain copies of strided inputs, or NULL */
    char *name;                      /* output tensor: the weight's own name */
    char *label;                     /* "Fine-grained FP8 (E4M3), 128x128 blocks" */
} fp8_plan;

void fp8_plan_free(void *plan);
int fp8_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
