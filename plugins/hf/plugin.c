/* amn-hf: a Hugging Face model folder made into the GGUF llama.cpp's
 * convert_hf_to_gguf.py writes, byte for byte.
 *
 * It registers a scheme "hf" that claims nothing and encodes: its targets
 * hf-f32, hf-f16, hf-bf16, hf-q8_0, hf-tq1_0, hf-tq2_0 and hf-auto are the
 * converter's --outtype values
 * (`amn convert DIR --to gguf --out-dtype T` picks them). begin() plans
 * the whole conversion from the folder (config.json, the shards' tensor
 * lists) before any output exists; each source tensor becomes one output
 * renamed and transformed as the family's table says; the GGUF key/values
 * and the converter's tensor order go to the GGUF writer through the
 * encoder's metadata and writer_options slots. */
#include <string.h>

#include "amn/plugin.h"
#include "hf_convert.h"
#include "hf_rev.h"

static int detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    (void)m;
    (void)cs;
    (void)err;
    return AMN_OK;
}

static int dequantize(const amn_model *m, const void *plan, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    (void)m, (void)plan, (void)row0, (void)nrows, (void)out, (void)dst;
    return amn_error_set(err, AMN_E_INVALID, "hf: nothing to dequantize");
}

static int begin(const amn_encode_options *o, const amn_encode_source *src, size_t n,
                 void **model_state, amn_error *err) {
    hf_conv *c;
    int rc = hf_conv_new(o, src, n, &c, err);
    *model_state = rc ? NULL : c;
    return rc;
}

static void set_out(amn_encode_out *e, const hf_out *t) {
    e->name = t->name;
    e->dtype = t->dtype;
    e->ndim = t->ndim;
    memcpy(e->shape, t->shape, sizeof e->shape);
    e->nbytes = t->nbytes;
    e->unit_bytes = hf_unit_bytes(t);
    e->encoding = t->dtype == AMN_DTYPE_BLOCK ? t->block : 0;
    e->encoding_name = t->dtype != AMN_DTYPE_BLOCK ? NULL
                       : t->block == HF_TQ1_0      ? "TQ1_0"
                       : t->block == HF_TQ2_0      ? "TQ2_0"
                       : t->block == HF_MXFP4      ? "MXFP4"
                                                   : "Q8_0";
}

/* The tensor state is the source's slot: its outputs, in order. */
static int tensor(void *ms, size_t i, amn_encode_out *outs, size_t *n_outs, void **ts,
                  amn_error *err) {
    hf_conv *c = ms;
    if (i >= c->n_src) return amn_error_set(err, AMN_E_INVALID, "hf: bad tensor index");
    const hf_slot *sl = &c->slots[i];
    *ts = (void *)sl;
    if (!sl->n) {
        *n_outs = AMN_ENCODE_DROP;
        return AMN_OK;
    }
    for (size_t k = 0; k < sl->n; k++) set_out(&outs[k], sl->o[k]);
    *n_outs = sl->n;
    return AMN_OK;
}

static int fill(const void *ts, size_t out, uint64_t unit0, uint64_t n, const amn_values *v,
                void *dst, double *abs_err, amn_error *err) {
    const hf_slot *sl = ts;
    if (abs_err) *abs_err = 0;
    if (out >= sl->n) return amn_error_set(err, AMN_E_INVALID, "hf: bad output index");
    return hf_fill(sl->o[out], unit0, n, v, dst, err);
}

static void tensor_free(void *ts) {
    (void)ts;
}

static void end(void *ms) {
    hf_conv_free(ms);
}

static int writer_options(void *ms, const char *const **options, size_t *n, amn_error *err) {
    (void)err;
    hf_conv *c = ms;
    *options = c->writer_opts;
    *n = 1;
    return AMN_OK;
}

static int metadata(void *ms, const amn_model **kvs, amn_error *err) {
    (void)err;
    *kvs = ((hf_conv *)ms)->kv;
    return AMN_OK;
}

static const char *const targets[] = {"hf-f32",   "hf-f16",   "hf-bf16", "hf-q8_0",
                                      "hf-tq1_0", "hf-tq2_0", "hf-auto", NULL};

static const amn_encoder hf_encoder = {
    .struct_size = sizeof(amn_encoder),
    .targets = targets,
    .begin = begin,
    .tensor = tensor,
    .fill = fill,
    .tensor_free = tensor_free,
    .end = end,
    .writer_options = writer_options,
    .metadata = metadata,
};

/* Claims nothing: an empty key list lets the core skip detect(). */
static const amn_detect_key no_keys[] = {{NULL, 0}};

static const amn_scheme hf_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "hf",
    .description = "Hugging Face model folders to GGUF as llama.cpp's convert_hf_to_gguf.py",
    .detect = detect,
    .dequantize = dequantize,
    .encoder = &hf_encoder,
    .detect_keys = no_keys,
};

/* The reverse: scheme "hfdir" encodes a GGUF as a Hugging Face folder's
 * safetensors (targets hfdir, hfdir-f32, hfdir-f16, hfdir-bf16; `amn
 * convert MODEL.gguf --to hf` picks them), its config() giving the folder's
 * other files (hf_rev.h). */
static int rev_begin(const amn_encode_options *o, const amn_encode_source *src, size_t n,
                     void **model_state, amn_error *err) {
    hf_rev *r;
    int rc = hf_rev_new(o, src, n, &r, err);
    *model_state = rc ? NULL : r;
    return rc;
}

static int rev_tensor(void *ms, size_t i, amn_encode_out *outs, size_t *n_outs, void **ts,
                      amn_error *err) {
    hf_rev *r = ms;
    if (i >= r->n_src) return amn_error_set(err, AMN_E_INVALID, "hf: bad tensor index");
    const hf_rslot *sl = &r->slots[i];
    *ts = (void *)sl;
    if (!sl->n) {
        *n_outs = AMN_ENCODE_DROP;
        return AMN_OK;
    }
    for (size_t k = 0; k < sl->n; k++) {
        const hf_rout *t = &sl->o[k];
        outs[k].name = t->name;
        outs[k].dtype = t->dtype;
        outs[k].ndim = t->ndim;
        memcpy(outs[k].shape, t->shape, sizeof outs[k].shape);
        outs[k].nbytes = t->nbytes;
        outs[k].unit_bytes = t->rows ? t->nbytes / t->rows : 1;
        if (!outs[k].unit_bytes) outs[k].unit_bytes = 1;
    }
    *n_outs = sl->n;
    return AMN_OK;
}

static int rev_fill(const void *ts, size_t out, uint64_t unit0, uint64_t n, const amn_values *v,
                    void *dst, double *abs_err, amn_error *err) {
    const hf_rslot *sl = ts;
    if (abs_err) *abs_err = 0;
    if (out >= sl->n) return amn_error_set(err, AMN_E_INVALID, "hf: bad output index");
    return hf_rev_fill(&sl->o[out], unit0, n, v, dst, err);
}

static int rev_config(void *ms, char **json, amn_error *err) {
    return hf_rev_files(ms, json, err);
}

static void rev_end(void *ms) {
    hf_rev_free(ms);
}

static const char *const rev_targets[] = {"hfdir", "hfdir-f32", "hfdir-f16", "hfdir-bf16", NULL};

static const amn_encoder rev_encoder = {
    .struct_size = sizeof(amn_encoder),
    .targets = rev_targets,
    .begin = rev_begin,
    .tensor = rev_tensor,
    .fill = rev_fill,
    .tensor_free = tensor_free,
    .config = rev_config,
    .end = rev_end,
};

static const amn_scheme rev_scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "hfdir",
    .description = "GGUF models to Hugging Face model folders",
    .detect = detect,
    .dequantize = dequantize,
    .encoder = &rev_encoder,
    .detect_keys = no_keys,
};

static int init(amn_registrar *r) {
    int rc = amn_register_scheme(r, &hf_scheme);
    return rc ? rc : amn_register_scheme(r, &rev_scheme);
}

AMN_PLUGIN_DEFINE(hf, AMN_VERSION_STRING,
                  "Hugging Face model folders to GGUF (llama.cpp's converter, byte for byte)",
                  "MIT", init);
