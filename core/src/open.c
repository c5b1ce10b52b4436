/* Choosing a format for a file (probing) and opening or inspecting it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "amn/context.h"
#include "abi_internal.h"
#include "archive_internal.h"
#include "registry_internal.h"
#include "probe_buf.h"

void amn_limits_default(amn_limits *l) {
    l->struct_size = sizeof *l;
    l->max_header_bytes = 100ull << 20;
    l->max_tensors = 1ull << 20;
    l->max_string = 16ull << 20;
    l->max_array = 1ull << 26;
    l->max_depth = 64;
    l->max_alloc = 64ull << 30;
    l->max_alloc_one = 64ull << 30;
    l->max_ratio = 1000;
    l->ratio_min_size = 256ull << 20;
}

/* The caller's limits over the defaults: the fields its struct_size covers
 * (an application built against an older header passes a smaller struct). */
static int effective_limits(const amn_limits *in, amn_limits *out, amn_error *err) {
    amn_limits_default(out);
    if (!in) return AMN_OK;
    if (in->struct_size < AMNI_LIMITS_SIZE_2_0)
        return amn_error_set(err, AMN_E_INVALID,
                             "amn_limits struct_size %u is too small; fill it with "
                             "amn_limits_default",
                             in->struct_size);
    const size_t n = in->struct_size < sizeof *out ? in->struct_size : sizeof *out;
    memcpy(out, in, n); /* fields past the caller's struct keep their defaults */
    out->struct_size = sizeof *out;
    /* max_alloc_one also bounds the caps of the things a parser allocates
     * whole (headers, strings), so one knob covers them. */
    if (out->max_alloc_one && out->max_header_bytes > out->max_alloc_one)
        out->max_header_bytes = out->max_alloc_one;
    if (out->max_alloc_one && out->max_string > out->max_alloc_one)
        out->max_string = out->max_alloc_one;
    return AMN_OK;
}

static bool ext_matches(const char *path, const char *exts) {
    if (!path || !exts) return false;
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return false;
    dot++;
    size_t dl = strlen(dot);
    for (const char *p = exts; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == dl && strncmp(p, dot, n) == 0) return true;
        if (!comma) break;
        p = comma + 1;
    }
    return false;
}

/* Score every format; the strictly highest score above WEAK wins. Among
 * formats tied at the top, the one whose extension matches wins if it is the
 * only one; an extension never lifts a score past another (50 with a
 * matching extension does not tie 51). */
static int choose(const amn_ctx *ctx, const amn_probe_data *pd, const char *from,
                  const amn_format **out, amn_error *err) {
    const char *label = pd->path ? pd->path : "input";
    *out = NULL;
    if (from) {
        const amn_format *f = amn_ctx_find_format(ctx, from);
        if (!f)
            return amn_error_set(
                err, AMN_E_UNSUPPORTED,
                "unsupported: no format '%s' is loaded; install the amn-plugin-%s package", from,
                from);
        *out = f;
        return AMN_OK;
    }
    /* Plugins the registry cache describes are loaded only if one of their
     * formats' probe signatures matches (or a probe has none). */
    amni_registry_load_for_probe(ctx, pd);
    /* Rank by (score, extension match): the extension is the lower digit. */
    int best = (AMN_PROBE_WEAK + 1) * 2 - 1, tie = 0;
    const amn_format *winner = NULL, *other = NULL;
    amni_registry_lock(ctx); /* the list does not change while it is walked */
    for (size_t i = 0; i < ctx->n_formats; i++) {
        const amn_format *f = ctx->formats[i];
        int s = f->probe(pd);
        if (s <= AMN_PROBE_WEAK) continue;
        if (s > AMN_PROBE_MAX) s = AMN_PROBE_MAX;
        const int rank = s * 2 + (ext_matches(pd->path, f->extensions) ? 1 : 0);
        if (rank > best) {
            best = rank;
            winner = f;
            tie = 0;
        } else if (rank == best) {
            tie = 1;
            other = f;
        }
    }
    amni_registry_unlock(ctx);
    if (winner && !tie) {
        *out = winner;
        return AMN_OK;
    }
    if (winner)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: ambiguous format (%s or %s); pass --from FORMAT", label,
                             winner->name, other->name);
    const char *known =
        amni_known_plugin_for_file(pd->path, pd->head, pd->head_size, pd->file_size);
    if (pd->is_directory && !known) known = "safetensors";
    if (known && !amn_ctx_find_format(ctx, known))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s looks like %s, but no loaded plugin reads it; "
                             "install the amn-plugin-%s package",
                             label, known, known);
    return amn_error_set(err, AMN_E_PARSE, "%s: unrecognised file format", label);
}

static int detect_impl(const amn_ctx *ctx, const amn_source *src, const char *path, bool is_dir,
                       const char *from, const amn_format **out, amn_error *err) {
    static const uint8_t none[AMN_PROBE_PADDING];
    amn_probe_data pd = {
        .struct_size = sizeof pd, .path = path, .head = none, .tail = none, .is_directory = is_dir};
    uint8_t *head = NULL, *tail = NULL;
    amni_probe_buf buf = {0};
    int rc = AMN_OK;
    if (src) {
        pd.file_size = src->size;
        size_t hn = src->size < AMN_PROBE_HEAD ? (size_t)src->size : AMN_PROBE_HEAD;
        if ((rc = amni_probe_buf_alloc(&buf, 2 * (hn + AMN_PROBE_PADDING), err)) != AMN_OK)
            goto done;
        head = buf.data;
        tail = buf.data + hn + AMN_PROBE_PADDING;
        if ((rc = amn_source_read(src, 0, head, hn, err)) != AMN_OK) goto done;
        if ((rc = amn_source_read(src, src->size - hn, tail, hn, err)) != AMN_OK) goto done;
        pd.head = head;
        pd.head_size = hn;
        pd.tail = tail;
        pd.tail_size = hn;
    }
    rc = choose(ctx, &pd, from, out, err);
done:
    amni_probe_buf_free(&buf);
    return rc;
}

int amn_ctx_detect_source(const amn_ctx *ctx, const amn_source *src, const char *from,
                          const amn_format **out, amn_error *err) {
    return detect_impl(ctx, src, src->name, false, from, out, err);
}

int amn_ctx_detect(const amn_ctx *ctx, const char *path, const char *from, const amn_format **out,
                   amn_error *err) {
    struct stat st;
    if (stat(path, &st) != 0) return amn_error_set(err, AMN_E_IO, "%s: no such file", path);
    if (S_ISDIR(st.st_mode)) return detect_impl(ctx, NULL, path, true, from, out, err);
    amn_source src;
    int rc = amn_source_file_open(path, &src, err);
    if (rc) return rc;
    rc = detect_impl(ctx, &src, path, false, from, out, err);
    amn_source_file_close(&src);
    return rc;
}

int amn_ctx_resolve(const amn_ctx *ctx, const char *input, char *path, size_t path_size,
                    bool *resolved, amn_error *err) {
    *resolved = false;
    const char *colon = strchr(input, ':');
    struct stat st;
    if (!colon || stat(input, &st) == 0) return AMN_OK;
    amni_registry_load_resolver(ctx, input, (size_t)(colon - input));
    const amn_resolver *found = NULL;
    amni_registry_lock(ctx);
    for (size_t i = 0; !found && i < ctx->n_resolvers; i++) {
        const size_t n = strlen(ctx->resolvers[i]->scheme);
        if ((size_t)(colon - input) == n && strncmp(input, ctx->resolvers[i]->scheme, n) == 0)
            found = ctx->resolvers[i];
    }
    amni_registry_unlock(ctx);
    if (found) {
        int rc = found->resolve(colon + 1, path, path_size, err);
        if (rc == AMN_OK) *resolved = true;
        return rc;
    }
    if (strncmp(input, "ollama:", 7) == 0)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s: ollama: inputs need the gguf plugin; install "
                             "the amn-plugin-gguf package",
                             input);
    return AMN_OK;
}

static int finish_model(amn_model *m, const amn_format *f, const char *path, const amn_limits *lim,
                        amn_error *err) {
    /* kept for readers of the model's companion files (a folder's tokenizer) */
    amn_model_set_limits(m, lim);
    int rc = path ? amn_model_set_path(m, path, err) : AMN_OK;
    if (!rc && amn_model_label(m) == amn_model_format(m))
        rc = amn_model_set_label(m, f->description, err);
    return rc;
}

int amn_open(const amn_ctx *ctx, const char *path, const char *from, const amn_limits *limits,
             amn_model **out, amn_error *err) {
    *out = NULL;
    amn_limits lim;
    int rc = effective_limits(limits, &lim, err);
    if (rc) return rc;
    /* A model folder packed as an archive opens as the folder. */
    if ((rc = amni_archive_open(ctx, path, from, &lim, false, out, err)) != AMNI_NOT_ARCHIVE)
        return rc;
    const amn_format *f;
    rc = amn_ctx_detect(ctx, path, from, &f, err);
    if (rc) return rc;
    if (!f->open)
        return amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: format %s cannot be read",
                             f->name);
    struct stat st;
    amn_map *map = NULL;
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && (rc = amn_map_open(path, &map, err)))
        return rc;
    amn_open_args a = {.struct_size = sizeof a, .path = path, .map = map, .limits = &lim};
    amn_model *m = NULL;
    rc = f->open(&a, &m, err);
    if (rc || !m) {
        amn_map_close(map);
        if (!rc)
            rc = amn_error_set(err, AMN_E_PARSE, "%s: format %s returned no model", path, f->name);
        return rc;
    }
    if (map && (rc = amn_model_adopt(m, map, amn_map_release, err))) {
        amn_model_free(m);
        return rc;
    }
    if ((rc = finish_model(m, f, path, &lim, err))) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

int amn_inspect_source(const amn_ctx *ctx, const amn_source *src, const char *path,
                       const char *from, const amn_limits *limits, amn_model **out,
                       amn_error *err) {
    *out = NULL;
    amn_limits lim;
    int rc = effective_limits(limits, &lim, err);
    if (rc) return rc;
    const amn_format *f;
    rc = detect_impl(ctx, src, path ? path : src->name, false, from, &f, err);
    if (rc) return rc;
    if (!f->inspect)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: format %s has no header-only inspection", f->name);
    amn_inspect_args a = {.struct_size = sizeof a, .src = src, .path = path, .limits = &lim};
    amn_model *m = NULL;
    if ((rc = f->inspect(&a, &m, err))) return rc;
    if (!m) return amn_error_set(err, AMN_E_PARSE, "format %s returned no model", f->name);
    if ((rc = finish_model(m, f, path, &lim, err))) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

int amn_inspect(const amn_ctx *ctx, const char *path, const char *from, const amn_limits *limits,
                amn_model **out, amn_error *err) {
    struct stat st;
    if (stat(path, &st) != 0) return amn_error_set(err, AMN_E_IO, "%s: no such file", path);
    if (S_ISDIR(st.st_mode)) {
        /* A directory of shards has no single stream: its format inspects it by path. */
        const amn_format *f;
        int rc = amn_ctx_detect(ctx, path, from, &f, err);
        if (rc) return rc;
        if (!f->inspect)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: format %s has no header-only inspection", f->name);
        amn_limits lim;
        if ((rc = effective_limits(limits, &lim, err))) return rc;
        amn_inspect_args a = {.struct_size = sizeof a, .src = NULL, .path = path, .limits = &lim};
        amn_model *m = NULL;
        if ((rc = f->inspect(&a, &m, err))) return rc;
        if ((rc = finish_model(m, f, path, &lim, err))) {
            amn_model_free(m);
            return rc;
        }
        *out = m;
        return AMN_OK;
    }
    amn_limits lim;
    int rc = effective_limits(limits, &lim, err);
    if (rc) return rc;
    if ((rc = amni_archive_open(ctx, path, from, &lim, true, out, err)) != AMNI_NOT_ARCHIVE)
        return rc;
    amn_source src;
    if ((rc = amn_source_file_open(path, &src, err))) return rc;
    rc = amn_inspect_source(ctx, &src, path, from, limits, out, err);
    amn_source_file_close(&src);
    return rc;
}
