/* A GGUF file exercising every metadata type and a spread of tensor types,
 * built with gguf_build.h, plus what a reader must find in it. Shared by the
 * container and malformed-corpus suites. */
#ifndef GGUF_RICH_H
#define GGUF_RICH_H

#include "gguf_build.h"

typedef struct rich_tensor {
    const char *name;
    uint32_t type; /* ggml type */
    uint32_t ndim;
    uint64_t ne[4];
    uint64_t nbytes;
    bool block;
    const char *encoding_name; /* block types */
} rich_tensor;

static const rich_tensor rich_tensors[] = {
    {"token_embd.weight", 0, 2, {4, 3}, 48, false, NULL},
    {"output_norm.weight", 1, 1, {8}, 16, false, NULL},
    {"blk.0.attn_q.weight", 8, 2, {64, 2}, 136, true, "Q8_0"},
    {"blk.0.ffn_down.weight", 12, 3, {256, 1, 1}, 144, true, "Q4_K"},
    {"bf16.4d", 30, 4, {2, 2, 2, 2}, 32, false, NULL},
    {"scalar.i32", 26, 0, {0}, 4, false, NULL},
    {"ints.i8", 24, 1, {5}, 5, false, NULL},
    {"ints.i16", 25, 1, {3}, 6, false, NULL},
    {"ints.i64", 27, 1, {2}, 16, false, NULL},
    {"floats.f64", 28, 1, {2}, 16, false, NULL},
    {"empty.f32", 0, 2, {0, 4}, 0, false, NULL},
};
#define RICH_N_TENSORS (sizeof rich_tensors / sizeof *rich_tensors)
#define RICH_N_PLAIN   9 /* rich_tensors without the two block types */

static inline uint8_t rich_byte(size_t tensor, uint64_t i) {
    return (uint8_t)(i * 7 + tensor * 31 + 1);
}

/* Number of key/values build_rich writes. */
static inline uint64_t rich_n_kv(uint32_t align) {
    return 21 + (align != 32);
}

/* Offsets (relative to the data section) of the tensors of a file built by
 * build_rich, and the data section start. */
typedef struct rich_layout {
    uint64_t offset[RICH_N_TENSORS];
    uint64_t data_start;
    uint64_t header_end; /* end of the tensor infos */
    size_t n_tensors;
} rich_layout;

/* Version 1-3; `blocks` includes the two block-quantized tensors; align is
 * general.alignment (32 = omitted). Canonical layout: tensors back to back,
 * each padded to the alignment, the file padded at the end. */
static inline void build_rich(gb *b, uint32_t version, uint32_t align, bool blocks,
                              rich_layout *lay) {
    size_t nt = 0;
    for (size_t i = 0; i < RICH_N_TENSORS; i++)
        if (blocks || !rich_tensors[i].block) nt++;
    gb_header(b, version, nt, rich_n_kv(align));
    gb_kv_str(b, "general.architecture", "llama");
    if (align != 32) gb_kv_u32(b, "general.alignment", align);
    gb_key(b, "k.u8", T_U8);
    gb_u8(b, 200);
    gb_key(b, "k.i8", T_I8);
    gb_u8(b, (uint8_t)-5);
    gb_key(b, "k.u16", T_U16);
    gb_u16(b, 60000);
    gb_key(b, "k.i16", T_I16);
    gb_u16(b, (uint16_t)-300);
    gb_kv_u32(b, "k.u32", 4000000000u);
    gb_key(b, "k.i32", T_I32);
    gb_u32(b, (uint32_t)-70000);
    gb_key(b, "k.f32", T_F32);
    gb_u32(b, 0x3fc00000u); /* 1.5f */
    gb_key(b, "k.bool", T_BOOL);
    gb_u8(b, 1);
    gb_key(b, "k.str", T_STR);
    gb_strn(b, "h\xc3\xa9llo\0x", 8); /* UTF-8 and an embedded NUL */
    gb_key(b, "k.u64", T_U64);
    gb_u64(b, (1ull << 40) + 3);
    gb_key(b, "k.i64", T_I64);
    gb_u64(b, 0 - (1ull << 40)); /* -(2^40) */
    gb_key(b, "k.f64", T_F64);
    gb_u64(b, 0xc002000000000000ull); /* -2.25 */
    gb_key(b, "k.arr.u8", T_ARR);
    gb_arr(b, T_U8, 3);
    gb_u8(b, 1), gb_u8(b, 2), gb_u8(b, 3);
    gb_key(b, "k.arr.i32", T_ARR);
    gb_arr(b, T_I32, 2);
    gb_u32(b, (uint32_t)-1), gb_u32(b, 2);
    gb_key(b, "k.arr.str", T_ARR);
    gb_arr(b, T_STR, 3);
    gb_str(b, "a"), gb_str(b, ""), gb_str(b, "ccc");
    gb_key(b, "k.arr.f64", T_ARR);
    gb_arr(b, T_F64, 1);
    gb_u64(b, 0x3ff0000000000000ull); /* 1.0 */
    gb_key(b, "k.arr.bool", T_ARR);
    gb_arr(b, T_BOOL, 2);
    gb_u8(b, 0), gb_u8(b, 1);
    /* [[1u32, 2u32], ["x"], [[]u8]] */
    gb_key(b, "k.arr.nested", T_ARR);
    gb_arr(b, T_ARR, 3);
    gb_arr(b, T_U32, 2);
    gb_u32(b, 1), gb_u32(b, 2);
    gb_arr(b, T_STR, 1);
    gb_str(b, "x");
    gb_arr(b, T_ARR, 1);
    gb_arr(b, T_U8, 0);
    gb_key(b, "k.arr.empty", T_ARR);
    gb_arr(b, T_I16, 0);
    gb_kv_str(b, "general.name", "rich");
    uint64_t off = 0;
    size_t k = 0;
    for (size_t i = 0; i < RICH_N_TENSORS; i++) {
        const rich_tensor *t = &rich_tensors[i];
        if (!blocks && t->block) continue;
        gb_tensor(b, t->name, t->ndim, t->ne, t->type, off);
        lay->offset[k++] = off;
        off += t->nbytes;
        off = (off + align - 1) / align * align;
    }
    lay->n_tensors = k;
    lay->header_end = b->n;
    gb_pad(b, align);
    lay->data_start = b->n;
    k = 0;
    for (size_t i = 0; i < RICH_N_TENSORS; i++) {
        const rich_tensor *t = &rich_tensors[i];
        if (!blocks && t->block) continue;
        for (uint64_t j = 0; j < t->nbytes; j++) gb_u8(b, rich_byte(i, j));
        gb_pad(b, align);
        k++;
    }
}

#endif
