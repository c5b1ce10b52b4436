/* The "gguf" format vtable: probe, open (mapped), inspect (header only). */
#include <string.h>

#include "gguf_format.h"

/* An unsigned number of n bytes, little- or big-endian. */
static uint64_t load(const uint8_t *p, int n, bool be) {
    uint64_t v = 0;
    if (be)
        for (int i = 0; i < n; i++) v = v << 8 | p[i];
    else
        for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static int probe(const amn_probe_data *pd) {
    if (pd->is_directory || pd->head_size < 8 || memcmp(pd->head, GGUF_MAGIC, 4) != 0)
        return AMN_PROBE_NONE;
    /* A version whose low 16 bits read as zero: a big-endian file (gguf-py). */
    const bool be = pd->head[4] == 0 && pd->head[5] == 0;
    const uint32_t version = (uint32_t)load(pd->head + 4, 4, be);
    /* The magic alone is claimed firmly enough that open() explains what is
     * wrong (a newer version) instead of "unrecognised". */
    if (version < 1 || version > 3 || pd->head_size < 24) return AMN_PROBE_LIKELY;
    const int w = version == 1 ? 4 : 8;
    const uint64_t n_tensors = load(pd->head + 8, w, be), n_kv = load(pd->head + 8 + w, w, be);
    /* Each tensor info and each key/value takes more than 8 bytes. */
    if (n_tensors > pd->file_size / 8 || n_kv > pd->file_size / 8) return AMN_PROBE_LIKELY;
    return AMN_PROBE_MAX - 5;
}

/* The file at path (NULL: a stream), or with its other shards the whole
 * model it is a shard of (gguf_split.c). */
static int read_model(const amn_source *src, const uint8_t *map, const char *path,
                      const amn_siblings *sib, const amn_limits *lim, amn_model **out,
                      amn_error *err) {
    amn_model *m = amn_model_new("gguf");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = gguf_read(src, map, lim, m, err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    return gguf_split_resolve(path, sib, m, map == NULL, lim, out, err);
}

static int open_model(const amn_open_args *a, amn_model **out, amn_error *err) {
    if (!a->map)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s: a directory is not a GGUF file", a->path);
    amn_source src;
    const uint64_t size = amn_map_size(a->map);
    if (size > SIZE_MAX) return amn_error_set(err, AMN_E_LIMIT, "%s: file too large", a->path);
    amn_source_memory(&src, amn_map_data(a->map), (size_t)size, a->path);
    const amn_siblings *sib = AMN_HAS_FIELD(a, amn_open_args, siblings) ? a->siblings : NULL;
    return read_model(&src, amn_map_data(a->map), a->path, sib, a->limits, out, err);
}

static int inspect(const amn_inspect_args *a, amn_model **out, amn_error *err) {
    if (!a->src)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s: a directory is not a GGUF file",
                             a->path ? a->path : "input");
    amn_source src = *a->src;
    if (!src.name) src.name = a->path;
    const amn_siblings *sib = AMN_HAS_FIELD(a, amn_inspect_args, siblings) ? a->siblings : NULL;
    return read_model(&src, NULL, a->path, sib, a->limits, out, err);
}

/* probe() scores nothing without the magic. */
static const amn_probe_sig gguf_sigs[] = {{.offset = 0, .length = 4, .bytes = "GGUF"}, {0}};

const amn_format amn_gguf_format = {
    .struct_size = sizeof(amn_format),
    .name = "gguf",
    .description = "GGUF (llama.cpp / ggml), versions 1 to 3",
    .extensions = "gguf",
    .probe = probe,
    .open = open_model,
    .inspect = inspect,
    .writer = &gguf_writer,
    /* llama.cpp's converter and quantizer keep norms and biases F32. */
    .flags = AMN_FORMAT_VECTORS_F32,
    .probe_sigs = gguf_sigs,
};
