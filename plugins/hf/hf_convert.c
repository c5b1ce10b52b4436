/* Planning a model folder's conversion (hf_convert.h): the converter's
 * tensor order, names, types and transforms, checked against config.json,
 * and its key/values. */
#include "hf_convert.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/checked.h"
#include "amn/kit/json_file.h"
#include "amn/kit/model_dir.h"
#include "hf_config.h"
#include "hf_kv.h"
#include "hf_meta.h"
#include "hf_params.h"
#include "hf_parts.h"
#include "hf_vocab.h"

#define CONFIG_MAX_BYTES (16u << 20)

/* llama_ftype of each --outtype (llama.h). */
static uint32_t ftype_of(hf_outtype t) {
    switch (t) {
    case HF_OUT_F32:
        return 0;
    case HF_OUT_F16:
        return 1;
    case HF_OUT_Q8_0:
        return 7;
    case HF_OUT_TQ1_0:
        return 36;
    case HF_OUT_TQ2_0:
        return 37;
    default:
        return 32;
    }
}

void hf_conv_free(hf_conv *c) {
    if (!c) return;
    amn_model_free(c->kv);
    free(c->outs);
    free(c->outs2);
    free(c->layer_exps);
    free(c->slots);
    free(c->stacks);
    free(c->stack_src);
    free(c->extra_val[0]);
    free(c->extra_val[1]);
    free(c->order);
    free(c);
}

static int read_json(const char *dir, const char *file, bool required, const amn_limits *lim,
                     json_object **out, amn_error *err) {
    char path[4096];
    *out = NULL;
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path)
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", dir);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (!required) return AMN_OK;
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s has no %s: not a Hugging Face model folder", dir,
                             file);
    }
    const amn_kit_json_caps caps = hf_json_caps(lim, CONFIG_MAX_BYTES);
    return amn_kit_json_read_object(path, NULL, &caps, out, err);
}

/* ---- outputs ---- */

typedef struct by_name {
    const char *name;
    size_t i;
} by_name;

static int cmp_by_name(const void *a, const void *b) {
    return strcmp(((const by_name *)a)->name, ((const by_name *)b)->name);
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* prepare_tensors' choice of type: F32 for 1-D tensors, norms, routers
 * and non-weights; F16 for the embeddings and the output under the
 * ternary types; else the outtype, a block type falling back to F16 when
 * rows do not split into its blocks (gguf-py's QuantError). */
static void choose_type(hf_out *o, hf_outtype t) {
    static const struct {
        hf_outtype t;
        uint32_t block, values, bytes;
    } blocks[] = {{HF_OUT_Q8_0, HF_Q8_0, 32, 34},
                  {HF_OUT_TQ1_0, HF_TQ1_0, 256, 54},
                  {HF_OUT_TQ2_0, HF_TQ2_0, 256, 66}};
    const bool f32 = o->ndim <= 1 || ends_with(o->name, "_norm.weight") ||
                     strstr(o->name, ".ffn_gate_inp.weight") ||
                     strstr(o->name, ".ffn_gate_inp_shexp.weight") ||
                     !ends_with(o->name, ".weight");
    const bool ternary = t == HF_OUT_TQ1_0 || t == HF_OUT_TQ2_0;
    if (ternary &&
        (strcmp(o->name, "token_embd.weight") == 0 || strcmp(o->name, "output.weight") == 0))
        t = HF_OUT_F16; /* "TODO: use Q4_K and Q6_K" there */
    uint64_t numel = 1;
    for (uint32_t d = 0; d < o->ndim; d++) numel *= o->shape[d];
    for (size_t k = 0; !f32 && k < sizeof blocks / sizeof *blocks; k++)
        if (t == blocks[k].t && o->shape[o->ndim - 1] % blocks[k].values == 0) {
            o->dtype = AMN_DTYPE_BLOCK;
            o->block = blocks[k].block;
            o->nbytes = numel / blocks[k].values * blocks[k].bytes;
            return;
        }
    if (f32 || t == HF_OUT_F32) {
        o->dtype = AMN_DTYPE_F32;
    } else if (t == HF_OUT_BF16) {
        o->dtype = AMN_DTYPE_BF16;
    } else {
        o->dtype = AMN_DTYPE_F16;
    }
    o->nbytes = numel * amn_dtype_size(o->dtype);
}

uint64_t hf_unit_bytes(const hf_out *t) {
    return t->nbytes / t->rows;
}

/* The permutation's head count, checked against the tensor's rows. */
static int check_permute(hf_out *o, const char *hf_name, const hf_params *p, amn_error *err) {
    if (o->xform != HF_X_PERMUTE_Q && o->xform != HF_X_PERMUTE_K) return AMN_OK;
    const uint32_t nh =
        o->xform == HF_X_PERMUTE_K && p->n_head_kv != p->n_head ? p->n_head_kv : p->n_head;
    if (!nh || o->rows % (2ull * nh) != 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json says %u %s heads but %s has %llu rows (not a multiple "
                             "of 2 x heads)",
                             nh, o->xform == HF_X_PERMUTE_K ? "key/value" : "attention", hf_name,
                             (unsigned long long)o->rows);
    o->n_head = nh;
    return AMN_OK;
}

/* Tensors the converter never writes: its skip list (prepare_tensors) and
 * the multimodal parts TextModel.filter_tensors drops, and the family's own. */
static bool filtered(const hf_arch *a, const char *name) {
    static const char *const prefixes[] = {
        "mlp",     "vit.",       "vpm.",           "siglip2.",          "conformer.",
        "merger.", "resampler.", "sound_encoder.", "sound_projection.", "speech_embeddings.",
        NULL};
    static const char *const parts[] = {"visual.",          "vision.",
                                        "audio.",           "talker.",
                                        "vision_",          "audio_",
                                        "token2wav.",       "code2wav.",
                                        "projector.",       "pre_mm_projector_norm",
                                        "image_newline",    "view_seperator",
                                        "patch_embed",      "patch_embedding",
                                        "patch_merger.",    "patch_merge_mlp.",
                                        "model.connector.", NULL};
    if (ends_with(name, ".attention.masked_bias") || ends_with(name, ".attention.bias") ||
        ends_with(name, ".rotary_emb.inv_freq"))
        return true;
    if ((a->flags & HF_A_SKIP_LM_HEAD) && strcmp(name, "lm_head.weight") == 0) return true;
    for (const char *const *p = prefixes; *p; p++)
        if (strncmp(name, *p, strlen(*p)) == 0) return true;
    for (const char *const *p = parts; *p; p++)
        if (strstr(name, *p)) return true;
    return false;
}

/* The dtype the folder stores a tensor in (src[].dtype is what the core
 * would write: a 1-D tensor there already reads F32). */
static amn_dtype stored_dtype(const hf_conv *c, const amn_encode_source *s) {
    /* A quantized weight reaches the plan dequantized, as F32 values (the
     * converter's own dequantization also yields float32). */
    if (s->dequantized) return AMN_DTYPE_F32;
    const int64_t i = c->model ? amn_model_find(c->model, s->name) : -1;
    return i >= 0 ? amn_model_tensor(c->model, (size_t)i)->dtype : s->dtype;
}

/* --outtype auto (LlamaFileType.GUESSED in ModelBase.__init__): bf16 or
 * f16 after the first tensor of two or more dimensions, in the converter's
 * order, that is BF16 or F16 (F32 ones, and a quantized folder's integer
 * parts, are passed over: the converter sees those dequantized, as F32);
 * f16 where none is. */
static int guess_outtype(hf_conv *c, const char *dir, amn_error *err) {
    hf_names order = {0};
    int rc = hf_tensor_order(c->model, dir, c->lim, &order, err);
    c->outtype = HF_OUT_F16;
    for (size_t i = 0; !rc && i < order.n; i++) {
        const int64_t k = filtered(c->arch, order.v[i]) ? -1 : amn_model_find(c->model, order.v[i]);
        const amn_tensor *t = k >= 0 ? amn_model_tensor(c->model, (size_t)k) : NULL;
        if (!t || t->ndim < 2 || (t->dtype != AMN_DTYPE_BF16 && t->dtype != AMN_DTYPE_F16))
            continue;
        c->outtype = t->dtype == AMN_DTYPE_BF16 ? HF_OUT_BF16 : HF_OUT_F16;
        break;
    }
    hf_names_free(&order);
    return rc;
}

/* A decimal number as the converter formats one (no sign, no leading
 * zero), at most 9 digits; *p moves past it. */
static bool number(const char **p, int *v) {
    const char *s = *p;
    int n = 0;
    while (s[n] >= '0' && s[n] <= '9') n++;
    if (n == 0 || n > 9 || (n > 1 && s[0] == '0')) return false;
    *v = 0;
    for (int k = 0; k < n; k++) *v = *v * 10 + (s[k] - '0');
    *p = s + n;
    return true;
}

static bool skip(const char **p, const char *lit) {
    const size_t n = strlen(lit);
    if (strncmp(*p, lit, n) != 0) return false;
    *p += n;
    return true;
}

/* "model.layers.B.<mid>X.<proj>.weight": layer, expert, projection (1..3). */
static bool expert_name(const hf_experts *e, const char *name, int *b, int *x, int *w) {
    const char *p = name;
    if (!skip(&p, "model.layers.") || !number(&p, b) || !skip(&p, ".") || !skip(&p, e->mid) ||
        !number(&p, x) || !skip(&p, "."))
        return false;
    for (int k = 0; k < 3; k++) {
        const char *q = p;
        if (skip(&q, e->proj[k]) && strcmp(q, ".weight") == 0) {
            *w = k + 1;
            return true;
        }
    }
    return false;
}

/* "model.layers.B.<mid><fused name>[.weight]": layer, and which of the
 * family's fused tensors (-1: none). */
static int fused_name(const hf_experts *e, const char *name, int *b) {
    const char *p = name;
    if (!e->fused || !skip(&p, "model.layers.") || !number(&p, b) || !skip(&p, ".") ||
        !skip(&p, e->mid))
        return -1;
    for (int f = 0; e->fused[f].name; f++) {
        const char *q = p;
        if (skip(&q, e->fused[f].name) && (!*q || strcmp(q, ".weight") == 0)) return f;
    }
    return -1;
}

static bool float_dtype(amn_dtype d) {
    return d == AMN_DTYPE_F32 || d == AMN_DTYPE_F16 || d == AMN_DTYPE_BF16;
}

/* The folder's own float tensor behind a source that is not dequantized,
 * else NULL. */
static const amn_tensor *stored(const hf_conv *c, const amn_encode_source *s) {
    const int64_t i = s->dequantized || !c->model ? -1 : amn_model_find(c->model, s->name);
    const amn_tensor *t = i >= 0 ? amn_model_tensor(c->model, (size_t)i) : NULL;
    return t && float_dtype(t->dtype) && t->data ? t : NULL;
}

/* Layer b's projection w (0..2) written: once only, however the folder
 * holds it (one tensor per expert, or stacked). */
static int once(hf_conv *c, int b, unsigned w, amn_error *err) {
    uint8_t *done = &c->layer_exps[b];
    if (*done & (1u << w))
        return amn_error_set(err, AMN_E_PARSE,
                             "layer %d holds its experts' %s twice (one tensor per expert and "
                             "stacked)",
                             b, c->arch->experts->proj[w]);
    *done |= (uint8_t)(1u << w);
    return AMN_OK;
}

/* A layer's experts already stacked in one 3-D tensor [experts, rows,
 * cols], holding one projection or two (halves of each expert's rows):
 * an output per projection, in the table's order (gate, then up). */
static int fused_source(hf_conv *c, size_t i, const amn_encode_source *s, int b, int f,
                        amn_error *err) {
    const hf_experts *e = c->arch->experts;
    const hf_fused_experts *fx = &e->fused[f];
    if ((uint32_t)b >= c->n_layers)
        return amn_error_set(err, AMN_E_PARSE, "tensor %s: no layer %d below %u", s->name, b,
                             c->n_layers);
    if (s->ndim != 3 || !float_dtype(s->dtype))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: expert tensor %s (%s, %u-D; 3-D F32, F16 or BF16 "
                             "[experts, rows, columns] expected)",
                             s->name, amn_dtype_name(s->dtype), s->ndim);
    if (!c->cfg_experts || s->shape[0] != c->cfg_experts)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json says %llu experts (%s) but %s stacks %llu",
                             (unsigned long long)c->cfg_experts, c->expert_key, s->name,
                             (unsigned long long)s->shape[0]);
    if (s->shape[1] == 0 || s->shape[1] % fx->n != 0 || s->shape[2] == 0)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s: %llu rows per expert do not split into %u projections",
                             s->name, (unsigned long long)s->shape[1], fx->n);
    for (uint32_t k = 0; k < fx->n; k++) {
        int rc = once(c, b, fx->proj[k], err);
        if (rc) return rc;
        hf_out *o = k ? &c->outs2[i] : &c->outs[i];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "blk.%d.%s.weight", b, e->gguf[fx->proj[k]]);
        o->src = stored_dtype(c, s);
        o->ndim = 3;
        o->shape[0] = s->shape[0];
        o->shape[1] = s->shape[1] / fx->n;
        o->shape[2] = s->shape[2];
        o->cols = o->shape[2];
        o->rows = o->shape[0] * o->shape[1];
        if (fx->n > 1) {
            o->part_rows = o->shape[1];
            o->part_stride = s->shape[1];
            o->part_off = k * o->shape[1];
        }
        choose_type(o, c->outtype);
        c->slots[i].o[c->slots[i].n++] = o;
    }
    return AMN_OK;
}

/* One expert's tensor: folded into its layer's stacked output
 * (LlamaModel.modify_tensors, Qwen2MoeModel.modify_tensors); or a fused
 * layer's (fused_source). */
static int expert_source(hf_conv *c, size_t i, const amn_encode_source *s, amn_error *err) {
    const hf_experts *e = c->arch->experts;
    hf_out *o = &c->outs[i];
    int b, x, w;
    const int f = fused_name(e, s->name, &b);
    if (f >= 0) return fused_source(c, i, s, b, f, err);
    if (!expert_name(e, s->name, &b, &x, &w))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s: not one expert's %s, %s or %s weight "
                             "(model.layers.N.%sX.%s.weight)%s",
                             s->name, e->proj[0], e->proj[1], e->proj[2], e->mid, e->proj[0],
                             e->fused ? " nor a layer's stacked ones" : "");
    if (!c->n_experts)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s is an expert but config.json's %s x "
                             "num_hidden_layers does not fit the folder's tensors",
                             s->name, e->count_keys[0]);
    if ((uint32_t)b >= c->n_layers || (uint64_t)x >= c->n_experts)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s: not an expert of a layer below %u and an expert below "
                             "%llu (config.json's %s)",
                             s->name, c->n_layers, (unsigned long long)c->n_experts, c->expert_key);
    if (s->ndim != 2 || !float_dtype(s->dtype))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: expert tensor %s (%s, %u-D)",
                             s->name, amn_dtype_name(s->dtype), s->ndim);
    o->drop = true;
    o->bid = b, o->xid = x, o->wid = w;
    o->src = stored_dtype(c, s);
    o->ndim = 2;
    o->shape[0] = s->shape[0];
    o->shape[1] = s->shape[1];
    return AMN_OK;
}

/* ModelBase.filter_tensors' renames into out: a trailing
 * "e_score_correction_bias" as "e_score_correction.bias", and every
 * "language_model." (a multimodal wrapper's) removed; then the family's
 * own (hf_arch.renames). */
static bool filter_name(const hf_arch *a, const char *name, char *out, size_t size) {
    static const char cut[] = "language_model.", bias[] = "e_score_correction_bias";
    const size_t n = strlen(name), nb = sizeof bias - 1;
    const size_t at = n >= nb && strcmp(name + n - nb, bias) == 0 ? n - 5 : SIZE_MAX; /* "_bias" */
    size_t w = 0;
    for (const char *r = name; *r; r++) {
        if (strncmp(r, cut, sizeof cut - 1) == 0) {
            r += sizeof cut - 2;
            continue;
        }
        if (w + 1 >= size) return false;
        out[w++] = (size_t)(r - name) == at ? '.' : *r;
    }
    out[w] = '\0';
    for (const hf_rename *r = a->renames; r && r->from; r++) {
        const size_t f = strlen(r->from), t = strlen(r->to);
        if (w < f || strcmp(out + w - f, r->from) != 0) continue;
        if (w - f + t >= size) return false;
        memcpy(out + w - f, r->to, t + 1);
        break;
    }
    return true;
}

/* What the family leaves out besides filtered(): multi-token prediction
 * layers (DeepseekV2Model.modify_tensors: "model.layers.N" at or past the
 * block count, experts included), a tied lm_head. */
static bool skipped(const hf_conv *c, const char *name, const hf_params *p) {
    const uint32_t f = c->arch->flags;
    if ((f & HF_A_TIED_LM_HEAD) && p->tied &&
        (strcmp(name, "lm_head.weight") == 0 || strcmp(name, "model.lm_head.weight") == 0))
        return true;
    const char *q = name;
    int b;
    return (f & HF_A_SKIP_MTP) && skip(&q, "model.layers.") && number(&q, &b) &&
           (uint32_t)b >= c->n_layers;
}

/* The largest part of kv_b_proj transposed at once (a head's k rows x the
 * latent rank, F32): real models hold 128 x 512. */
#define MLA_GROUP_MAX (64u << 20)

/* name with its first `whole` as `part` ("kv_b_proj" as "k_b_proj"),
 * mapped. */
static int part_name(const hf_conv *c, const char *name, const char *whole, const char *part,
                     hf_out *o, amn_error *err) {
    const char *at = strstr(name, whole);
    char renamed[600];
    snprintf(renamed, sizeof renamed, "%.*s%s%s", (int)(at - name), name, part, at + strlen(whole));
    uint8_t x;
    if (!hf_arch_map(c->arch, renamed, o->name, sizeof o->name, &x))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: tensor %s has no GGUF name",
                             renamed);
    return AMN_OK;
}

/* DeepseekV2Model.modify_tensors: kv_b_proj [heads x (nope + v), rank],
 * seen as [heads, nope + v, rank], becomes k_b = each head's first nope
 * rows transposed ([heads, rank, nope]) and v_b = its other v rows
 * ([heads, v, rank]). The head count is config.json's num_key_value_heads
 * (tensors are planned before set_gguf_parameters writes one KV head). */
static int mla_split(hf_conv *c, size_t i, const char *name, const char *filtered_name,
                     const hf_params *p, amn_error *err) {
    hf_out *k = &c->outs[i], *v = &c->outs2[i];
    uint32_t nope = 0, vd = 0;
    int r = hf_get_u32(p->cfg, (const char *const[]){"qk_nope_head_dim", NULL}, &nope, err);
    if (r >= 0 && r) r = hf_get_u32(p->cfg, (const char *const[]){"v_head_dim", NULL}, &vd, err);
    if (r < 0) return r;
    if (!r || !p->has_head_kv || !nope || !vd)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json: %s is split by num_key_value_heads, qk_nope_head_dim "
                             "and v_head_dim, which it does not give",
                             name);
    const uint64_t per = (uint64_t)nope + vd, rank = k->ndim == 2 ? k->shape[1] : 0;
    if (k->ndim != 2 || k->shape[0] != (uint64_t)p->n_head_kv * per)
        return amn_error_set(err, AMN_E_PARSE,
                             "config.json says %u key/value heads of %u + %u rows "
                             "(qk_nope_head_dim + v_head_dim) but %s has %llu rows",
                             p->n_head_kv, nope, vd, name,
                             (unsigned long long)(k->ndim ? k->shape[0] : 0));
    if ((uint64_t)nope * rank > MLA_GROUP_MAX / sizeof(float))
        return amn_error_set(err, AMN_E_LIMIT, "%s: a head's %u x %llu values to transpose", name,
                             nope, (unsigned long long)rank);
    *v = *k;
    int rc = part_name(c, filtered_name, "kv_b_proj", "k_b_proj", k, err);
    if (!rc) rc = part_name(c, filtered_name, "kv_b_proj", "v_b_proj", v, err);
    if (rc) return rc;
    k->ndim = v->ndim = 3;
    k->shape[0] = v->shape[0] = p->n_head_kv;
    k->shape[1] = rank, k->shape[2] = nope;
    v->shape[1] = vd, v->shape[2] = rank;
    k->xform = HF_X_TRANSPOSE, v->xform = HF_X_NONE;
    k->part_rows = nope, v->part_rows = vd;
    k->part_stride = v->part_stride = per;
    k->part_off = 0, v->part_off = nope;
    k->cols = nope, k->rows = (uint64_t)p->n_head_kv * rank;
    v->cols = rank, v->rows = (uint64_t)p->n_head_kv * vd;
    choose_type(k, c->outtype);
    choose_type(v, c->outtype);
    c->slots[i].o[c->slots[i].n++] = k;
    c->slots[i].o[c->slots[i].n++] = v;
    return AMN_OK;
}

/* GptOssModel.modify_tensors: down_proj [experts, ff, hidden] transposed
 * per expert ([experts, hidden, ff]); its bias as it is. */
static int expert_transposed(hf_out *o, const char *name, amn_error *err) {
    if (!ends_with(name, ".weight")) return AMN_OK;
    if (o->ndim != 3)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s: %u-D (3-D [experts, rows, columns] "
                             "expected)",
                             name, o->ndim);
    const uint64_t r = o->shape[1];
    o->shape[1] = o->shape[2], o->shape[2] = r;
    o->xform = HF_X_TRANSPOSE;
    o->part_rows = o->part_stride = r, o->part_off = 0;
    return AMN_OK;
}

/* GptOssModel.modify_tensors: gate_up_proj [experts, hidden, 2 x ff]
 * transposed per expert, then its even rows the gate and odd rows up
 * ([experts, ff, hidden] each); its bias [experts, 2 x ff] split so
 * along the last dimension. */
static int gate_up_split(hf_conv *c, size_t i, const char *name, const char *filtered_name,
                         amn_error *err) {
    hf_out *g = &c->outs[i], *u = &c->outs2[i];
    const bool weight = ends_with(filtered_name, ".weight");
    const uint32_t nd = weight ? 3 : 2;
    if (g->ndim != nd || g->shape[nd - 1] % 2)
        return amn_error_set(err, AMN_E_PARSE,
                             "tensor %s: %u-D with %llu values along the last dimension (%u-D, "
                             "gate and up alternating, expected)",
                             name, g->ndim, (unsigned long long)g->shape[g->ndim - 1], nd);
    const uint64_t two_ff = g->shape[nd - 1], rows = g->shape[1];
    *u = *g;
    int rc = part_name(c, filtered_name, "gate_up_proj", "gate_proj", g, err);
    if (!rc) rc = part_name(c, filtered_name, "gate_up_proj", "up_proj", u, err);
    if (rc) return rc;
    hf_out *const both[2] = {g, u};
    for (int k = 0; k < 2; k++) {
        hf_out *o = both[k];
        o->xform = HF_X_NONE;
        o->col_step = 2, o->col_off = (uint64_t)k, o->src_cols = two_ff;
        if (weight) { /* [E, hidden, 2ff] -> [E, ff, hidden] */
            o->shape[1] = two_ff / 2, o->shape[2] = rows;
            o->xform = HF_X_TRANSPOSE;
            o->part_rows = o->part_stride = rows, o->part_off = 0;
            o->cols = rows, o->rows = o->shape[0] * o->shape[1];
        } else { /* [E, 2ff] -> [E, ff] */
            o->shape[1] = two_ff / 2;
            o->cols = o->shape[1], o->rows = o->shape[0];
        }
        choose_type(o, c->outtype);
        c->slots[i].o[c->slots[i].n++] = o;
    }
    return AMN_OK;
}

/* A quantized weight's packed part "<name><suffix>": U8 of ndim dimensions,
 * else NULL. */
static const amn_tensor *packed_part(const hf_conv *c, const char *name, const char *suffix,
                                     uint32_t ndim) {
    char part[600];
    snprintf(part, sizeof part, "%s%s", name, suffix);
    const int64_t k = c->model ? amn_model_find(c->model, part) : -1;
    const amn_tensor *t = k >= 0 ? amn_model_tensor(c->model, (size_t)k) : NULL;
    return t && t->dtype == AMN_DTYPE_U8 && t->ndim == ndim ? t : NULL;
}

/* GptOssModel.generate_extra_tensors: MXFP4 experts ("<name>_blocks"
 * [experts, rows, groups, 16] of E2M1 pairs, "<name>_scales" [experts,
 * rows, groups] of E8M0) written as GGUF MXFP4 blocks, repacked, not
 * dequantized: down_proj as it is, gate_up_proj's even rows the gate and
 * odd rows up (its blocks' rows are the output's already). */
static int mxfp4_repack(hf_conv *c, size_t i, const amn_encode_source *s, const char *name,
                        amn_error *err) {
    const amn_tensor *b = packed_part(c, s->name, "_blocks", 4);
    const amn_tensor *q = packed_part(c, s->name, "_scales", 3);
    if (!b || !q || !ends_with(name, ".weight"))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s is quantized other than as gpt-oss's MXFP4 blocks "
                             "and scales, which is all the converter takes there",
                             s->name);
    const bool split = c->outs[i].xform == HF_X_GATE_UP_ALT;
    const uint64_t e = b->shape[0], r = b->shape[1], g = b->shape[2];
    if (b->shape[3] != 16 || q->shape[0] != e || q->shape[1] != r || q->shape[2] != g || !g ||
        (split && r % 2))
        return amn_error_set(err, AMN_E_PARSE,
                             "%s_blocks and %s_scales do not fit ([experts, rows, groups, 16] and "
                             "[experts, rows, groups]%s)",
                             s->name, s->name, split ? ", gate and up rows alternating" : "");
    for (int k = 0; k < (split ? 2 : 1); k++) {
        hf_out *o = k ? &c->outs2[i] : &c->outs[i];
        if (k) *o = c->outs[i];
        if (split) {
            int rc = part_name(c, name, "gate_up_proj", k ? "up_proj" : "gate_proj", o, err);
            if (rc) return rc;
            o->part_rows = 1, o->part_stride = 2, o->part_off = (uint64_t)k;
        }
        o->xform = HF_X_NONE;
        o->dtype = AMN_DTYPE_BLOCK, o->block = HF_MXFP4;
        o->ndim = 3;
        o->shape[0] = e, o->shape[1] = split ? r / 2 : r, o->shape[2] = g * 32;
        o->rows = e * o->shape[1], o->cols = g * 32;
        o->nbytes = o->rows * g * 17;
        o->mx_blocks = b, o->mx_scales = q, o->mx_groups = g;
        c->slots[i].o[c->slots[i].n++] = o;
    }
    return AMN_OK;
}

static int map_source(hf_conv *c, size_t i, const amn_encode_source *s, const hf_params *p,
                      amn_error *err) {
    hf_out *o = &c->outs[i];
    if (filtered(c->arch, s->name) || skipped(c, s->name, p)) {
        o->drop = true;
        return AMN_OK;
    }
    if (c->arch->experts && strstr(s->name, c->arch->experts->detect))
        return expert_source(c, i, s, err);
    char name[512];
    if (!filter_name(c->arch, s->name, name, sizeof name))
        return amn_error_set(err, AMN_E_LIMIT, "tensor name %.100s... too long", s->name);
    if (!hf_arch_map(c->arch, name, o->name, sizeof o->name, &o->xform))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s has no GGUF name in llama.cpp's %s mapping",
                             s->name, c->arch->gguf_arch);
    if (!float_dtype(s->dtype))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: tensor %s is %s (the converter takes F32, F16, BF16)",
                             s->name, amn_dtype_name(s->dtype));
    if (s->ndim == 0 || s->ndim > 4)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: tensor %s has %u dimensions",
                             s->name, s->ndim);
    o->src = stored_dtype(c, s);
    o->ndim = s->ndim;
    uint64_t numel = 1;
    for (uint32_t d = 0; d < s->ndim; d++) {
        o->shape[d] = s->shape[d];
        if (!amn_mul_u64(numel, s->shape[d], &numel))
            return amn_error_set(err, AMN_E_PARSE, "tensor %s: shape overflows", s->name);
    }
    if (numel == 0) return amn_error_set(err, AMN_E_PARSE, "tensor %s: no elements", s->name);
    if (o->xform == HF_X_MLA_KV_B) {
        if (ends_with(name, ".weight")) return mla_split(c, i, s->name, name, p, err);
        o->xform = HF_X_NONE; /* only the weight is split */
    }
    if ((o->xform == HF_X_EXPERT_T || o->xform == HF_X_GATE_UP_ALT) && s->dequantized)
        return mxfp4_repack(c, i, s, name, err);
    if (o->xform == HF_X_GATE_UP_ALT || o->xform == HF_X_EXPERT_T) o->raw = stored(c, s);
    if (o->xform == HF_X_GATE_UP_ALT) return gate_up_split(c, i, s->name, name, err);
    if (o->xform == HF_X_EXPERT_T) {
        o->xform = HF_X_NONE;
        int rc = expert_transposed(o, name, err);
        if (rc) return rc;
    }
    if ((c->arch->flags & HF_A_NORM_PLUS1) && ends_with(name, "norm.weight")) o->xform = HF_X_PLUS1;
    if ((c->arch->flags & HF_A_TRIM_VOCAB) && strstr(name, "embed_tokens.weight")) {
        if (c->vocab_rows == 0 || s->ndim < 1)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: %s needs the tokenizer's size (amn-hf built "
                                 "without the vocabulary)",
                                 s->name);
        if (c->vocab_rows < o->shape[0]) {
            numel = numel / o->shape[0] * c->vocab_rows;
            o->shape[0] = c->vocab_rows;
        }
    }
    /* rows of the last dimension (1-D: single values, so a permutation
     * works on a bias as on a weight's rows) */
    o->cols = o->ndim == 1 ? 1 : o->shape[o->ndim - 1];
    o->rows = numel / o->cols;
    choose_type(o, c->outtype);
    int rc = check_permute(o, s->name, p, err);
    if (!rc && strcmp(o->name, "token_embd.weight") == 0 && p->has_embd &&
        (s->ndim != 2 || s->shape[1] != p->n_embd))
        rc = amn_error_set(err, AMN_E_PARSE,
                           "config.json says hidden_size %u but %s has %llu columns", p->n_embd,
                           s->name, (unsigned long long)(s->ndim == 2 ? s->shape[1] : 0));
    return rc;
}

/* Layer b's stacked output for projection w (1..3), from its experts'
 * sources. */
static int stack_layer(hf_conv *c, uint32_t b, int w, const size_t *srcs, hf_out *t,
                       amn_error *err) {
    const hf_experts *ex = c->arch->experts;
    const hf_out *e0 = &c->outs[srcs[0]];
    for (uint64_t x = 1; x < c->n_experts; x++) {
        const hf_out *e = &c->outs[srcs[x]];
        if (e->shape[0] != e0->shape[0] || e->shape[1] != e0->shape[1] || e->src != e0->src)
            return amn_error_set(err, AMN_E_PARSE,
                                 "layer %u: experts 0 and %llu of %s differ in shape or dtype", b,
                                 (unsigned long long)x, ex->proj[w - 1]);
    }
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "blk.%u.%s.weight", b, ex->gguf[w - 1]);
    t->src = e0->src;
    t->ndim = 3;
    t->shape[0] = c->n_experts;
    t->shape[1] = e0->shape[0];
    t->shape[2] = e0->shape[1];
    t->cols = t->shape[2];
    t->rows = t->shape[0] * t->shape[1];
    t->n_stack = (uint32_t)c->n_experts;
    t->stack_src = srcs;
    choose_type(t, c->outtype);
    return AMN_OK;
}

/* An expert source seen in order: when it completes its layer (all 3 x
 * n_experts seen), the layer's three stacked outputs go to its slot. */
static int place_expert(hf_conv *c, size_t i, uint32_t *seen_in_layer, amn_error *err) {
    const hf_out *o = &c->outs[i];
    const uint32_t b = (uint32_t)o->bid;
    size_t *srcs = c->stack_src + (size_t)b * 3 * c->n_experts;
    size_t *at = &srcs[(size_t)(o->wid - 1) * c->n_experts + (size_t)o->xid];
    if (*at != SIZE_MAX)
        return amn_error_set(err, AMN_E_PARSE, "layer %u: expert %d's %s twice", b, o->xid,
                             c->arch->experts->proj[o->wid - 1]);
    *at = i;
    if (++seen_in_layer[b] < 3 * c->n_experts) return AMN_OK;
    for (int w = 1; w <= 3; w++) {
        hf_out *t = &c->stacks[(size_t)b * 3 + (size_t)(w - 1)];
        int rc = once(c, (int)b, (unsigned)(w - 1), err);
        if (!rc) rc = stack_layer(c, b, w, srcs + (size_t)(w - 1) * c->n_experts, t, err);
        if (rc) return rc;
        c->slots[i].o[c->slots[i].n++] = t;
    }
    return AMN_OK;
}

/* The source indices in the converter's order (hf_tensor_order: shards
 * sorted, names sorted within a safetensors shard, in pickle order within a
 * .bin); every source tensor exactly once. A quantized folder's
 * shards also list the parts of its weights (scales, zeros, ...), which are
 * no sources of their own: skipped; a dequantized weight whose logical name
 * the shards do not list (GPTQ's qweight) comes after the listed ones. */
static int converter_order(const hf_conv *c, const char *dir, const amn_encode_source *src,
                           size_t n, size_t *seq, amn_error *err) {
    hf_names order = {0};
    by_name *idx = malloc((n ? n : 1) * sizeof *idx);
    bool *seen = calloc(n ? n : 1, 1);
    int rc = idx && seen ? hf_tensor_order(c->model, dir, c->lim, &order, err)
                         : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) idx[i] = (by_name){src[i].name, i};
    if (!rc) qsort(idx, n, sizeof *idx, cmp_by_name);
    size_t k2 = 0;
    if (c->arch->flags & HF_A_MXFP4_FIRST) /* in the order of their scales */
        for (size_t k = 0; !rc && k < order.n; k++) {
            char whole[600];
            const size_t len = strlen(order.v[k]);
            if (len < 7 || len - 7 >= sizeof whole || strcmp(order.v[k] + len - 7, "_scales"))
                continue;
            memcpy(whole, order.v[k], len - 7);
            whole[len - 7] = '\0';
            const by_name key = {whole, 0};
            const by_name *hit = bsearch(&key, idx, n, sizeof *idx, cmp_by_name);
            if (!hit || !src[hit->i].dequantized || seen[hit->i]) continue;
            seen[hit->i] = true;
            seq[k2++] = hit->i;
        }
    for (size_t k = 0; !rc && k < order.n; k++) {
        const by_name key = {order.v[k], 0};
        const by_name *hit = bsearch(&key, idx, n, sizeof *idx, cmp_by_name);
        if (!hit && c->model && amn_model_find(c->model, order.v[k]) >= 0) continue; /* a part */
        if (!hit || seen[hit->i]) {
            rc = amn_error_set(err, AMN_E_PARSE, "tensor %s of the folder's shards is %s",
                               order.v[k], hit ? "listed twice" : "not in the model opened");
            break;
        }
        seen[hit->i] = true;
        seq[k2++] = hit->i;
    }
    for (size_t i = 0; !rc && i < n; i++) {
        if (seen[i]) continue;
        if (!src[i].dequantized) {
            rc = amn_error_set(err, AMN_E_PARSE,
                               "the folder's shards list %zu tensors, the model opened has %zu "
                               "(%s is not listed)",
                               order.n, n, src[i].name);
            break;
        }
        seq[k2++] = i;
    }
    free(idx);
    free(seen);
    hf_names_free(&order);
    return rc;
}

/* Every source's outputs, and the writer's tensor_order option listing
 * them as the converter writes them (the generated tensor first). */
static int plan_order(hf_conv *c, const char *dir, const amn_encode_source *src, size_t n,
                      const hf_params *p, amn_error *err) {
    size_t *seq = malloc((n ? n : 1) * sizeof *seq);
    uint32_t *in_layer = calloc(c->n_layers ? c->n_layers : 1, sizeof *in_layer);
    int rc = seq && in_layer ? converter_order(c, dir, src, n, seq, err)
                             : amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t len = 32;
    for (size_t e = 0; e < c->n_extra; e++) len += strlen(c->extra[e].name) + 1;
    bool host = false;
    for (size_t k = 0; !rc && k < n; k++) {
        const size_t i = seq[k];
        hf_slot *sl = &c->slots[i];
        if ((rc = map_source(c, i, &src[i], p, err))) break;
        if (c->outs[i].wid)
            rc = place_expert(c, i, in_layer, err);
        else if (!c->outs[i].drop && !sl->n) /* (a fused source's are placed) */
            sl->o[sl->n++] = &c->outs[i];
        if (!rc && sl->n && !host && c->n_extra) { /* the first output carries them */
            host = true;
            memmove(&sl->o[c->n_extra], &sl->o[0], sl->n * sizeof sl->o[0]);
            for (size_t e = 0; e < c->n_extra; e++) sl->o[e] = &c->extra[e];
            sl->n += c->n_extra;
        }
        for (size_t j = 0; j < sl->n; j++) len += strlen(sl->o[j]->name) + 1;
    }
    for (uint32_t b = 0; !rc && c->n_experts && b < c->n_layers; b++)
        if (in_layer[b] && in_layer[b] != 3 * c->n_experts)
            rc = amn_error_set(err, AMN_E_PARSE, "layer %u has %u of its %llu expert tensors", b,
                               in_layer[b], (unsigned long long)(3 * c->n_experts));
    if (!rc && !(c->order = malloc(len))) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) {
        char *w = c->order;
        w += sprintf(w, "tensor_order=");
        for (size_t k = 0; k < n; k++)
            for (size_t j = 0; j < c->slots[seq[k]].n; j++)
                w += sprintf(w, "%s,", c->slots[seq[k]].o[j]->name);
        if (w[-1] == ',') w[-1] = '\0';
        c->writer_opts[0] = c->order;
    }
    free(seq);
    free(in_layer);
    return rc;
}

/* Per-source slots, and room for the family's stacked experts. */
static int plan_experts(hf_conv *c, const hf_params *p, size_t n, amn_error *err) {
    c->n_layers = p->block_count;
    if (!(c->slots = calloc(n ? n : 1, sizeof *c->slots)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const hf_experts *ex = c->arch->experts;
    if (!ex) return AMN_OK;
    uint32_t ne = 0;
    const int r = hf_get_u32(p->cfg, ex->count_keys, &ne, err);
    if (r < 0) return r;
    c->expert_key = ex->count_keys[0];
    for (const char *const *k = ex->count_keys; r == 1 && *k; k++)
        if (json_object_object_get_ex(p->cfg, *k, NULL)) {
            c->expert_key = *k;
            break;
        }
    if (ne == 0) return AMN_OK;
    if (ne > 4096 || p->block_count > 65536)
        return amn_error_set(err, AMN_E_LIMIT, "config.json: %u experts x %u layers", ne,
                             p->block_count);
    c->cfg_experts = ne;
    if (!(c->layer_exps = calloc(p->block_count ? p->block_count : 1, 1)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const size_t n_stack = (size_t)p->block_count * 3, n_src = n_stack * ne;
    /* the stacks cannot hold many more sources than the folder has (some
     * layers may be dense, DeepSeek's first ones): a config claiming more
     * is only a key/value unless expert tensors come (a fused folder's,
     * fused_source, need no stacks) */
    if (n_src / 2 > n) return AMN_OK;
    c->n_experts = ne;
    c->stacks = calloc(n_stack ? n_stack : 1, sizeof *c->stacks);
    c->stack_src = malloc((n_src ? n_src : 1) * sizeof *c->stack_src);
    if (!c->stacks || !c->stack_src) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t k = 0; k < n_src; k++) c->stack_src[k] = SIZE_MAX;
    return AMN_OK;
}

static int parse_outtype(const char *target, hf_outtype *t, bool *guess, amn_error *err) {
    static const struct {
        const char *name;
        hf_outtype t;
    } types[] = {{"hf-f32", HF_OUT_F32},   {"hf-f16", HF_OUT_F16},     {"hf-bf16", HF_OUT_BF16},
                 {"hf-q8_0", HF_OUT_Q8_0}, {"hf-tq1_0", HF_OUT_TQ1_0}, {"hf-tq2_0", HF_OUT_TQ2_0}};
    *guess = strcmp(target, "hf-auto") == 0;
    if (*guess) return AMN_OK;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strcmp(target, types[i].name) == 0) {
            *t = types[i].t;
            return AMN_OK;
        }
    return amn_error_set(err, AMN_E_INVALID, "hf: unknown target %s", target);
}

static int find_arch(hf_conv *c, json_object *cfg, amn_error *err) {
    json_object *a, *first;
    if (!json_object_object_get_ex(cfg, "architectures", &a) ||
        !json_object_is_type(a, json_type_array) || json_object_array_length(a) < 1 ||
        !(first = json_object_array_get_idx(a, 0)) || !json_object_is_type(first, json_type_string))
        return amn_error_set(err, AMN_E_PARSE, "config.json: no \"architectures\" list of names");
    const char *name = json_object_get_string(first);
    if ((c->arch = hf_arch_find(name))) return AMN_OK;
    char list[1024];
    hf_arch_list(list, sizeof list);
    return amn_error_set(err, AMN_E_UNSUPPORTED,
                         "unsupported: architecture %.200s has no table in amn-hf (supported: %s)",
                         name, list);
}

/* The key/values in the order ModelBase.write() sets them. */
/* general.file_type: the --outtype's, but MOSTLY_MXFP4_MOE (38) for a
 * float outtype where config.json's quantization_config says "mxfp4"
 * (ModelBase.prepare_metadata). */
static uint32_t file_type(const hf_conv *c, json_object *cfg) {
    json_object *q = NULL, *m = NULL;
    const bool mxfp4 = json_object_object_get_ex(cfg, "quantization_config", &q) &&
                       json_object_is_type(q, json_type_object) &&
                       json_object_object_get_ex(q, "quant_method", &m) &&
                       json_object_is_type(m, json_type_string) &&
                       strcmp(json_object_get_string(m), "mxfp4") == 0;
    const bool flt =
        c->outtype == HF_OUT_F32 || c->outtype == HF_OUT_F16 || c->outtype == HF_OUT_BF16;
    return mxfp4 && flt ? 38 : ftype_of(c->outtype);
}

static int plan_kv(hf_conv *c, const char *dir, json_object *cfg, const hf_params *p,
                   amn_error *err) {
    /* gguf-py's get_total_parameter_count over what is written: a tensor
     * named "*_exps.*" of 3 or more dimensions counts one expert's share */
    uint64_t total = 0, shared = 0, expert = 0, expert_sum = 0, n_exps = 0;
    for (size_t i = 0; i < c->n_src; i++)
        for (size_t j = 0; j < c->slots[i].n; j++) {
            const hf_out *t = c->slots[i].o[j];
            uint64_t numel = 1;
            for (uint32_t d = 0; d < t->ndim; d++) numel *= t->shape[d];
            total += numel;
            if (strstr(t->name, "_exps.") && t->ndim >= 3 && t->shape[0]) {
                expert += numel / t->shape[0];
                expert_sum += t->shape[0];
                n_exps++;
            } else {
                shared += numel;
            }
        }
    char label[64];
    if (n_exps && expert_sum / n_exps) {
        char one[48];
        hf_meta_size_label(shared + expert, one, sizeof one);
        snprintf(label, sizeof label, "%llux%s", (unsigned long long)(expert_sum / n_exps), one);
    } else {
        hf_meta_size_label(total, label, sizeof label);
    }
    json_object *gen = NULL;
    int rc = read_json(dir, "generation_config.json", false, c->lim, &gen, err);
    if (rc) { /* the converter ignores an unreadable generation_config.json */
        gen = NULL;
        rc = AMN_OK;
    }
    if (!(c->kv = amn_model_new("hf"))) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    hf_kvs l;
    if (!rc) rc = hf_kvs_init(&l, c->kv, err);
    if (rc) {
        json_object_put(gen);
        return rc;
    }
    l.arch = c->arch->gguf_arch;
    rc = hf_kv_str(&l, "general.architecture", c->arch->gguf_arch, err);
    /* set while the converter prepares its tensors, before the rest */
    if (!rc && c->has_attn_factor)
        rc = hf_kv_arch_f32(&l, "rope.scaling.attn_factor", c->attn_factor, err);
    if (!rc) rc = hf_kv_str(&l, "general.type", "model", err);
    if (!rc) rc = hf_meta_general(&l, dir, cfg, gen, total, label, err);
    if (!rc) rc = hf_params_kv(&l, c->arch, p, file_type(c, cfg), err);
    if (!rc) rc = hf_kv_u32(&l, "general.quantization_version", 2, err);
    if (!rc) rc = hf_kvs_flush(&l, c->kv, err);
    if (!rc) rc = hf_vocab_add(c->kv, dir, c->arch->vocab_family, p->vocab_size, c->lim, err);
    hf_kvs_free(&l);
    json_object_put(gen);
    return rc;
}

int hf_conv_new(const amn_encode_options *o, const amn_encode_source *src, size_t n, hf_conv **out,
                amn_error *err) {
    *out = NULL;
    /* A packed model folder's companion files are extracted into a
     * temporary folder for the planning, the only step that reads them. */
    amn_kit_model_dir md;
    int rc = amn_kit_model_dir_open(o->model, &md, err);
    if (rc) return rc;
    const char *dir = md.path;
    struct stat st;
    if (!dir || stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        amn_kit_model_dir_close(&md);
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s converts a Hugging Face model folder, not %s",
                             o->target, dir ? dir : "a stream");
    }
    const char *arch = amn_model_archive(o->model);
    char cj[4200];
    snprintf(cj, sizeof cj, "%s/config.json", dir);
    if (arch && stat(cj, &st) != 0) { /* named by the archive, not the temporary folder */
        amn_kit_model_dir_close(&md);
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: the folder %s packed in %s has no config.json: not a "
                             "Hugging Face model folder",
                             amn_model_archive_folder(o->model), arch);
    }
    hf_conv *c = calloc(1, sizeof *c);
    if (!c) {
        amn_kit_model_dir_close(&md);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    c->n_src = n;
    c->model = o->model;
    /* the caps the folder was opened with reach its JSON and tokenizer files */
    const amn_limits *lim = amn_model_limits(o->model);
    if (lim)
        c->lim_own = *lim;
    else
        amn_limits_default(&c->lim_own);
    c->lim = &c->lim_own;
    json_object *cfg = NULL;
    hf_params p = {0};
    rc = parse_outtype(o->target, &c->outtype, &c->outtype_auto, err);
    if (!rc && (!(c->outs = calloc(n ? n : 1, sizeof *c->outs)) ||
                !(c->outs2 = calloc(n ? n : 1, sizeof *c->outs2))))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = read_json(dir, "config.json", true, c->lim, &cfg, err);
    if (!rc) rc = find_arch(c, cfg, err);
    if (!rc && c->outtype_auto) rc = guess_outtype(c, dir, err);
    if (!rc) rc = hf_params_read(cfg, c->arch, &p, err);
    if (!rc) rc = hf_params_extra(c->arch, &p, c, err);
    if (!rc && (c->arch->flags & HF_A_TRIM_VOCAB))
        rc = hf_vocab_real_count(dir, p.vocab_size, c->lim, &c->vocab_rows, err);
    if (!rc) rc = plan_experts(c, &p, n, err);
    if (!rc) rc = plan_order(c, dir, src, n, &p, err);
    if (!rc) rc = plan_kv(c, dir, p.cfg, &p, err);
    json_object_put(cfg);
    hf_params_free(&p);
    amn_kit_model_dir_close(&md);
    if (rc) {
        hf_conv_free(c);
        return rc;
    }
    *out = c;
    return AMN_OK;
}
