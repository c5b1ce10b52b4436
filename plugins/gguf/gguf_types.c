/* The ggml type table: names and block geometry (ggml-common.h, ggml.c). */
#include <stddef.h>

#include "amn/checked.h"
#include "gguf_types.h"

#define PLAIN(id_, name_, size_, dt_)                                                              \
    [id_] = {id_, name_, "GGUF " name_, GGUF_KIND_PLAIN, 1, size_, dt_}
#define QUANT(id_, name_, qk_, ts_)                                                                \
    [id_] = {id_, name_, "GGUF " name_, GGUF_KIND_QUANT, qk_, ts_, AMN_DTYPE_BLOCK}
#define NOKERN(id_, name_, qk_, ts_)                                                               \
    [id_] = {id_, name_, "GGUF " name_, GGUF_KIND_NO_KERNEL, qk_, ts_, AMN_DTYPE_BLOCK}
#define RETIRED(id_, name_)                                                                        \
    [id_] = {id_, name_, "GGUF " name_, GGUF_KIND_RETIRED, 0, 0, AMN_DTYPE_BLOCK}

static const gguf_type_traits type_table[GGUF_TYPE_COUNT] = {
    PLAIN(GGUF_TYPE_F32, "F32", 4, AMN_DTYPE_F32),
    PLAIN(GGUF_TYPE_F16, "F16", 2, AMN_DTYPE_F16),
    QUANT(GGUF_TYPE_Q4_0, "Q4_0", 32, 18),
    QUANT(GGUF_TYPE_Q4_1, "Q4_1", 32, 20),
    RETIRED(GGUF_TYPE_Q4_2, "Q4_2"),
    RETIRED(GGUF_TYPE_Q4_3, "Q4_3"),
    QUANT(GGUF_TYPE_Q5_0, "Q5_0", 32, 22),
    QUANT(GGUF_TYPE_Q5_1, "Q5_1", 32, 24),
    QUANT(GGUF_TYPE_Q8_0, "Q8_0", 32, 34),
    NOKERN(GGUF_TYPE_Q8_1, "Q8_1", 32, 36),
    QUANT(GGUF_TYPE_Q2_K, "Q2_K", 256, 84),
    QUANT(GGUF_TYPE_Q3_K, "Q3_K", 256, 110),
    QUANT(GGUF_TYPE_Q4_K, "Q4_K", 256, 144),
    QUANT(GGUF_TYPE_Q5_K, "Q5_K", 256, 176),
    QUANT(GGUF_TYPE_Q6_K, "Q6_K", 256, 210),
    NOKERN(GGUF_TYPE_Q8_K, "Q8_K", 256, 292),
    QUANT(GGUF_TYPE_IQ2_XXS, "IQ2_XXS", 256, 66),
    QUANT(GGUF_TYPE_IQ2_XS, "IQ2_XS", 256, 74),
    QUANT(GGUF_TYPE_IQ3_XXS, "IQ3_XXS", 256, 98),
    QUANT(GGUF_TYPE_IQ1_S, "IQ1_S", 256, 50),
    QUANT(GGUF_TYPE_IQ4_NL, "IQ4_NL", 32, 18),
    QUANT(GGUF_TYPE_IQ3_S, "IQ3_S", 256, 110),
    QUANT(GGUF_TYPE_IQ2_S, "IQ2_S", 256, 82),
    QUANT(GGUF_TYPE_IQ4_XS, "IQ4_XS", 256, 136),
    PLAIN(GGUF_TYPE_I8, "I8", 1, AMN_DTYPE_I8),
    PLAIN(GGUF_TYPE_I16, "I16", 2, AMN_DTYPE_I16),
    PLAIN(GGUF_TYPE_I32, "I32", 4, AMN_DTYPE_I32),
    PLAIN(GGUF_TYPE_I64, "I64", 8, AMN_DTYPE_I64),
    PLAIN(GGUF_TYPE_F64, "F64", 8, AMN_DTYPE_F64),
    QUANT(GGUF_TYPE_IQ1_M, "IQ1_M", 256, 56),
    PLAIN(GGUF_TYPE_BF16, "BF16", 2, AMN_DTYPE_BF16),
    RETIRED(GGUF_TYPE_Q4_0_4_4, "Q4_0_4_4"),
    RETIRED(GGUF_TYPE_Q4_0_4_8, "Q4_0_4_8"),
    RETIRED(GGUF_TYPE_Q4_0_8_8, "Q4_0_8_8"),
    QUANT(GGUF_TYPE_TQ1_0, "TQ1_0", 256, 54),
    QUANT(GGUF_TYPE_TQ2_0, "TQ2_0", 256, 66),
    RETIRED(GGUF_TYPE_IQ4_NL_4_4, "IQ4_NL_4_4"),
    RETIRED(GGUF_TYPE_IQ4_NL_4_8, "IQ4_NL_4_8"),
    RETIRED(GGUF_TYPE_IQ4_NL_8_8, "IQ4_NL_8_8"),
    QUANT(GGUF_TYPE_MXFP4, "MXFP4", 32, 17),
    NOKERN(GGUF_TYPE_NVFP4, "NVFP4", 64, 36),
    QUANT(GGUF_TYPE_Q1_0, "Q1_0", 128, 18),
    QUANT(GGUF_TYPE_Q2_0, "Q2_0", 64, 18),
};

const gguf_type_traits *gguf_type_traits_get(uint32_t ggml_type) {
    if (ggml_type >= GGUF_TYPE_COUNT) return NULL;
    return &type_table[ggml_type];
}

bool gguf_type_can_dequantize(const gguf_type_traits *tr) {
    if (!tr) return false;
    if (tr->kind == GGUF_KIND_QUANT) return true;
    return tr->kind == GGUF_KIND_PLAIN && amn_dtype_is_float(tr->plain);
}

bool gguf_type_nbytes(const gguf_type_traits *tr, uint64_t n_elems, uint64_t *out) {
    if (!tr || tr->block_elems == 0 || n_elems % tr->block_elems != 0) return false;
    return amn_mul_u64(n_elems / tr->block_elems, tr->block_bytes, out);
}
