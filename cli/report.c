/* `amn parse` and `amn inspect`: what a file holds, as text or one JSON
 * document. inspect reads only headers; parse opens the whole model. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "cli.h"

static const char *tensor_type(const amn_tensor *t) {
    return t->dtype == AMN_DTYPE_BLOCK && t->encoding_name ? t->encoding_name
                                                           : amn_dtype_name(t->dtype);
}

/* Distinct dtypes in order of first appearance, ", "-joined. */
static void dtype_list(const amn_model *m, char *buf, size_t size) {
    buf[0] = '\0';
    const char *seen[64];
    size_t n_seen = 0, used = 0;
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        const char *name = tensor_type(amn_model_tensor(m, i));
        bool dup = false;
        for (size_t k = 0; k < n_seen && !dup; k++) dup = strcmp(seen[k], name) == 0;
        if (dup || n_seen == 64) continue;
        seen[n_seen++] = name;
        used += (size_t)snprintf(buf + used, used < size ? size - used : 0, "%s%s",
                                 n_seen > 1 ? ", " : "", name);
    }
}

static const char *role_name(int role) {
    switch (role) {
    case AMN_ROLE_WEIGHT:
        return "quantized";
    case AMN_ROLE_SCALE:
        return "scale";
    case AMN_ROLE_ZERO:
        return "zero-point";
    case AMN_ROLE_GROUP_INDEX:
        return "g_idx";
    case AMN_ROLE_AUX:
        return "aux";
    case AMN_ROLE_ACT_SCALE:
        return "activation-scale";
    default:
        return "passthrough";
    }
}

/* An object member whose key comes from a file: made valid UTF-8 first. */
static void json_add_key(json_object *obj, const char *key, json_object *val) {
    json_object *k = cli_json_str(key);
    json_object_object_add(obj, json_object_get_string(k), val);
    json_object_put(k);
}

static json_object *json_u64(uint64_t v) {
    return json_object_new_uint64(v);
}

static json_object *kv_scalar_json(amn_kv_type t, const void *d) {
    switch (t) {
    case AMN_KV_U8:
        return json_object_new_int(*(const uint8_t *)d);
    case AMN_KV_I8:
        return json_object_new_int(*(const int8_t *)d);
    case AMN_KV_U16:
        return json_object_new_int(*(const uint16_t *)d);
    case AMN_KV_I16:
        return json_object_new_int(*(const int16_t *)d);
    case AMN_KV_U32:
        return json_object_new_int64(*(const uint32_t *)d);
    case AMN_KV_I32:
        return json_object_new_int(*(const int32_t *)d);
    case AMN_KV_U64:
        return json_object_new_uint64(*(const uint64_t *)d);
    case AMN_KV_I64:
        return json_object_new_int64(*(const int64_t *)d);
    case AMN_KV_F32:
        return json_object_new_double(*(const float *)d);
    case AMN_KV_F64:
        return json_object_new_double(*(const double *)d);
    case AMN_KV_BOOL:
        return json_object_new_boolean(*(const uint8_t *)d);
    case AMN_KV_STRING: {
        const amn_str *str = d;
        return cli_json_strn(str->ptr, (size_t)str->len);
    }
    default:
        return NULL;
    }
}

/* Long arrays (a tokenizer's vocabulary) are summarised by length unless
 * --full asks for everything. */
static json_object *kv_json(const amn_kv *kv, bool full, unsigned depth) {
    if (kv->type != AMN_KV_ARRAY) return kv_scalar_json(kv->type, kv->data);
    if ((!full && kv->count > 16) || depth > 8) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "array_length", json_u64(kv->count));
        return o;
    }
    json_object *arr = json_object_new_array();
    const uint8_t *p = kv->data;
    for (uint64_t i = 0; i < kv->count; i++, p += amn_kv_type_size(kv->elem_type))
        json_object_array_add(arr, kv->elem_type == AMN_KV_ARRAY
                                       ? kv_json((const amn_kv *)p, full, depth + 1)
                                       : kv_scalar_json(kv->elem_type, p));
    return arr;
}

/* A typed key's value as short text, for the text report. */
static bool kv_text(const amn_model *m, const char *key, char *buf, size_t size) {
    const amn_kv *kv = amn_model_find_kv(m, key);
    if (!kv || kv->type == AMN_KV_ARRAY) return false;
    json_object *o = kv_scalar_json(kv->type, kv->data);
    if (!o) return false;
    snprintf(buf, size, "%s",
             kv->type == AMN_KV_STRING ? json_object_get_string(o) : json_object_to_json_string(o));
    json_object_put(o);
    return true;
}

static void print_text(const amn_model *m, const amn_plan *p, const char *input, bool listing,
                       amn_dtype out) {
    char b1[32], b2[32], dtypes[1024];
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, out, &s);
    dtype_list(m, dtypes, sizeof dtypes);
    if (listing) printf("Parsed %s (%s)\n", input, amn_model_label(m));
    const char *ind = listing ? "  " : "";
    char kvbuf[256];
    if (!listing) printf("Format:      %s\n", amn_model_label(m));
    if (kv_text(m, "general.architecture", kvbuf, sizeof kvbuf))
        printf("%sArch:        %s\n", ind, kvbuf);
    printf("%sTensors:     %zu\n", ind, amn_model_tensor_count(m));
    printf("%sTotal size:  %s\n", ind, cli_size(s.current_bytes, b1, sizeof b1));
    printf("%sDtypes:      %s\n", ind, dtypes[0] ? dtypes : "-");
    if (kv_text(m, "general.alignment", kvbuf, sizeof kvbuf))
        printf("%sAlignment:   %s bytes\n", ind, kvbuf);
    else if (strcmp(amn_model_format(m), "gguf") == 0)
        printf("%sAlignment:   32 bytes (GGUF default)\n", ind);
    if (s.groups) {
        printf("%sScheme:      %s%s\n", ind, s.label ? s.label : s.scheme,
               s.labels_differ ? " (and others)" : "");
        printf("%sQuantized:   %zu tensor%s\n", ind, s.groups, s.groups == 1 ? "" : "s");
        if (s.scales) printf("%sScales:      %zu\n", ind, s.scales);
        if (s.zeros) printf("%sZero-points: %zu\n", ind, s.zeros);
        if (s.group_indices) printf("%sg_idx:       %zu\n", ind, s.group_indices);
        if (s.aux) printf("%sAuxiliary:   %zu\n", ind, s.aux);
    }
    if (s.unhandled) {
        const char *what = "";
        for (size_t i = 0; i < amn_model_tensor_count(m); i++)
            if (amn_plan_tensor_unhandled(p, i, &what, NULL)) break;
        if (s.missing_plugin)
            printf(
                "%sUnhandled:   %zu quantized tensor%s (%s); install the amn-plugin-%s package to "
                "dequantize\n",
                ind, s.unhandled, s.unhandled == 1 ? "" : "s", what, s.missing_plugin);
        else
            printf("%sUnhandled:   %zu quantized tensor%s (%s); no amn plugin dequantizes it\n",
                   ind, s.unhandled, s.unhandled == 1 ? "" : "s", what);
    }
    if (s.dropped)
        printf("%sDropped:     %zu activation scales (metadata; left out of outputs)\n", ind,
               s.dropped);
    if (s.groups) {
        printf("%sPassthrough: %zu tensor%s\n", ind, s.passthrough, s.passthrough == 1 ? "" : "s");
        printf("%sSize:        %s -> %s (%s)\n", ind, cli_size(s.current_bytes, b1, sizeof b1),
               cli_size(s.after_bytes, b2, sizeof b2), amn_dtype_name(out));
        uint64_t took = s.after_bytes > s.current_bytes ? s.after_bytes - s.current_bytes : 0;
        printf("%sLethe took:  ~%s of precision\n", ind, cli_size(took, b1, sizeof b1));
    }
    if (!listing) return;
    size_t w = 4;
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        size_t l = strlen(amn_model_tensor(m, i)->name);
        if (l > w) w = l;
    }
    if (w > 60) w = 60;
    printf("\n");
    for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        char shape[160];
        amn_shape_format(t, shape, sizeof shape);
        int role = amn_plan_tensor_role(p, i);
        const char *what = NULL;
        if (amn_plan_tensor_unhandled(p, i, &what, NULL))
            printf("  %-*s %-8s %-20s %10s  unhandled (%s)\n", (int)w, t->name, tensor_type(t),
                   shape, cli_size(t->nbytes, b1, sizeof b1), what);
        else
            printf("  %-*s %-8s %-20s %10s%s%s\n", (int)w, t->name, tensor_type(t), shape,
                   cli_size(t->nbytes, b1, sizeof b1), role ? "  " : "",
                   role ? role_name(role) : "");
    }
    for (size_t i = 0; i < amn_model_note_count(m); i++)
        printf("  %-*s = %s (not a tensor; skipped by conversion)\n", (int)w,
               amn_model_note_name(m, i), amn_model_note_value(m, i));
}

static json_object *model_json(const amn_model *m, const amn_plan *p, const cli_args *a,
                               const char *input, bool listing, amn_dtype out) {
    amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
    amn_plan_summarize(p, out, &s);
    json_object *root = json_object_new_object();
    json_object_object_add(root, "file", cli_json_str(input));
    json_object_object_add(root, "format", json_object_new_string(amn_model_format(m)));
    json_object_object_add(root, "label", cli_json_str(amn_model_label(m)));
    json_object_object_add(root, "tensor_count", json_u64(amn_model_tensor_count(m)));
    json_object_object_add(root, "total_bytes", json_u64(s.current_bytes));
    json_object *dts = json_object_new_array();
    char dtypes[1024];
    dtype_list(m, dtypes, sizeof dtypes);
    for (char *save = NULL, *tok = strtok_r(dtypes, ", ", &save); tok;
         tok = strtok_r(NULL, ", ", &save))
        json_object_array_add(dts, cli_json_str(tok));
    json_object_object_add(root, "dtypes", dts);
    json_object *q = json_object_new_object();
    json_object_object_add(q, "scheme", cli_json_str(s.scheme));
    json_object_object_add(q, "label", cli_json_str(s.label));
    json_object_object_add(q, "quantized", json_u64(s.groups));
    json_object_object_add(q, "scales", json_u64(s.scales));
    json_object_object_add(q, "zero_points", json_u64(s.zeros));
    json_object_object_add(q, "group_indices", json_u64(s.group_indices));
    json_object_object_add(q, "auxiliary", json_u64(s.aux));
    json_object_object_add(q, "dropped_activation_scales", json_u64(s.dropped));
    json_object_object_add(q, "passthrough", json_u64(s.passthrough));
    json_object_object_add(q, "unhandled", json_u64(s.unhandled));
    json_object_object_add(q, "missing_plugin", cli_json_str(s.missing_plugin));
    json_object_object_add(q, "out_dtype", json_object_new_string(amn_dtype_name(out)));
    json_object_object_add(q, "bytes_after", json_u64(s.after_bytes));
    json_object_object_add(
        q, "lethe_took_bytes",
        json_u64(s.after_bytes > s.current_bytes ? s.after_bytes - s.current_bytes : 0));
    json_object_object_add(root, "quantization", q);
    json_object *meta = json_object_new_object();
    for (size_t i = 0; i < amn_model_meta_count(m); i++)
        json_add_key(meta, amn_model_meta_key(m, i), cli_json_str(amn_model_meta_value(m, i)));
    json_object_object_add(root, "metadata", meta);
    if (amn_model_kv_count(m)) {
        json_object *kvs = json_object_new_object();
        for (size_t i = 0; i < amn_model_kv_count(m); i++) {
            const amn_kv *kv = amn_model_kv(m, i);
            json_add_key(kvs, kv->key, kv_json(kv, a->full, 0));
        }
        json_object_object_add(root, "kv", kvs);
    }
    if (listing) {
        json_object *arr = json_object_new_array();
        for (size_t i = 0; i < amn_model_tensor_count(m); i++) {
            const amn_tensor *t = amn_model_tensor(m, i);
            json_object *o = json_object_new_object(), *shape = json_object_new_array();
            for (uint32_t d = 0; d < t->ndim; d++)
                json_object_array_add(shape, json_u64(t->shape[d]));
            json_object_object_add(o, "name", cli_json_str(t->name));
            json_object_object_add(o, "dtype", cli_json_str(tensor_type(t)));
            json_object_object_add(o, "shape", shape);
            json_object_object_add(o, "bytes", json_u64(t->nbytes));
            json_object_object_add(o, "offset", json_u64(t->file_offset));
            /* A model of several files (a split GGUF): the file, from 1. */
            if (AMN_HAS_FIELD(t, amn_tensor, shard) &&
                amn_model_tensor(m, amn_model_tensor_count(m) - 1)->shard)
                json_object_object_add(o, "shard", json_u64((uint64_t)t->shard + 1));
            const char *what = NULL;
            const bool unhandled = amn_plan_tensor_unhandled(p, i, &what, NULL);
            json_object_object_add(
                o, "role",
                json_object_new_string(unhandled ? "unhandled"
                                                 : role_name(amn_plan_tensor_role(p, i))));
            if (unhandled)
                json_object_object_add(o, "unhandled_layout", json_object_new_string(what));
            json_object_array_add(arr, o);
        }
        json_object_object_add(root, "tensors", arr);
        json_object *notes = json_object_new_object();
        for (size_t i = 0; i < amn_model_note_count(m); i++)
            json_add_key(notes, amn_model_note_name(m, i),
                         cli_json_str(amn_model_note_value(m, i)));
        json_object_object_add(root, "non_tensor_values", notes);
    }
    return root;
}

int cli_report(const amn_ctx *ctx, const cli_args *a, const char *input, bool header_only,
               json_object **doc, amn_error *err) {
    if (doc) *doc = NULL;
    char path[4096];
    bool resolved;
    int rc = amn_ctx_resolve(ctx, input, path, sizeof path, &resolved, err);
    if (rc) return rc;
    if (!resolved) snprintf(path, sizeof path, "%s", input);
    amn_model *m = NULL;
    /* parse lists what the headers say: a packed model folder is read
     * header-only, so a compressed archive's model files are never
     * decompressed to disk; one whose format reads past its header (a
     * .pth's or npz's ZIP directory at its end: unsupported header-only)
     * is opened whole. A file or folder is opened, as its mapping costs
     * nothing. */
    if (header_only || amn_path_is_archive(path)) {
        amn_error scratch = {0};
        rc = amn_inspect(ctx, path, a->from, cli_limits(a), &m, header_only ? err : &scratch);
        if (!header_only && rc == AMN_E_UNSUPPORTED)
            rc = amn_open(ctx, path, a->from, cli_limits(a), &m, err);
        else if (!header_only && rc && err)
            *err = scratch;
    } else {
        rc = amn_open(ctx, path, a->from, cli_limits(a), &m, err);
    }
    if (rc) return rc;
    amn_plan *p = NULL;
    if ((rc = amn_plan_new(ctx, m, &p, err))) {
        amn_model_free(m);
        return rc;
    }
    amn_dtype out = a->to ? amn_dtype_from_cli(a->to) : AMN_DTYPE_BF16;
    if (out == AMN_DTYPE_INVALID) out = AMN_DTYPE_BF16;
    if (doc)
        *doc = model_json(m, p, a, input, !header_only, out);
    else
        print_text(m, p, input, !header_only, out);
    amn_plan_free(p);
    amn_model_free(m);
    return AMN_OK;
}

int cmd_parse(const amn_ctx *ctx, const cli_args *a, bool header_only) {
    amn_error err = {0};
    json_object *doc = NULL;
    if (cli_report(ctx, a, a->input, header_only, a->json ? &doc : NULL, &err))
        return cli_fail(&err);
    if (doc) cli_json_print(doc);
    return EXIT_OK;
}
