/* amn/kit/quant_common.h — plugin kit: helpers of the quant-scheme plugins
 * (gptq, awq, fp8, ...): the quantization settings a Hugging Face model
 * keeps beside its weights (config.json "quantization_config", GPTQ's
 * quantize_config.json, AutoAWQ's quant_config.json), which packing a
 * qweight follows, and tensor checks. */
#ifndef AMN_QUANT_COMMON_H
#define AMN_QUANT_COMMON_H

#include <stdbool.h>

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/model.h"
#include "amn/scheme.h"

typedef struct quant_config {
    bool present;               /* some file gave some field */
    char method[32];            /* "gptq", "awq", "fp8", ... lower-case; "" if absent */
    int bits;                   /* 0 if absent */
    int group_size;             /* 0 if absent; -1 = per-channel */
    int desc_act;               /* -1 if absent, else 0 / 1 */
    int sym;                    /* -1 if absent */
    char checkpoint_format[32]; /* GPTQ: "gptq", "gptq_v2", "marlin", ...; lower-case */
    char version[32];           /* AWQ: "gemm", "gemv", "gemv_fast", ...; lower-case */
    char format[32];            /* compressed-tensors: "pack-quantized", ...; lower-case */
    int num_bits;               /* compressed-tensors config_groups weights num_bits; 0 if absent */
    int block[2];               /* weight_block_size, or compressed-tensors config_groups
                                   weights.block_structure; 0 if absent */
    int load_in_4bit;           /* bitsandbytes: -1 if absent, else 0 / 1 */
    int load_in_8bit;           /* -1 if absent */
    int bnb_double_quant;       /* bnb_4bit_use_double_quant; -1 if absent */
    char bnb_quant_type[8];     /* bnb_4bit_quant_type: "nf4", "fp4"; "" if absent */
    char file[48];              /* the file that gave `method` (or the first one read) */
} quant_config;

/* Fill *qc from the files beside amn_model_path(m); string metadata of the
 * model (gptq_bits, gptq_group_size) fills what the files left out. Missing,
 * oversized or unparsable files are skipped: the tensors' shapes stay the
 * authority and every value read here is checked against them. */
void quant_config_load(const amn_model *m, quant_config *qc);

/* GPTQ and AWQ both name their tensors qweight / qzeros / scales. The
 * config's method decides when it names one; otherwise the shapes do: GPTQ
 * packs along in_features (scales and qweight have the same number of
 * columns) and may have g_idx, AutoAWQ GEMM packs 8 outputs per word. */
typedef enum quant_kind { QUANT_UNKNOWN = 0, QUANT_GPTQ, QUANT_AWQ } quant_kind;
quant_kind quant_classify(const quant_config *qc, const amn_tensor *qweight,
                          const amn_tensor *scales, bool has_gidx);

/* "<prefix><suffix>" in a new string (NULL when out of memory). */
char *quant_join(const char *prefix, size_t prefix_len, const char *suffix);
/* True when name ends with suffix; *prefix_len gets the length before it. */
bool quant_suffix(const char *name, const char *suffix, size_t *prefix_len);

/* The index of tensor "<prefix><suffix>", or -1 when there is none (or, with
 * *rc set, when out of memory). */
int64_t quant_find_companion(const amn_model *m, const char *prefix, size_t plen,
                             const char *suffix, int *rc, amn_error *err);

/* Claims one layer from its qweight (tensor qwi, name prefix of plen bytes). */
typedef int (*quant_claim_fn)(const amn_model *m, amn_claimset *cs, const quant_config *qc,
                              size_t qwi, size_t plen, amn_error *err);

/* The detect() of GPTQ and AWQ: every unclaimed "*.qweight" goes to claim
 * (the config read once, on the first one). When any layer was claimed, an
 * unclaimed tensor ending in one of the `orphans` suffixes without its
 * qweight is a parse error: in a quantized model it means a broken file. */
int quant_detect_layers(const amn_model *m, amn_claimset *cs, quant_claim_fn claim,
                        const char *const *orphans, size_t n_orphans, amn_error *err);

/* The companions of a "<prefix>.qweight" (GPTQ and AWQ name them alike):
 * tensor indices, -1 when absent. */
typedef struct quant_qweight_layer {
    int64_t scales, qzeros, g_idx;
    int64_t weight; /* "<prefix>.weight": must not exist beside a qweight */
} quant_qweight_layer;

/* Find the companions of qweight qw (name prefix of plen bytes). */
int quant_qweight_companions(const amn_model *m, const amn_tensor *qw, size_t plen,
                             quant_qweight_layer *l, amn_error *err);

/* AMN_E_PARSE, naming `method` ("GPTQ", "AWQ"), unless the layer has its
 * scales and qzeros and no "<prefix>.weight" the output would collide with. */
int quant_qweight_check(const amn_model *m, const amn_tensor *qw, size_t plen,
                        const quant_qweight_layer *l, const char *method, amn_error *err);

/* The group size of G scale rows over `in` input features: the config's
 * group_size when it gives one (which must give exactly G groups), else
 * in / G (which must divide). Messages name the scales tensor sc and qw. */
int quant_group_size(const quant_config *qc, const amn_tensor *sc, const amn_tensor *qw,
                     uint64_t in, uint64_t G, uint64_t *gs, amn_error *err);

/* Scale i of a BF16, F16 or F32 scales array, as a float. Inline: the
 * kernels (built alone into their tests) use it without this file's .c. */
static inline float quant_scale_at(const uint8_t *scales, amn_dtype stype, uint64_t i) {
    switch (stype) {
    case AMN_DTYPE_BF16:
        return amn_bf16_to_f32(amn_load_le16(scales + i * 2));
    case AMN_DTYPE_F16:
        return amn_f16_to_f32(amn_load_le16(scales + i * 2));
    default:
        return amn_load_le_f32(scales + i * 4);
    }
}

/* Check that t has exactly the bytes its shape and dtype call for. */
int quant_check_bytes(const amn_tensor *t, amn_error *err);

/* The tensor's little-endian C-order bytes, aligned for its dtype: its own
 * data when plain and aligned, else a copy in *own (malloc'd, the caller frees). NULL data (a model
 * read for inspection only) gives NULL and AMN_OK. */
int quant_tensor_bytes(const amn_tensor *t, uint8_t **own, const uint8_t **bytes, amn_error *err);

/* "[a, b]" of a tensor for messages. */
const char *quant_shape(const amn_tensor *t, char *buf, size_t size);

/* The bytes a dequantize call reads for tensor i: the plan's own copy when
 * it made one, else the tensor's data if it still has nbytes; NULL if not. */
const uint8_t *quant_member(const amn_model *m, size_t i, const uint8_t *own, uint64_t nbytes);

/* AMN_E_INVALID unless `out` is F32/F16/BF16 and [row0, row0+nrows) lies in
 * the layer's `rows` output rows; messages name the layer. */
int quant_check_request(const char *name, uint64_t rows, uint64_t row0, uint64_t nrows,
                        amn_dtype out, amn_error *err);

#endif
