/* amn/scheme.h — the quant-scheme vtable a kernel-family plugin registers.
 *
 * detect() looks at a whole model and claims groups of tensors that together
 * form one quantized weight (a GPTQ qweight with its scales, zeros and g_idx;
 * an FP8 weight with its scale; a GGUF block tensor alone). Each claimed group
 * becomes one output tensor. dequantize() then fills any range of that
 * tensor's rows, so the core can stream and thread the work.
 */
#ifndef AMN_SCHEME_H
#define AMN_SCHEME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amn_claimset amn_claimset;

typedef enum amn_role {
    AMN_ROLE_WEIGHT = 1,  /* the packed / low-precision values */
    AMN_ROLE_SCALE,       /* scale factors */
    AMN_ROLE_ZERO,        /* zero points */
    AMN_ROLE_GROUP_INDEX, /* g_idx */
    AMN_ROLE_AUX,         /* codebooks, nested scales, quant_state blobs */
    AMN_ROLE_ACT_SCALE,   /* activation scales: metadata, dropped from outputs */
} amn_role;

#define AMN_GROUP_MAX_MEMBERS 8

/* struct_size first (sizeof(amn_group_spec) as the plugin was built): the
 * claimset reads only the fields it covers, later ones zero, so ABI minors
 * may append fields. */
typedef struct amn_group_spec {
    uint32_t struct_size;
    /* Output tensor name; NULL when the members are only dropped (an
     * input_scale with no weight to dequantize). */
    const char *out_name;
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    /* Elements per row for dequantize(); divides product(shape). */
    uint64_t row_elems;
    size_t n_members;
    size_t members[AMN_GROUP_MAX_MEMBERS]; /* tensor indices in the model */
    uint8_t roles[AMN_GROUP_MAX_MEMBERS];  /* amn_role of each member */
    const char *label;                     /* "GPTQ 4-bit, group 128, act-order" */
    void *plan;                            /* scheme-private */
    void (*plan_free)(void *plan);         /* may be NULL */
} amn_group_spec;

/* True when another group already claimed tensor i. */
AMN_API bool amn_claimset_is_claimed(const amn_claimset *cs, size_t tensor_index);
/* Add a group. The claimset copies the spec (the fields g->struct_size
 * covers) and owns `plan` from here on, also when this fails (a member out
 * of range or already claimed: AMN_E_PARSE; a struct_size below ABI 2.0's:
 * AMN_E_INVALID). */
AMN_API int amn_claimset_add(amn_claimset *cs, const amn_group_spec *g, amn_error *err);

typedef struct amn_scheme {
    uint32_t struct_size;
    const char *name;        /* "fp8", "gptq", "awq", "gguf" */
    const char *description; /* "FP8 E4M3/E5M2 with per-tensor, per-channel or block scales" */
    /* Claim the groups of m this scheme understands. detect() also runs on
     * header-only models (amn_inspect: every tensor's data is NULL); then it
     * decides from names, dtypes, shapes and metadata alone and must not
     * dereference data. A malformed companion is
     * AMN_E_PARSE naming the tensor; recognised but unhandled layouts are
     * AMN_E_UNSUPPORTED. Must not claim what amn_claimset_is_claimed reports. */
    int (*detect)(const amn_model *m, amn_claimset *cs, amn_error *err);
    /* Write rows [row0, row0 + nrows) of a group's output, row-major, as `out`
     * (F32, F16 or BF16) into dst. Reentrant: called from several threads on
     * disjoint row ranges. Results must not depend on the range split. */
    int (*dequantize)(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err);
    /* Optional (NULL: the scheme only decodes): its encoder. 2.0 was settled
     * with the streaming encoder in this slot (the earlier, unused whole-
     * tensor `quantize` slot never shipped in a release). */
    const struct amn_encoder *encoder;
} amn_scheme;

#ifdef __cplusplus
}
#endif
#endif
