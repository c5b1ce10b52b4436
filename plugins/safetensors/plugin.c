/* amn-safetensors: Hugging Face safetensors, single files and sharded models. */
#include <string.h>

#include "st_internal.h"

static int probe(const amn_probe_data *pd) {
    if (pd->is_directory) {
        /* A directory is ours if opening it as shards would find something;
         * the cheap check is left to open(), so score it as possible. */
        return AMN_PROBE_POSSIBLE;
    }
    if (st_is_index_path(pd->path) && pd->head_size > 0 && pd->head[0] == '{')
        return AMN_PROBE_LIKELY + 10;
    if (pd->head_size < 10 || pd->file_size < 10) return AMN_PROBE_NONE;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | pd->head[i];
    if (n < 2 || n > pd->file_size - 8 || pd->head[8] != '{') return AMN_PROBE_NONE;
    int score = AMN_PROBE_POSSIBLE + 10; /* length fits the file and JSON starts */
    if (n + 8 <= pd->head_size) {
        /* The whole header is in view: it must close with '}' then padding. */
        size_t end = (size_t)n + 8;
        while (end > 9 && pd->head[end - 1] == ' ') end--;
        if (pd->head[end - 1] != '}') return AMN_PROBE_WEAK;
        if (memchr(pd->head + 8, '"', (size_t)n)) score = AMN_PROBE_MAX - 5;
    }
    return score;
}

static bool is_dir(const amn_open_args *a) {
    return a->map == NULL;
}

static int open_model(const amn_open_args *a, amn_model **out, amn_error *err) {
    if (is_dir(a) || st_is_index_path(a->path))
        return st_open_sharded(a->path, false, a->limits, out, err);
    amn_model *m = amn_model_new("safetensors");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    amn_source src;
    amn_source_memory(&src, amn_map_data(a->map), (size_t)amn_map_size(a->map), a->path);
    int rc = st_read_header(&src, amn_map_data(a->map), a->limits, m, err);
    if (!rc) rc = amn_model_set_label(m, "safetensors", err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

static int inspect(const amn_inspect_args *a, amn_model **out, amn_error *err) {
    if (!a->src || st_is_index_path(a->path))
        return st_open_sharded(a->path, true, a->limits, out, err);
    amn_model *m = amn_model_new("safetensors");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = st_read_header(a->src, NULL, a->limits, m, err);
    if (!rc) rc = amn_model_set_label(m, "safetensors", err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* What probe() needs before it scores above WEAK: a directory, an index
 * starting with '{', or the JSON header's '{' after the 8-byte length. */
static const amn_probe_sig st_sigs[] = {
    {.flags = AMN_PROBE_SIG_DIRECTORY},
    {.offset = 0, .length = 1, .bytes = "{"},
    {.offset = 8, .length = 1, .bytes = "{"},
    {0},
};

static const amn_format safetensors_format = {
    .struct_size = sizeof(amn_format),
    .name = "safetensors",
    .description = "Hugging Face safetensors (single file, index or directory of shards)",
    .extensions = "safetensors,sft,json",
    .probe = probe,
    .open = open_model,
    .inspect = inspect,
    .writer = &st_writer,
    .probe_sigs = st_sigs,
};

static int init(amn_registrar *r) {
    return amn_register_format(r, &safetensors_format);
}

AMN_PLUGIN_DEFINE(safetensors, AMN_VERSION_STRING, "safetensors reader and writer", "MIT", init);
