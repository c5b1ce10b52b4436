/* What ctensors' detect() hands to dequantize() for one weight. */
#ifndef AMN_CT_PLAN_H
#define AMN_CT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"
#include "ct_kernels.h"

typedef struct ct_plan {
    size_t weight, scale, zero; /* tensor indices; zero valid unless zkind is NONE */
    ct_layout l;                /* pointers filled in per dequantize call */
    uint64_t weight_bytes, scale_bytes, zero_bytes;
    bool checked;    /* detect() saw the data (weight_shape, g_idx); else dequantize refuses */
    bool block;      /* block strategy: l.block_rows x l.group_size blocks */
    int32_t *gidx;   /* act-order groups, or NULL */
    uint8_t *own[3]; /* plain copies of strided weight, scale, zero, or NULL */
    char *name;
    char *label;
} ct_plan;

void ct_plan_free(void *plan);
int ct_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
