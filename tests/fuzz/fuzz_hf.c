/* Fuzz target for Hugging Face model folders made GGUFs (the amn-hf plugin):
 * config.json, the tokenizer files, the model card and the weights, each
 * read as llama.cpp's converter reads it. The input is packed as
 *
 *   u32 LE  lengths of the N_FILES files of `files` below, in that order
 *           (0xffffffff: the file is absent)
 *   u8      how: bits 0-1 the target (hf-f16, hf-bf16, hf-f32, hf-q8_0),
 *           bit 2 then Q4_K_M in the same pass (encode_then), bit 3 the
 *           GGUF made read back as a Hugging Face folder (the hfdir encoder)
 *   the files' bytes, and the rest: model.safetensors, or, when it begins
 *   with "GGUF", a GGUF file that is read as a Hugging Face folder's
 *   weights (hfdir: its vocabulary, hyperparameters and tensor names)
 *
 * (lengths past the end are cut to what is left), written into a folder
 * that is opened, planned and converted: the architecture tables, the
 * hyperparameter checks, the SentencePiece protobuf reader, the BPE
 * tokenizer that hashes the check text (its pre-tokenizer regexes), the
 * added and special tokens, the chat template and the model card's front
 * matter, on whatever bytes those files hold. The same invariants as
 * fuzz_smoke (fuzz_common.h) apply.
 *
 *   fuzz_hf [iterations] [model folders, or folders of them, GGUF files
 *           (*.gguf), or packed inputs...]
 *                               plain build: deterministic mutations
 *   fuzz_hf --pack OUTDIR FOLDER...
 *                               writes each folder packed, as a seed corpus
 *                               for the libFuzzer build */

#include "fuzz_common.h"

static const char *const files[] = {
    "config.json",       "tokenizer.json",          "tokenizer_config.json",
    "tokenizer.model",   "generation_config.json",  "README.md",
    "added_tokens.json", "special_tokens_map.json", "chat_template.jinja"};
enum { N_FILES = sizeof files / sizeof files[0], PACK_HEAD = 4 * N_FILES + 1, ABSENT = -1 };

static const char *folder(void) {
    return fuzz_folder("amn-fuzz-hf");
}

static void put(const char *name, const uint8_t *data, size_t size) {
    fuzz_put(folder(), name, data, size);
}

static int convert(amn_ctx *ctx, const amn_model *m, const char *target, const char *enc,
                   const char *then, const char *out) {
    amn_plan *p = fuzz_plan_new(ctx, m);
    if (!p) return AMN_E_PARSE;
    const amn_encode_options eo = {.struct_size = sizeof eo, .target = enc};
    const amn_encode_options et = {.struct_size = sizeof et, .target = then};
    const amn_convert_options o = {.struct_size = sizeof o,
                                   .mode = AMN_MODE_REMEMBER,
                                   .target = target,
                                   .encode = &eo,
                                   .encode_then = then ? &et : NULL,
                                   .out_dtype = AMN_DTYPE_BF16,
                                   .output = out,
                                   .overwrite = true,
                                   .threads = 1,
                                   .no_sync = true};
    amn_error err;
    fuzz_err_reset(&err);
    const int rc = amn_convert(ctx, m, p, &o, NULL, &err);
    fuzz_check_rc("amn_convert", rc, &err);
    amn_plan_free(p);
    return rc;
}

/* The GGUF made from the folder, read back as a Hugging Face folder's
 * weights (the hfdir encoder reads the vocabulary, the hyperparameters and
 * the tensor names it wrote). */
static void read_back(amn_ctx *ctx, const char *gguf) {
    amn_model *m = fuzz_open_path(ctx, gguf);
    if (!m) return;
    char out[160];
    snprintf(out, sizeof out, "%s/back.safetensors", folder());
    if (convert(ctx, m, "safetensors", "hfdir", NULL, out) == AMN_OK) unlink(out);
    amn_model_free(m);
}

static const char *const targets[4] = {"hf-f16", "hf-bf16", "hf-f32", "hf-q8_0"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)fuzz_pipeline; /* shared header; this target opens folders only */
    (void)fuzz_convert;
    if (size < PACK_HEAD) return 0;
    size_t left = size - PACK_HEAD;
    const uint8_t *p = data + PACK_HEAD;
    for (size_t f = 0; f < N_FILES; f++) {
        const uint32_t len = fuzz_le32(data + 4 * f);
        const size_t n = len == (uint32_t)ABSENT ? 0 : len < left ? len : left;
        put(files[f], len == (uint32_t)ABSENT ? NULL : p, n);
        p += n, left -= n;
    }
    const unsigned how = data[4 * N_FILES];
    amn_ctx *ctx = fuzz_ctx();
    if (!amn_ctx_find_encoder(ctx, "hf-f16")) return 0; /* no amn-hf plugin */
    char out[160];
    if (left >= 4 && memcmp(p, "GGUF", 4) == 0) { /* a GGUF made a Hugging Face folder */
        snprintf(out, sizeof out, "%s/model.gguf", folder());
        fuzz_write_file(out, p, left);
        read_back(ctx, out);
        unlink(out);
        return 0;
    }
    put("model.safetensors", p, left);
    amn_model *m = fuzz_open_path(ctx, folder());
    if (!m) return 0;
    snprintf(out, sizeof out, "%s/out.gguf", folder());
    if (amn_model_total_bytes(m) < (4u << 20) &&
        convert(ctx, m, "gguf", targets[how & 3], how & 4 ? "Q4_K_M" : NULL, out) == AMN_OK) {
        if (how & 8) read_back(ctx, out);
        unlink(out);
    }
    amn_model_free(m);
    return 0;
}

#ifndef AMN_LIBFUZZER
/* A model folder with config.json and model.safetensors, packed as the
 * target reads it (how 0: hf-f16), or NULL. */
static uint8_t *pack(const char *dir, size_t *size) {
    uint8_t *b = calloc(1, PACK_HEAD);
    size_t n = PACK_HEAD;
    char path[4096];
    if (!b) abort();
    for (size_t f = 0; f < N_FILES; f++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[f]);
        const size_t before = n;
        const uint32_t len = fuzz_slurp(path, &b, &n) ? (uint32_t)(n - before) : (uint32_t)ABSENT;
        if (f == 0 && len == (uint32_t)ABSENT) break;
        for (int k = 0; k < 4; k++) b[4 * f + (size_t)k] = (uint8_t)(len >> 8 * k);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (n == PACK_HEAD || !fuzz_slurp(path, &b, &n)) {
        free(b);
        return NULL;
    }
    *size = n;
    return b;
}

/* Bytes worth mutating: the head and the files before the weights (the
 * safetensors header is fuzz_model's and fuzz_smoke's), or a GGUF's first
 * 64 KiB (its key/values: the vocabulary the way back reads). */
static size_t mutable_span(const uint8_t *b, size_t size) {
    size_t span = PACK_HEAD;
    for (size_t f = 0; f < N_FILES; f++) {
        const uint32_t len = fuzz_le32(b + 4 * f);
        if (len != (uint32_t)ABSENT) span += len;
    }
    if (span + 4 <= size && memcmp(b + span, "GGUF", 4) == 0) /* its key/values, in its head */
        span += 64 << 10;
    return span < size ? span : size;
}

/* The packed seed, then `iterations` mutations of its mutable span (the
 * weights after it kept as they are), every target in turn. */
static void run_packed(const uint8_t *orig, size_t n, long iterations, uint64_t *rs) {
    fuzz_run_head_mutations(orig, n, mutable_span(orig, n), 4 * N_FILES, 5, iterations, rs);
}

/* A GGUF file (*.gguf), packed behind a head of absent files. */
static bool pack_gguf(const char *path, uint8_t **buf, size_t *size) {
    const size_t len = strlen(path);
    if (len <= 5 || strcmp(path + len - 5, ".gguf") != 0) return false;
    uint8_t *b = malloc(PACK_HEAD);
    if (!b) abort();
    memset(b, 0xff, PACK_HEAD);
    b[4 * N_FILES] = 0;
    size_t n = PACK_HEAD;
    if (!fuzz_slurp(path, &b, &n)) {
        free(b);
        return false;
    }
    *buf = b, *size = n;
    return true;
}

int main(int argc, char **argv) {
    (void)fuzz_driver_main; /* shared header; seeds here are folders */
    const fuzz_packer k = {.name = "hf", .pack = pack, .pack_file = pack_gguf, .run = run_packed};
    return fuzz_packer_main(&k, argc, argv, 20);
}
#endif
