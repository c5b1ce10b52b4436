/* The "gguf" quant scheme: every AMN_DTYPE_BLOCK tensor of a ggml type. */
#ifndef AMN_GGUF_SCHEME_H
#define AMN_GGUF_SCHEME_H

#include "amn/scheme.h"

extern const amn_scheme gguf_block_scheme;

#endif
