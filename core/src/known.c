/* What the project's own plugins recognise, kept in the core so that a file
 * whose plugin is not installed gets "install the amn-plugin-X package" rather than
 * "unrecognised" (GDAL's deferred drivers, ImageMagick's magic table). */
#include <stdio.h>
#include <string.h>

#include "known_internal.h"
#include "registry_internal.h"

static bool has_ext(const char *path, const char *ext) {
    if (!path) return false;
    size_t n = strlen(path), e = strlen(ext);
    return n > e && strcmp(path + n - e, ext) == 0;
}

const char *amni_known_plugin_for_file(const char *path, const uint8_t *head, size_t head_size,
                                       uint64_t file_size) {
    if (head_size >= 4 && memcmp(head, "GGUF", 4) == 0) return "gguf";
    if (head_size >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) return "npz";
    if (head_size >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) {
        if (has_ext(path, ".npz")) return "npz";
        return "pth";
    }
    if (head_size >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return "pth";
    if (head_size >= 9 && head[8] == '{') {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | head[i];
        if (n <= file_size - 8) return "safetensors";
    }
    if (has_ext(path, ".safetensors") || has_ext(path, ".safetensors.index.json"))
        return "safetensors";
    if (has_ext(path, ".gguf")) return "gguf";
    if (has_ext(path, ".npz") || has_ext(path, ".npy")) return "npz";
    if (has_ext(path, ".pth") || has_ext(path, ".pt")) return "pth";
    return NULL;
}

/* Quantized tensor layouts, by name suffix and dtype, with the companion
 * that must sit beside them ("<stem><sibling>"). First match wins, so the
 * specific layouts come before the generic ones. */
#define ANY_DTYPE 0u
#define DT(t)     (1u << (t))
#define INTS                                                                                       \
    (DT(AMN_DTYPE_U8) | DT(AMN_DTYPE_I8) | DT(AMN_DTYPE_U16) | DT(AMN_DTYPE_I16) |                 \
     DT(AMN_DTYPE_U32) | DT(AMN_DTYPE_I32))
#define F8S (DT(AMN_DTYPE_F8_E4M3) | DT(AMN_DTYPE_F8_E5M2))

typedef struct known_layout {
    const char *suffix;  /* of the tensor's name; "" = any */
    uint32_t dtypes;     /* mask of amn_dtype; ANY_DTYPE = any */
    const char *sibling; /* "<stem><sibling>" must exist; NULL = no condition */
    uint32_t sib_dtypes; /* the sibling's dtypes; ANY_DTYPE = any */
    const char *what;
    const char *plugin;
} known_layout;

static const known_layout known_layouts[] = {
    {"_blocks", DT(AMN_DTYPE_U8), "_scales", DT(AMN_DTYPE_U8), "MXFP4 (gpt-oss)", "mxfp4"},
    {"_scales", DT(AMN_DTYPE_U8), "_blocks", DT(AMN_DTYPE_U8), "MXFP4 (gpt-oss)", "mxfp4"},
    {".weight_packed", DT(AMN_DTYPE_U8), NULL, 0, "compressed-tensors nvfp4-pack-quantized",
     "nvfp4"},
    {".weight_packed", ANY_DTYPE, NULL, 0, "compressed-tensors pack-quantized", "ctensors"},
    {".weight_global_scale", ANY_DTYPE, ".weight_packed", ANY_DTYPE,
     "compressed-tensors nvfp4-pack-quantized", "nvfp4"},
    {".weight_scale", ANY_DTYPE, ".weight_packed", DT(AMN_DTYPE_U8),
     "compressed-tensors nvfp4-pack-quantized", "nvfp4"},
    {".weight_shape", ANY_DTYPE, ".weight_packed", ANY_DTYPE, "compressed-tensors pack-quantized",
     "ctensors"},
    {".weight_scale", ANY_DTYPE, ".weight_packed", ANY_DTYPE, "compressed-tensors pack-quantized",
     "ctensors"},
    {".weight_zero_point", ANY_DTYPE, ".weight_packed", ANY_DTYPE,
     "compressed-tensors pack-quantized", "ctensors"},
    {".weight_g_idx", ANY_DTYPE, ".weight_packed", ANY_DTYPE, "compressed-tensors pack-quantized",
     "ctensors"},
    {".weight_scale_2", ANY_DTYPE, NULL, 0, "ModelOpt NVFP4", "nvfp4"},
    {"_weight_scale_2", ANY_DTYPE, NULL, 0, "ModelOpt NVFP4 fused experts", "nvfp4"},
    {"", DT(AMN_DTYPE_U8), "_weight_scale", F8S, "ModelOpt NVFP4 fused experts", "nvfp4"},
    {"_weight_scale", F8S, "", DT(AMN_DTYPE_U8), "ModelOpt NVFP4 fused experts", "nvfp4"},
    {".weight", DT(AMN_DTYPE_U8), ".weight_scale", F8S, "ModelOpt NVFP4", "nvfp4"},
    {".weight_scale", F8S, ".weight", DT(AMN_DTYPE_U8), "ModelOpt NVFP4", "nvfp4"},
    {".weight", DT(AMN_DTYPE_I8), ".weight_scale", ANY_DTYPE, "compressed-tensors int-quantized",
     "ctensors"},
    {".weight_scale", ANY_DTYPE, ".weight", DT(AMN_DTYPE_I8), "compressed-tensors int-quantized",
     "ctensors"},
    {".weight_zero_point", ANY_DTYPE, ".weight", DT(AMN_DTYPE_I8),
     "compressed-tensors int-quantized", "ctensors"},
    /* FP8 is quantized only beside its scale (or in a model whose settings
     * declare a method, below): a lone F8_E4M3 / F8_E5M2 tensor is plain
     * data, which convert keeps and remember converts like any float. */
    {".weight", F8S, ".weight_scale", ANY_DTYPE, "FP8", "fp8"},
    {".weight", F8S, ".weight_scale_inv", ANY_DTYPE, "FP8", "fp8"},
    {".weight_scale_inv", ANY_DTYPE, ".weight", F8S, "FP8", "fp8"},
    {".weight_scale", ANY_DTYPE, ".weight", F8S, "FP8", "fp8"},
    {"", DT(AMN_DTYPE_BLOCK), NULL, 0, "GGUF block quantization", "gguf"},
    {".qweight", ANY_DTYPE, NULL, 0, "GPTQ or AWQ", "gptq or amn-plugin-awq"},
    {".qzeros", ANY_DTYPE, NULL, 0, "GPTQ or AWQ", "gptq or amn-plugin-awq"},
    {".absmax", ANY_DTYPE, NULL, 0, "bitsandbytes", "bnb"},
    {".quant_map", ANY_DTYPE, NULL, 0, "bitsandbytes", "bnb"},
    {".SCB", ANY_DTYPE, NULL, 0, "bitsandbytes", "bnb"},
};

/* What a declared method is called, which plugin reads it, and every
 * plugin that reads one of its formats (compressed-tensors' and ModelOpt's
 * NVFP4 and FP8 formats are read by amn-nvfp4 and amn-fp8). */
static const struct {
    const char *method;
    const char *plugin;
    const char *family;
} known_methods[] = {
    {"mxfp4", "mxfp4", ",mxfp4,"},
    {"compressed-tensors", "ctensors", ",ctensors,nvfp4,fp8,"},
    {"modelopt", "nvfp4", ",nvfp4,fp8,"},
    {"nvfp4", "nvfp4", ",nvfp4,"},
    {"fp8", "fp8", ",fp8,"},
    {"gptq", "gptq", ",gptq,"},
    {"awq", "awq", ",awq,"},
    {"bitsandbytes", "bnb", ",bnb,"},
};

static bool has_sibling(const amn_model *m, const char *name, size_t stem, const char *sibling,
                        uint32_t dtypes) {
    const size_t sl = strlen(sibling);
    char buf[512];
    if (stem + sl + 1 > sizeof buf) return false; /* longer than any real layer name */
    memcpy(buf, name, stem);
    memcpy(buf + stem, sibling, sl + 1);
    const int64_t j = amn_model_find(m, buf);
    return j >= 0 &&
           (dtypes == ANY_DTYPE || (dtypes & DT(amn_model_tensor(m, (size_t)j)->dtype)) != 0);
}

/* Integer tensors a plain model holds (token ids, position ids): never weights. */
static bool is_index_tensor(const char *name) {
    size_t n = strlen(name);
    return (n >= 4 && strcmp(name + n - 4, "_ids") == 0) ||
           (n >= 19 && strcmp(name + n - 19, "num_batches_tracked") == 0);
}

/* The plugin that reads the method a model declares, or NULL (no plugin
 * knows it). */
static const char *declared_plugin(const amni_quant_decl *d) {
    if (strcmp(d->method, "compressed-tensors") == 0 && strstr(d->format, "nvfp4")) return "nvfp4";
    if (strcmp(d->method, "modelopt") == 0 && strstr(d->format, "fp8")) return "fp8";
    for (size_t k = 0; k < sizeof known_methods / sizeof *known_methods; k++)
        if (strcmp(d->method, known_methods[k].method) == 0) return known_methods[k].plugin;
    return NULL;
}

/* Whether a plugin reads some format of the declared method. */
static bool declared_family(const amni_quant_decl *d, const char *plugin) {
    char key[32];
    if (snprintf(key, sizeof key, ",%s,", plugin) >= (int)sizeof key) return false;
    for (size_t k = 0; k < sizeof known_methods / sizeof *known_methods; k++)
        if (strcmp(d->method, known_methods[k].method) == 0)
            return strstr(known_methods[k].family, key) != NULL;
    return false;
}

/* The declared method as the reason: its plugin, if any, is what to install. */
static void declared(const amni_quant_decl *d, amni_unhandled *out) {
    out->what = d->method;
    out->plugin = declared_plugin(d);
}

bool amni_known_quantized_tensor(const amn_model *m, size_t i, const amni_quant_decl *d,
                                 amni_unhandled *out) {
    const amn_tensor *t = amn_model_tensor(m, i);
    const size_t n = strlen(t->name);
    const bool decl = d && d->method[0];
    for (size_t k = 0; k < sizeof known_layouts / sizeof *known_layouts; k++) {
        const known_layout *l = &known_layouts[k];
        const size_t sl = strlen(l->suffix);
        if (n < sl || strcmp(t->name + n - sl, l->suffix) != 0) continue;
        if (l->dtypes != ANY_DTYPE && !(l->dtypes & DT(t->dtype))) continue;
        if (l->sibling && !has_sibling(m, t->name, n - sl, l->sibling, l->sib_dtypes)) continue;
        /* A layout of another family than the declared method's: that
         * family's plugin would decline it too (each follows the
         * declaration), so name what is declared. */
        if (decl && !declared_family(d, l->plugin)) {
            declared(d, out);
            return true;
        }
        out->what = l->what;
        out->plugin = l->plugin;
        return true;
    }
    if (strstr(t->name, ".quant_state.")) {
        *out = (amni_unhandled){"bitsandbytes", "bnb"};
        return true;
    }
    /* A model its settings call quantized: an integer or FP8 tensor no scheme
     * took is a quantized weight of a layout this table does not know. */
    if (decl && ((INTS | F8S) & DT(t->dtype)) && !is_index_tensor(t->name)) {
        declared(d, out);
        return true;
    }
    return false;
}
