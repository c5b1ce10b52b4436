/* Private to the safetensors plugin. */
#ifndef ST_INTERNAL_H
#define ST_INTERNAL_H

#include <stdint.h>

#include "amn/plugin.h"

/* Parse one file's header (the 8-byte length and the JSON) from `src` and
 * append its tensors to m. When `data` is non-NULL (the whole file mapped),
 * tensors point into it; otherwise only the header is read. */
int st_read_header(const amn_source *src, const uint8_t *data, const amn_limits *lim, amn_model *m,
                   amn_error *err);

/* Open or inspect a sharded model: an *.safetensors.index.json or a directory. */
int st_open_sharded(const char *path, bool header_only, const amn_limits *lim, amn_model **out,
                    amn_error *err);

bool st_is_index_path(const char *path);

extern const amn_writer st_writer;

#endif
