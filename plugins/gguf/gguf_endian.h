/* Big-endian GGUF: what is swapped, per ggml type, between the byte order of
 * the file and the little-endian bytes the kernels and the core work on.
 *
 * llama.cpp on s390x reads a GGUF file in its own (big-endian) byte order:
 * every header field, key/value and plain tensor element, and inside the
 * quantized blocks the fp16 scales ggml reads as such. gguf-py's
 * gguf_convert_endian.py defines which block types have a big-endian layout
 * (Q1_0, Q4_0, Q8_0, Q4_K, Q6_K, TQ2_0; MXFP4 and NVFP4 have no multi-byte
 * field); it refuses the others, and so does amn. */
#ifndef AMN_GGUF_ENDIAN_H
#define AMN_GGUF_ENDIAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when this build runs on a big-endian host. */
static inline bool gguf_host_big_endian(void) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return true;
#else
    return false;
#endif
}

/* Reverse the bytes of each of n elements of es bytes at p. */
void gguf_swap_elems(void *p, size_t n, size_t es);

/* True when tensors of this ggml type have a defined big-endian layout: the
 * plain types (elements swapped) and the block types listed above. */
bool gguf_endian_defined(uint32_t ggml_type);

/* True when a block-quantized type has fields to swap (false for plain types
 * and for MXFP4 / NVFP4, whose bytes are the same in either order). */
bool gguf_endian_block_swaps(uint32_t ggml_type);

/* Swap, in place, the multi-byte fields of n bytes of whole blocks of a
 * block type for which gguf_endian_defined() holds (the same operation
 * converts either way). */
void gguf_endian_swap_blocks(uint32_t ggml_type, uint8_t *p, size_t n);

#endif
