/* What nvfp4's detect() hands to dequantize() for one weight. */
#ifndef AMN_NVFP4_PLAN_H
#define AMN_NVFP4_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"

typedef struct nvfp4_plan {
    size_t weight, scale, second; /* tensor indices */
    uint64_t rows, in, experts;   /* weight [experts?][rows / experts][in / 2] */
    bool divide, neg_zero;        /* compressed-tensors rather than ModelOpt */
    bool bmm;                     /* fused experts [E][in / 2][outs] (Llama4, gpt-oss export) */
    uint64_t bmm_in, bmm_outs;    /* with bmm: output [experts][bmm_in][bmm_outs] */
    float *seconds;               /* second-level scales; NULL header-only */
    uint64_t n_seconds;           /* 1, or one per expert */
    uint8_t *own[2];              /* plain copies of strided weight, scale, or NULL */
    char *name;
    char *label;
} nvfp4_plan;

void nvfp4_plan_free(void *plan);
int nvfp4_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
