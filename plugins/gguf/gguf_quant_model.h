/* The quantization engine's entry for whole models: what the `forget`
 * command drives (not wired to a command yet).
 *
 * gguf_qpolicy_read_model turns an opened model (any amn_model with GGUF
 * metadata and tensor names) into the inputs of gguf_qpolicy_choose;
 * gguf_quantize_tensor_rows then produces the data of each tensor, any run
 * of rows at a time, so a writer streams: memory is one 4096-element
 * staging buffer per call, whatever the row length, and since every row
 * (every block) is independent the bytes do not depend on how rows are
 * split between calls or threads. */
#ifndef AMN_GGUF_QUANT_MODEL_H
#define AMN_GGUF_QUANT_MODEL_H

#include <stdint.h>

#include "amn/error.h"
#include "amn/model.h"
#include "amn/tensor.h"
#include "gguf_qpolicy.h"

/* Elements staged per step (a multiple of every block size: 32..256). */
#define GGUF_QCHUNK 4096

/* The policy's view of m: *pm from general.architecture and
 * {arch}.block_count / .attention.head_count / .attention.head_count_kv
 * (default head_count) / .expert_count (default 0), per-layer arrays read
 * at layer 0 as llama.cpp's n_gqa() does; *tensors (malloc'd, caller frees;
 * names point into m) with GGUF ne order and ggml types (F32 / F16 / BF16
 * tensors, or block tensors by their encoding). AMN_E_PARSE naming the key
 * when a required one is missing or not an integer; AMN_E_UNSUPPORTED for a
 * tensor of another dtype or more than 4 dimensions. */
int gguf_qpolicy_read_model(const amn_model *m, gguf_qpolicy_model *pm,
                            gguf_qpolicy_tensor **tensors, amn_error *err);

/* Encoded bytes of one row of ne0 elements of type; false when ne0 is not
 * a whole number of blocks or on overflow. */
bool gguf_quant_row_bytes(uint32_t type, uint64_t ne0, uint64_t *out);

/* Rows [row0, row0 + nrows) of t (a row = its last dimension, GGUF ne[0])
 * as dst_type into dst (nrows * row bytes). The source is F32, F16 or BF16
 * (any view amn_tensor_read reads) or a ggml block type, widened exactly to
 * f32 (ggml's own dequantization, as llama-quantize's --allow-requantize
 * path); a dst_type equal to the source's type copies the bytes, as
 * llama-quantize does. AMN_E_INVALID for rows out of range or a row that is
 * not a whole number of dst_type's blocks; AMN_E_UNSUPPORTED for a type
 * gguf_quantize cannot make. */
int gguf_quantize_tensor_rows(const amn_tensor *t, uint32_t dst_type, uint64_t row0, uint64_t nrows,
                              void *dst, amn_error *err);

/* Both refuse (AMN_E_PARSE, naming the tensor) rows holding a NaN or an
 * infinity, or a block whose scale is one, as llama-quantize refuses them
 * when it loads its input (gguf_validate.h). */

/* The same with importance-matrix weights qw (NULL: none): ne0 values per
 * matrix of the tensor (ne0 * ne2 in all, expert e's at qw + e * ne0, as
 * llama-quantize hands each expert's to ggml; tensors of 4 dimensions
 * with more than one along the last are refused). A weighted row is staged
 * whole (ggml's legacy types weigh by the whole row's mean square). */
int gguf_quantize_tensor_rows_w(const amn_tensor *t, uint32_t dst_type, uint64_t row0,
                                uint64_t nrows, const float *qw, void *dst, amn_error *err);

/* Every value of t finite and every block scale valid (gguf_validate.h),
 * for a tensor llama-quantize loads and writes as it is: AMN_E_PARSE
 * naming it otherwise. Types gguf_dequantize does not read (integers) are
 * not checked, as ggml does not. */
int gguf_check_tensor(const amn_tensor *t, amn_error *err);

/* The refusal of a tensor whose values are not finite: "tensor NAME holds
 * WHAT at value AT ...". */
int gguf_invalid_input(const char *name, const char *what, uint64_t at, amn_error *err);

#endif
