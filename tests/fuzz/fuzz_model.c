/* Fuzz target for model folders: what the quantization schemes read. The
 * input is packed as
 *
 *   u32 LE  n1: length of config.json
 *   u32 LE  n2: length of hf_quant_config.json (0: no such file)
 *   u8      how: bits 0-1 the output dtype (BF16, F16, F32, BF16), bit 2
 *           AMN_MODE_REMEMBER instead of AMN_MODE_CONVERT, bits 3-5 an
 *           encode target (encode_targets below; 0: none)
 *   n1 bytes, n2 bytes, and the rest: model.safetensors
 *
 * (lengths past the end are cut to what is left), written into a folder
 * that is opened (amn_open of the folder), planned, and for small models
 * converted to safetensors, or encoded ("forget") to a bnb or GGUF target:
 * every scheme's detect() with its config parsing and companion checks, its
 * kernels on what passed them, and the encoders on whatever values the
 * tensors hold. The same invariants as fuzz_smoke (fuzz_common.h) apply.
 *
 *   fuzz_model [iterations] [model folders, or folders of them, or packed
 *              inputs...]       plain build: deterministic mutations
 *   fuzz_model --pack OUTDIR FOLDER...
 *                               writes each folder packed, as a seed corpus
 *                               for the libFuzzer build */

#include "fuzz_common.h"

enum { PACK_HEAD = 9 };

static const char *folder(void) {
    return fuzz_folder("amn-fuzz-model");
}

static void put(const char *name, const uint8_t *data, size_t size) {
    fuzz_put(folder(), name, data, size);
}

/* how's bits 3-5: bnb in safetensors, GGUF file types in GGUF (IQ2_XS needs
 * an importance matrix: refused). */
static const char *const encode_targets[8] = {NULL,     "bnb-nf4", "bnb-fp4-dq", "bnb-int8",
                                              "Q4_K_M", "Q8_0",    "IQ4_XS",     "IQ2_XS"};

static void convert_folder(amn_ctx *ctx, const amn_model *m, unsigned how) {
    const amn_dtype dtypes[4] = {AMN_DTYPE_BF16, AMN_DTYPE_F16, AMN_DTYPE_F32, AMN_DTYPE_BF16};
    amn_plan *p = fuzz_plan_new(ctx, m);
    if (!p) return;
    if (amn_model_total_bytes(m) < (4u << 20)) {
        const char *enc = encode_targets[how >> 3 & 7];
        const amn_encode_options eo = {.struct_size = sizeof eo, .target = enc};
        const bool gguf = enc && strncmp(enc, "bnb", 3) != 0;
        fuzz_convert_as(
            m, p,
            (amn_convert_options){.mode = how & 4 || enc ? AMN_MODE_REMEMBER : AMN_MODE_CONVERT,
                                  .target = gguf ? "gguf" : "safetensors",
                                  .encode = enc && amn_ctx_find_encoder(ctx, enc) ? &eo : NULL,
                                  .out_dtype = dtypes[how & 3]});
    }
    amn_plan_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)fuzz_pipeline; /* shared header; this target opens folders only */
    if (size < PACK_HEAD) return 0;
    size_t left = size - PACK_HEAD;
    const size_t n1 = fuzz_le32(data) < left ? fuzz_le32(data) : left;
    left -= n1;
    const size_t n2 = fuzz_le32(data + 4) < left ? fuzz_le32(data + 4) : left;
    left -= n2;
    const uint8_t *p = data + PACK_HEAD;
    put("config.json", p, n1);
    put("hf_quant_config.json", n2 ? p + n1 : NULL, n2);
    put("model.safetensors", p + n1 + n2, left);
    amn_ctx *ctx = fuzz_ctx();
    amn_model *m = fuzz_open_path(ctx, folder());
    if (m) {
        convert_folder(ctx, m, data[8]);
        amn_model_free(m);
    }
    return 0;
}

#ifndef AMN_LIBFUZZER
static bool slurp(const char *dir, const char *name, uint8_t **buf, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return fuzz_slurp(path, buf, len);
}

/* A model folder packed as the target reads it (BF16, convert mode). */
static uint8_t *pack(const char *dir, size_t *size) {
    uint8_t *b = calloc(1, PACK_HEAD);
    size_t n = PACK_HEAD;
    if (!b || !slurp(dir, "config.json", &b, &n)) {
        free(b);
        return NULL;
    }
    const size_t n1 = n - PACK_HEAD;
    slurp(dir, "hf_quant_config.json", &b, &n);
    const size_t n2 = n - PACK_HEAD - n1;
    if (!slurp(dir, "model.safetensors", &b, &n)) {
        free(b);
        return NULL;
    }
    for (int k = 0; k < 4; k++) b[k] = (uint8_t)(n1 >> 8 * k), b[4 + k] = (uint8_t)(n2 >> 8 * k);
    *size = n;
    return b;
}

/* Bytes worth mutating: the head, both JSON files and the safetensors
 * header (its length and JSON); the tensor data after it only feeds the
 * kernels, which the kernel tests cover value by value. */
static size_t mutable_span(const uint8_t *b, size_t size) {
    const size_t st = PACK_HEAD + (size_t)fuzz_le32(b) + fuzz_le32(b + 4);
    if (st + 8 > size) return size;
    const uint64_t hl = fuzz_le32(b + st) | (uint64_t)fuzz_le32(b + st + 4) << 32;
    return hl > size - st - 8 ? size : st + 8 + (size_t)hl;
}

/* The packed seed, then `iterations` mutations of its mutable span (the
 * data after it kept as it is). */
static void run_packed(const uint8_t *orig, size_t n, long iterations, uint64_t *rs) {
    fuzz_run_head_mutations(orig, n, mutable_span(orig, n), 8, 37, iterations, rs);
}

int main(int argc, char **argv) {
    (void)fuzz_driver_main; /* shared header; seeds here are folders */
    const fuzz_packer k = {.name = "model", .pack = pack, .run = run_packed};
    return fuzz_packer_main(&k, argc, argv, 200);
}
#endif
