/* amn/kit/ternary.h — plugin kit: ggml's ternary block types TQ1_0 and
 * TQ2_0 (ggml-quants.c quantize_row_tq1_0_ref / tq2_0_ref; gguf-py's
 * quants.py TQ1_0 / TQ2_0 packs the same bytes): 256 values as codes -1, 0,
 * 1 of a scale d, their largest magnitude. amn-gguf quantizes with them as
 * llama-quantize does, amn-hf as convert_hf_to_gguf.py --outtype tq1_0 /
 * tq2_0 does. */
#ifndef AMN_KIT_TERNARY_H
#define AMN_KIT_TERNARY_H

#include <stdint.h>

#define KIT_TQ_BLOCK    256 /* values per block */
#define KIT_TQ1_0_BYTES 54  /* 48 bytes of 5 codes, 4 of 4, then d (F16) */
#define KIT_TQ2_0_BYTES 66  /* 64 bytes of 4 codes, then d (F16) */
#define KIT_TQ1_0_CODES 52  /* the code bytes before d */
#define KIT_TQ2_0_CODES 64

/* t[i] = lroundf(x[i] * id) + 1 (0, 1, 2 for x within the scale); only the
 * low byte of an out-of-range code (a NaN's, an infinity's) is kept, as
 * ggml keeps it. */
void kit_tq_codes(const float *x, float id, int8_t t[KIT_TQ_BLOCK]);
/* The codes packed: KIT_TQ1_0_CODES / KIT_TQ2_0_CODES bytes into y (the
 * caller stores d after them, as its producer rounds it to F16). */
void kit_tq1_0_pack(const int8_t t[KIT_TQ_BLOCK], uint8_t *y);
void kit_tq2_0_pack(const int8_t t[KIT_TQ_BLOCK], uint8_t *y);

#endif
