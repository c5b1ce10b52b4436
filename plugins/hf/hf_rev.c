/* Planning and writing a GGUF's tensors as a Hugging Face folder's
 * (hf_rev.h). */
#include "hf_rev.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/checked.h"
#include "amn/format.h"

void hf_rev_free(hf_rev *r) {
    if (!r) return;
    for (size_t i = 0; r->slots && i < r->n_src; i++) free(r->slots[i].o);
    free(r->slots);
    free(r);
}

/* general.file_type's float types; quantized files default to bf16. */
static amn_dtype default_dtype(const amn_model *m) {
    double ft = -1;
    const amn_kv *kv = amn_model_find_kv(m, "general.file_type");
    if (!kv || !hf_rev_num(kv, &ft)) return AMN_DTYPE_BF16;
    return ft == 0 ? AMN_DTYPE_F32 : ft == 1 ? AMN_DTYPE_F16 : AMN_DTYPE_BF16;
}

static int target_dtype(const amn_encode_options *o, amn_dtype *d, amn_error *err) {
    const char *t = o->target;
    if (strcmp(t, "hfdir") == 0)
        *d = default_dtype(o->model);
    else if (strcmp(t, "hfdir-f32") == 0)
        *d = AMN_DTYPE_F32;
    else if (strcmp(t, "hfdir-f16") == 0)
        *d = AMN_DTYPE_F16;
    else if (strcmp(t, "hfdir-bf16") == 0)
        *d = AMN_DTYPE_BF16;
    else
        return amn_error_set(err, AMN_E_INVALID, "hf: unknown target %s", t);
    return AMN_OK;
}

static int head_count(const hf_rev *r, const char *suffix, uint32_t *n, amn_error *err) {
    double v;
    const amn_kv *kv = hf_rev_kv(r->model, r->arch->gguf_arch, suffix);
    if (!kv || !hf_rev_num(kv, &v) || v < 1 || v > 65536)
        return amn_error_set(err, AMN_E_PARSE, "GGUF: %s.%s missing or bad", r->arch->gguf_arch,
                             suffix);
    *n = (uint32_t)v;
    return AMN_OK;
}

static int set_shape(hf_rout *t, const amn_encode_source *s, uint64_t rows, amn_error *err) {
    t->ndim = s->ndim;
    memcpy(t->shape, s->shape, sizeof t->shape);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < s->ndim; d++)
        if (!amn_mul_u64(numel, s->shape[d], &numel))
            return amn_error_set(err, AMN_E_PARSE, "%s: shape overflows", s->name);
    if (s->ndim >= 2) {
        t->rows = rows ? rows : s->shape[0];
        t->cols = t->rows ? numel / s->shape[0] : 0;
    } else {
        t->rows = numel;
        t->cols = 1;
    }
    uint64_t n;
    if (!amn_mul_u64(t->rows, t->cols, &n) || !amn_mul_u64(n, amn_dtype_size(t->dtype), &n))
        return amn_error_set(err, AMN_E_PARSE, "%s: size overflows", s->name);
    t->nbytes = n;
    return AMN_OK;
}

/* n outputs for one slot, within the folder's cap on tensors (a hostile
 * GGUF's tiny stacks of thousands of experts would otherwise plan more
 * outputs than memory holds). */
static int slot_alloc(hf_rev *r, hf_rslot *sl, size_t n, amn_error *err) {
    if (n > r->cap_outs - r->n_outs)
        return amn_error_set(err, AMN_E_LIMIT, "more than %llu tensors to write (--max-items)",
                             (unsigned long long)r->cap_outs);
    if (!(sl->o = calloc(n, sizeof *sl->o)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    sl->n = n;
    r->n_outs += n;
    return AMN_OK;
}

/* blk.N.<stack>.weight of the family's experts (hf_experts): one output per
 * expert. 1 when s is not an expert stack. */
static int plan_experts(hf_rev *r, const amn_encode_source *s, hf_rslot *sl, amn_error *err) {
    const hf_experts *ex = r->arch->experts;
    unsigned bid;
    char kind[32], suffix[16];
    if (!ex || sscanf(s->name, "blk.%u.%31[a-z_].%15s", &bid, kind, suffix) != 3)
        return 1; /* not an expert stack */
    const char *w = NULL;
    for (size_t k = 0; k < 3; k++)
        if (strcmp(kind, ex->gguf[k]) == 0) w = ex->proj[k];
    if (!w || strcmp(suffix, "weight") != 0) return 1; /* not an expert stack */
    if (s->ndim != 3 || s->shape[0] == 0 || s->shape[0] > r->max_outs)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: %llu experts (at most %zu convert back)",
                             s->name, (unsigned long long)s->shape[0], r->max_outs);
    if (r->n_experts && r->n_experts != s->shape[0])
        return amn_error_set(err, AMN_E_PARSE, "%s: %llu experts, an earlier stack %llu", s->name,
                             (unsigned long long)s->shape[0], (unsigned long long)r->n_experts);
    r->n_experts = s->shape[0];
    int rc = slot_alloc(r, sl, (size_t)s->shape[0], err);
    for (size_t e = 0; !rc && e < sl->n; e++) {
        hf_rout *t = &sl->o[e];
        snprintf(t->name, sizeof t->name, "model.layers.%u.%s%zu.%s.weight", bid, ex->mid, e, w);
        t->dtype = r->dtype;
        const amn_encode_source one = {
            .name = s->name, .ndim = 2, .shape = {s->shape[1], s->shape[2]}};
        rc = set_shape(t, &one, 0, err);
        t->row0 = e * s->shape[1];
    }
    return rc;
}

/* The index of the source named name, or n. */
static size_t source_named(const amn_encode_source *src, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(src[i].name, name) == 0) return i;
    return n;
}

/* The largest head of attn_k_b transposed back at once (F32 values). */
#define MLA_HEAD_MAX (64u << 20)

/* blk.N.attn_k_b / attn_v_b (DeepSeek's split kv_b_proj): kv_b_proj again,
 * planned at k_b, whose fill reads v_b as another source; v_b itself
 * writes nothing. 1 when s is neither. */
static int plan_mla(hf_rev *r, const amn_encode_source *src, size_t n, size_t i, hf_rslot *sl,
                    amn_error *err) {
    const amn_encode_source *s = &src[i];
    unsigned bid;
    char kind[16], suffix[16], other[64];
    if (!(r->arch->flags & HF_A_MLA) ||
        sscanf(s->name, "blk.%u.%15[a-z_].%15s", &bid, kind, suffix) != 3 ||
        strcmp(suffix, "weight") != 0)
        return 1;
    const bool k = strcmp(kind, "attn_k_b") == 0;
    if (!k && strcmp(kind, "attn_v_b") != 0) return 1;
    snprintf(other, sizeof other, "blk.%u.%s.weight", bid, k ? "attn_v_b" : "attn_k_b");
    const size_t j = source_named(src, n, other);
    if (j == n)
        return amn_error_set(err, AMN_E_PARSE, "%s without %s (kv_b_proj needs both)", s->name,
                             other);
    if (!k) return AMN_OK; /* planned with its k_b */
    const amn_encode_source *v = &src[j];
    if (s->ndim != 3 || v->ndim != 3 || s->shape[0] != v->shape[0] || s->shape[1] != v->shape[2] ||
        !s->shape[0] || !s->shape[1] || !s->shape[2] || !v->shape[1])
        return amn_error_set(err, AMN_E_PARSE,
                             "%s [%llu, %llu, %llu] and %s: not [heads, rank, k] and [heads, v, "
                             "rank]",
                             s->name, (unsigned long long)s->shape[0],
                             (unsigned long long)s->shape[1], (unsigned long long)s->shape[2],
                             other);
    if (s->shape[1] * s->shape[2] > MLA_HEAD_MAX / sizeof(float))
        return amn_error_set(err, AMN_E_LIMIT, "%s: a head of %llu x %llu values", s->name,
                             (unsigned long long)s->shape[1], (unsigned long long)s->shape[2]);
    int rc = slot_alloc(r, sl, 1, err);
    if (rc) return rc;
    hf_rout *t = &sl->o[0];
    snprintf(t->name, sizeof t->name, "model.layers.%u.self_attn.kv_b_proj.weight", bid);
    t->dtype = r->dtype;
    t->mla = true;
    t->mla_v = j;
    t->mla_nope = s->shape[2];
    t->mla_vd = v->shape[1];
    const amn_encode_source kv = {.name = s->name,
                                  .ndim = 2,
                                  .shape = {s->shape[0] * (t->mla_nope + t->mla_vd), s->shape[1]}};
    return set_shape(t, &kv, 0, err);
}

static int plan_one(hf_rev *r, const amn_encode_source *src, size_t n, size_t i, hf_rslot *sl,
                    uint32_t nh, uint32_t nkv, amn_error *err) {
    const amn_encode_source *s = &src[i];
    /* generated from config.json: left out (Phi-3's factors go back there) */
    if (strcmp(s->name, "rope_freqs.weight") == 0 ||
        strcmp(s->name, "rope_factors_long.weight") == 0 ||
        strcmp(s->name, "rope_factors_short.weight") == 0)
        return AMN_OK;
    int rc = plan_experts(r, s, sl, err);
    if (rc <= 0) return rc;
    if ((rc = plan_mla(r, src, n, i, sl, err)) <= 0) return rc;
    hf_rout one;
    hf_rout *t = &one;
    memset(t, 0, sizeof *t);
    uint8_t x = 0;
    if (!hf_arch_unmap(r->arch, s->name, t->name, sizeof t->name, &x))
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: no Hugging Face name for this %s tensor",
                             s->name, r->arch->gguf_arch);
    /* filter_tensors' "e_score_correction.bias" named as checkpoints have it */
    const size_t ln = strlen(t->name);
    if (ln >= 23 && strcmp(t->name + ln - 23, "e_score_correction.bias") == 0)
        t->name[ln - 5] = '_';
    t->dtype = r->dtype;
    /* weights and biases alike, as LlamaModel permutes both */
    t->xform = x == HF_X_PERMUTE_Q || x == HF_X_PERMUTE_K ? x : HF_X_NONE;
    t->n_head = x == HF_X_PERMUTE_K ? nkv : nh;
    const size_t nl = strlen(t->name);
    t->minus1 = (r->arch->flags & HF_A_NORM_PLUS1) && nl >= 11 &&
                strcmp(t->name + nl - 11, "norm.weight") == 0;
    if ((rc = set_shape(t, s, 0, err))) return rc;
    if (t->xform && (t->rows % (2ull * t->n_head)) != 0)
        return amn_error_set(err, AMN_E_PARSE, "%s: %llu rows do not split into %u heads", s->name,
                             (unsigned long long)t->rows, t->n_head);
    if (strcmp(s->name, "token_embd.weight") == 0) r->vocab_rows = t->rows;
    if ((rc = slot_alloc(r, sl, 1, err))) return rc;
    sl->o[0] = one;
    return AMN_OK;
}

int hf_rev_new(const amn_encode_options *o, const amn_encode_source *src, size_t n, hf_rev **out,
               amn_error *err) {
    *out = NULL;
    if (!o->model) return amn_error_set(err, AMN_E_INVALID, "hf: no input model");
    const amn_kv *ak = amn_model_find_kv(o->model, "general.architecture");
    const amn_str *as = ak && ak->type == AMN_KV_STRING ? ak->data : NULL;
    if (!as)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: not a GGUF model (no general.architecture)");
    char arch[64];
    snprintf(arch, sizeof arch, "%.*s", (int)(as->len < 63 ? as->len : 63), as->ptr);
    hf_rev *r = calloc(1, sizeof *r);
    if (!r) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    r->model = o->model;
    r->max_outs =
        AMN_HAS_FIELD(o, amn_encode_options, max_outs) && o->max_outs > AMN_ENCODE_MAX_OUTS
            ? o->max_outs
            : AMN_ENCODE_MAX_OUTS;
    const amn_limits *lim = amn_model_limits(o->model);
    r->cap_outs = lim && lim->max_tensors ? lim->max_tensors : (uint64_t)1 << 20;
    r->arch = hf_arch_by_gguf(arch);
    int rc = AMN_OK;
    if (!r->arch) {
        char list[256];
        hf_arch_gguf_list(list, sizeof list);
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "unsupported: GGUF architecture '%s' to a Hugging Face folder "
                           "(supported: %s)",
                           arch, list);
    }
    uint32_t nh = 0, nkv = 0;
    const amn_kv *vk = amn_model_find_kv(o->model, "tokenizer.ggml.model");
    const amn_str *vm = vk && vk->type == AMN_KV_STRING ? vk->data : NULL;
    if (!rc && vm && !(vm->len == 4 && memcmp(vm->ptr, "gpt2", 4) == 0) &&
        !(vm->len == 5 && memcmp(vm->ptr, "llama", 5) == 0) &&
        !(vm->len == 4 && memcmp(vm->ptr, "none", 4) == 0)) /* checked before any output */
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "unsupported: a '%.*s' vocabulary to tokenizer files (gpt2 and llama "
                           "convert)",
                           (int)(vm->len > 32 ? 32 : vm->len), vm->ptr);
    if (!rc && vm && vm->len == 4 && memcmp(vm->ptr, "gpt2", 4) == 0)
        rc = hf_rev_pre_check(o->model, err); /* also before any output */
    if (!rc) rc = target_dtype(o, &r->dtype, err);
    if (!rc) rc = head_count(r, "attention.head_count", &nh, err);
    if (!rc && hf_rev_kv(o->model, arch, "attention.head_count_kv"))
        rc = head_count(r, "attention.head_count_kv", &nkv, err);
    if (!rc && !nkv) nkv = nh;
    if (!rc && !(r->slots = calloc(n ? n : 1, sizeof *r->slots)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    r->n_src = n;
    bool has_output = false;
    for (size_t i = 0; !rc && i < n; i++) {
        rc = plan_one(r, src, n, i, &r->slots[i], nh, nkv, err);
        if (strcmp(src[i].name, "output.weight") == 0) has_output = true;
    }
    if (!rc && !r->vocab_rows) rc = amn_error_set(err, AMN_E_PARSE, "GGUF: no token_embd.weight");
    r->tied = !has_output;
    if (rc) {
        hf_rev_free(r);
        return rc;
    }
    *out = r;
    return AMN_OK;
}

/* The GGUF row holding Hugging Face row s: LlamaModel.permute's inverse
 * (each head's rows were the halves interleaved). */
static uint64_t gguf_row(const hf_rout *t, uint64_t s) {
    if (!t->xform) return s;
    const uint64_t half = t->rows / t->n_head / 2;
    const uint64_t h = s / (2 * half), in = s % (2 * half);
    return h * 2 * half + 2 * (in % half) + in / half;
}

/* Rows [r0, r0 + n) of kv_b_proj made again: a k row is a column of its
 * head's attn_k_b (read once per head met), v rows are attn_v_b's rows. */
static int fill_mla(const hf_rout *t, uint64_t r0, uint64_t n, const amn_values *v, float *tmp,
                    amn_error *err) {
    if (v->struct_size < offsetof(amn_values, read_source) + sizeof v->read_source ||
        !v->read_source)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "%s: the core cannot read other sources",
                             t->name);
    const uint64_t nope = t->mla_nope, vd = t->mla_vd, per = nope + vd, rank = t->cols;
    float *head = malloc((size_t)(rank * nope) * sizeof *head);
    if (!head) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    uint64_t have = UINT64_MAX;
    int rc = AMN_OK;
    for (uint64_t r = 0, m; !rc && r < n; r += m) {
        const uint64_t h = (r0 + r) / per, j = (r0 + r) % per;
        if (j >= nope) { /* v rows: one read for the head's run of them */
            m = per - j < n - r ? per - j : n - r;
            rc = v->read_source(v->all, t->mla_v, (h * vd + j - nope) * rank, m * rank,
                                tmp + r * rank, err);
            continue;
        }
        m = 1;
        if (h != have && !(rc = v->read(v->ctx, h * rank * nope, rank * nope, head, err))) have = h;
        for (uint64_t l = 0; !rc && l < rank; l++) tmp[r * rank + l] = head[l * nope + j];
    }
    free(head);
    return rc;
}

int hf_rev_fill(const hf_rout *t, uint64_t unit0, uint64_t n, const amn_values *v, void *dst,
                amn_error *err) {
    if (unit0 > t->rows || n > t->rows - unit0)
        return amn_error_set(err, AMN_E_INVALID, "%s: rows out of range", t->name);
    const uint64_t cols = t->cols;
    float *tmp = malloc((size_t)(n * cols) * sizeof *tmp + 1);
    if (!tmp) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    if (t->mla) {
        rc = fill_mla(t, unit0, n, v, tmp, err);
    } else if (t->xform) {
        for (uint64_t r = 0; !rc && r < n; r++)
            rc = v->read(v->ctx, gguf_row(t, unit0 + r) * cols, cols, tmp + r * cols, err);
    } else {
        rc = v->read(v->ctx, (t->row0 + unit0) * cols, n * cols, tmp, err);
    }
    /* x + 1 was rounded to the GGUF's float type; from F32 of BF16 or F16
     * weights of moderate size the minus one is exact. */
    for (uint64_t i = 0; !rc && t->minus1 && i < n * cols; i++) tmp[i] -= 1.0f;
    if (!rc && amn_store_f32(tmp, t->dtype, dst, (size_t)(n * cols)))
        rc = amn_error_set(err, AMN_E_INVALID, "%s: cannot store as %s", t->name,
                           amn_dtype_name(t->dtype));
    free(tmp);
    return rc;
}
