/* What bnb's detect() hands to dequantize() for one weight. */
#ifndef AMN_BNB_PLAN_H
#define AMN_BNB_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/scheme.h"
#include "bnb_kernels.h"

typedef struct bnb_plan {
    bnb_kind kind;
    bool nested;
    bool checked; /* detect() saw the data; else (inspect) dequantize refuses */
    size_t weight, absmax, nested_absmax, scb; /* tensor indices */
    uint64_t rows, cols;                       /* output [rows][cols] */
    uint64_t n, block, nested_block;
    float nested_offset;
    float codebook[16];
    float nested_map[256];
    uint8_t *own[3]; /* plain copies of strided weight, absmax / SCB, nested_absmax */
    char *name;      /* "<prefix>.weight" */
    char *label;     /* "bitsandbytes NF4, block 64, double quant" */
} bnb_plan;

void bnb_plan_free(void *plan);
int bnb_detect(const amn_model *m, amn_claimset *cs, amn_error *err);

#endif
