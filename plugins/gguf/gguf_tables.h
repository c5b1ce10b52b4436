/* Constant tables of the GGUF i-quants (data from ggml; see gguf_tables.c). */
#ifndef AMN_GGUF_TABLES_H
#define AMN_GGUF_TABLES_H

#include <stdint.h>

/* Sign byte of a 7-bit sign index: bit 7 restores even parity. */
extern const uint8_t gguf_ksigns_iq2xs[128];
extern const uint64_t gguf_iq2xxs_grid[256];
extern const uint64_t gguf_iq2xs_grid[512];
extern const uint64_t gguf_iq2s_grid[1024];
extern const uint32_t gguf_iq3xxs_grid[256];
extern const uint32_t gguf_iq3s_grid[512];
/* Bytes are signed: -1, 0 or +1. */
extern const uint64_t gguf_iq1s_grid[2048];
/* Non-linear 4-bit codebooks: IQ4_NL / IQ4_XS, and MXFP4 (twice E2M1). */
extern const int8_t gguf_kvalues_iq4nl[16];
extern const int8_t gguf_kvalues_mxfp4[16];

#endif
