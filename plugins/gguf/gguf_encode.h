/* The "gguf" scheme's encoder: llama-quantize's file types. */
#ifndef AMN_GGUF_ENCODE_H
#define AMN_GGUF_ENCODE_H

#include "amn/scheme.h"

extern const amn_encoder gguf_encoder;

#endif
