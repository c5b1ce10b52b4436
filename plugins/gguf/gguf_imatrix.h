/* Importance matrices for llama-quantize's --imatrix: the GGUF file current
 * llama-imatrix writes (<name>.in_sum2 and <name>.counts tensors, the
 * imatrix.datasets / .chunk_count / .chunk_size keys) and the legacy .dat
 * binary, read as llama.cpp's common_imatrix_load and
 * tools/quantize/quantize.cpp's load_imatrix read them (llama.cpp
 * 3af988fab), to the per-column weights llama-quantize hands ggml:
 *   GGUF:   in_sum2[j * ne0 + i] / (float)lround(counts[j]) per expert j
 *           (1 where that count is not positive);
 *   legacy: sums[i] / (float)ncall (the values as stored when ncall <= 0).
 * Every file is hostile: sizes are checked against the file before any
 * allocation, and what llama.cpp would crash on, read past or silently
 * misuse is refused with a message naming the entry. */
#ifndef AMN_GGUF_IMATRIX_H
#define AMN_GGUF_IMATRIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/error.h"

typedef struct gguf_imatrix gguf_imatrix;

/* Reads path (GGUF when it starts with the GGUF magic, else legacy).
 * AMN_E_PARSE for a malformed file, AMN_E_INVALID for values llama-quantize
 * refuses (a non-finite weight), AMN_E_LIMIT past the caps, AMN_E_IO. */
int gguf_imatrix_load(const char *path, gguf_imatrix **out, amn_error *err);
void gguf_imatrix_free(gguf_imatrix *im);

/* The weights of the entry named name (a tensor name), *n of them; NULL
 * when the file has none. */
const float *gguf_imatrix_find(const gguf_imatrix *im, const char *name, uint64_t *n);
/* Drops the entries whose name keep() refuses (--include-weights /
 * --exclude-weights, as quantize.cpp's prepare_imatrix drops them). */
void gguf_imatrix_filter(gguf_imatrix *im, bool (*keep)(const char *name, void *ctx), void *ctx);
/* Entries in the file, after any filter (quantize.imatrix.entries_count). */
size_t gguf_imatrix_count(const gguf_imatrix *im);
/* The first dataset name (NULL when none) and the chunk count
 * (quantize.imatrix.dataset / .chunks_count). */
const char *gguf_imatrix_dataset(const gguf_imatrix *im);
int64_t gguf_imatrix_chunks(const gguf_imatrix *im);

#endif
