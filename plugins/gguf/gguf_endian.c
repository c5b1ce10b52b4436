/* Byte-order tables of the GGUF block types (gguf_convert_endian.py). */
#include "gguf_endian.h"

#include "gguf_types.h"

void gguf_swap_elems(void *p, size_t n, size_t es) {
    uint8_t *b = p;
    if (es < 2) return;
    for (size_t i = 0; i < n; i++, b += es)
        for (size_t x = 0, y = es - 1; x < y; x++, y--) {
            const uint8_t t = b[x];
            b[x] = b[y];
            b[y] = t;
        }
}

/* Offsets of the fp16 fields inside one block; n_fields = -1: no layout. */
typedef struct swap_layout {
    int n_fields;
    uint16_t at[2];
} swap_layout;

static swap_layout layout_of(uint32_t type) {
    switch (type) {
    case GGUF_TYPE_Q1_0: /* d, then the bits */
    case GGUF_TYPE_Q4_0: /* d, then the nibbles */
    case GGUF_TYPE_Q8_0: /* d, then the int8 values */
        return (swap_layout){1, {0, 0}};
    case GGUF_TYPE_Q4_K: /* d, dmin, scales, nibbles */
        return (swap_layout){2, {0, 2}};
    case GGUF_TYPE_Q6_K: /* ql, qh, scales, then d at 208 */
        return (swap_layout){1, {208, 0}};
    case GGUF_TYPE_TQ2_0: /* qs, then d at 64 */
        return (swap_layout){1, {64, 0}};
    case GGUF_TYPE_MXFP4: /* e8m0 scale and nibbles: bytes only */
    case GGUF_TYPE_NVFP4:
        return (swap_layout){0, {0, 0}};
    default:
        return (swap_layout){-1, {0, 0}};
    }
}

bool gguf_endian_defined(uint32_t type) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    if (!tr || tr->kind == GGUF_KIND_RETIRED) return false;
    return tr->kind == GGUF_KIND_PLAIN || layout_of(type).n_fields >= 0;
}

bool gguf_endian_block_swaps(uint32_t type) {
    return layout_of(type).n_fields > 0;
}

void gguf_endian_swap_blocks(uint32_t type, uint8_t *p, size_t n) {
    const gguf_type_traits *tr = gguf_type_traits_get(type);
    const swap_layout l = layout_of(type);
    if (!tr || l.n_fields <= 0) return;
    for (size_t off = 0; off + tr->block_bytes <= n; off += tr->block_bytes)
        for (int f = 0; f < l.n_fields; f++) {
            uint8_t *q = p + off + l.at[f];
            const uint8_t t = q[0];
            q[0] = q[1];
            q[1] = t;
        }
}
