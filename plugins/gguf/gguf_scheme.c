/* The "gguf" scheme: claims each block-quantized tensor as a group of its own
 * and dequantizes any range of its rows. A row is the innermost dimension
 * (GGUF ne[0]), always a whole number of blocks, so a row range maps to a
 * contiguous run of blocks; very long rows are handed to the core in equal
 * runs of blocks instead (unit_elems). */
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/scheme.h"
#include "gguf_dequant.h"
#include "gguf_endian.h"
#include "gguf_scheme.h"
#include "gguf_encode.h"
#include "gguf_types.h"

typedef struct gguf_plan {
    size_t tensor;  /* index in the model */
    uint32_t type;  /* ggml type id */
    uint64_t nrows; /* product of the outer dimensions */
    uint64_t row_elems;
    uint64_t row_bytes;
} gguf_plan;

/* Check one block tensor and describe it as a group; the plan is malloc'ed. */
/* The units dequantize() works in: rows, or for rows longer than
 * UNIT_ELEMS_MAX equal runs of whole blocks that divide them. The core holds
 * at least one unit per buffer, so a legal tensor with one huge row (a 1-D
 * tensor of a billion elements) would otherwise size its buffers by the
 * model; the bytes are the same, as blocks follow one another across rows. */
#define UNIT_ELEMS_MAX (1u << 16)
static uint64_t unit_elems(uint64_t row_elems, uint32_t block_elems) {
    if (row_elems <= UNIT_ELEMS_MAX) return row_elems;
    const uint64_t blocks = row_elems / block_elems;
    for (uint64_t d = UNIT_ELEMS_MAX / block_elems; d > 1; d--)
        if (blocks % d == 0) return d * block_elems;
    return block_elems;
}

static int plan_tensor(const amn_tensor *t, size_t index, amn_group_spec *g, amn_error *err) {
    const char *name = t->name ? t->name : "(unnamed)";
    const gguf_type_traits *tr = gguf_type_traits_get(t->encoding);
    if (!tr)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "tensor %s: unknown GGUF type id %u", name,
                             t->encoding);
    if (tr->kind == GGUF_KIND_RETIRED)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "tensor %s: GGUF type %s (%u) is retired and no longer supported",
                             name, tr->name, tr->id);
    if (!gguf_type_can_dequantize(tr))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "tensor %s: GGUF type %s (%u) has no dequantizer", name, tr->name,
                             tr->id);
    if (t->ndim == 0 || t->ndim > AMN_MAX_DIMS)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: %s tensor with %u dimensions", name,
                             tr->name, t->ndim);
    uint64_t numel, nbytes;
    if (!amn_tensor_numel(t, &numel))
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: element count overflows", name);
    const uint64_t row_elems = t->shape[t->ndim - 1];
    if (row_elems % tr->block_elems != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s: row of %llu elements is not a multiple of the %s "
                             "block size %u",
                             name, (unsigned long long)row_elems, tr->name, tr->block_elems);
    if (!gguf_type_nbytes(tr, numel, &nbytes) || nbytes != t->nbytes)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: %llu bytes do not hold %llu %s elements",
                             name, (unsigned long long)t->nbytes, (unsigned long long)numel,
                             tr->name);
    if (t->data && t->extent < nbytes)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: data truncated (%llu of %llu bytes)",
                             name, (unsigned long long)t->extent, (unsigned long long)nbytes);

    const uint64_t unit = unit_elems(row_elems, tr->block_elems);
    gguf_plan *p = malloc(sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "tensor %s: out of memory", name);
    p->tensor = index;
    p->type = tr->id;
    /* An empty tensor (a zero dimension) has no rows; a row length of 1 keeps
     * row_elems a divisor of the element count for the core. */
    p->row_elems = unit ? unit : 1;
    p->nrows = numel / p->row_elems;
    p->row_bytes = unit / tr->block_elems * tr->block_bytes;

    *g = (amn_group_spec){
        .struct_size = sizeof *g,
        .out_name = t->name,
        .ndim = t->ndim,
        .row_elems = p->row_elems,
        .n_members = 1,
        .members = {index},
        .roles = {AMN_ROLE_WEIGHT},
        .label = tr->label,
        .plan = p,
        .plan_free = free,
    };
    for (uint32_t i = 0; i < t->ndim; i++) g->shape[i] = t->shape[i];
    return AMN_OK;
}

static int gguf_detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const size_t n = amn_model_tensor_count(m);
    for (size_t i = 0; i < n; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        if (!t || t->dtype != AMN_DTYPE_BLOCK || amn_claimset_is_claimed(cs, i)) continue;
        amn_group_spec g;
        int rc = plan_tensor(t, i, &g, err);
        /* A type without a kernel (retired, unknown) stays unclaimed: inspect
         * still describes the file, and conversion refuses it by name. */
        if (rc == AMN_E_UNSUPPORTED) continue;
        if (rc == AMN_OK) rc = amn_claimset_add(cs, &g, err); /* owns g.plan from here */
        if (rc != AMN_OK) return rc;
    }
    return AMN_OK;
}

/* Bytes of blocks swapped per step of a big-endian tensor: whole blocks
 * copied out of the fetched range (which may be the read-only mapping),
 * swapped to the kernels' little-endian layout, then decoded. */
#define SWAP_STEP 16384u

static int dequantize_big_endian(uint32_t type, const uint8_t *src, uint64_t n_elems, amn_dtype out,
                                 void *dst) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    const size_t per = SWAP_STEP / tr->block_bytes, osize = amn_dtype_size(out);
    uint8_t piece[SWAP_STEP];
    uint8_t *d = dst;
    for (uint64_t left = n_elems / tr->block_elems; left;) {
        const size_t nb = left < per ? (size_t)left : per, bytes = nb * tr->block_bytes;
        memcpy(piece, src, bytes);
        gguf_endian_swap_blocks(type, piece, bytes);
        int rc = gguf_dequantize(type, piece, (uint64_t)nb * tr->block_elems, out, d);
        if (rc) return rc;
        src += bytes;
        d += (size_t)nb * tr->block_elems * osize;
        left -= nb;
    }
    return AMN_OK;
}

static int gguf_dequantize_rows(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                                amn_dtype out, void *dst, amn_error *err) {
    const gguf_plan *p = plan;
    const amn_tensor *t = p ? amn_model_tensor(m, p->tensor) : NULL;
    if (!t) return amn_error_set(err, AMN_E_INVALID, "gguf: no tensor for this plan");
    uint64_t end, off, n_elems;
    if (!amn_add_u64(row0, nrows, &end) || end > p->nrows)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: rows [%llu, +%llu) out of range",
                             t->name, (unsigned long long)row0, (unsigned long long)nrows);
    if (!t->data)
        return amn_error_set(err, AMN_E_INVALID, "tensor %s: no data (header only)", t->name);
    const bool big_endian = (t->flags & AMN_TENSOR_BIG_ENDIAN) != 0;
    if (big_endian && !gguf_endian_defined(p->type))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s: GGUF type %s has no big-endian layout "
                             "(gguf_convert_endian.py does not convert it)",
                             t->name, gguf_type_traits_get(p->type)->name);
    if (nrows == 0) return AMN_OK;
    /* In range by the checks of detect: end * row_bytes <= nbytes <= extent. */
    off = row0 * p->row_bytes;
    n_elems = nrows * p->row_elems;
    /* Read the way the core finds cheapest for the input (pread into this
     * thread's buffer, or the mapping itself). */
    const void *src =
        amn_model_fetch(m, (const uint8_t *)t->data + off, (size_t)(nrows * p->row_bytes), 0, err);
    if (!src) return err ? err->code : AMN_E_IO;
    int rc = big_endian && gguf_endian_block_swaps(p->type)
                 ? dequantize_big_endian(p->type, src, n_elems, out, dst)
                 : gguf_dequantize(p->type, src, n_elems, out, dst);
    if (rc == AMN_E_INVALID)
        return amn_error_set(err, rc, "tensor %s: cannot dequantize to %s", t->name,
                             amn_dtype_name(out));
    if (rc != AMN_OK)
        return amn_error_set(err, rc, "tensor %s: no dequantizer for GGUF type %u", t->name,
                             p->type);
    return AMN_OK;
}

/* detect() looks only at block tensors. */
static const amn_detect_key gguf_keys[] = {{"", 1ull << AMN_DTYPE_BLOCK}, {NULL, 0}};

const amn_scheme gguf_block_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "gguf",
    .description =
        "GGUF / ggml block quantization (Q4_0 ... Q6_K, IQ1-IQ4, TQ1/TQ2, MXFP4, Q1_0/Q2_0)",
    .detect = gguf_detect,
    .dequantize = gguf_dequantize_rows,
    .encoder = &gguf_encoder,
    .detect_keys = gguf_keys,
};
