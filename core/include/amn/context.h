/* amn/context.h — the plugin registry: loading plugins, finding a format for a
 * file, opening it, and the conversion matrix that follows from what loaded.
 *
 * Plugins are searched, first name wins, in this order: built-in plugins (a
 * build with -DAMN_STATIC_PLUGINS=ON links them into libamn), directories
 * given in amn_ctx_options, $AMN_PLUGIN_PATH (colon-separated), then
 * $AMN_PLUGIN_SYSTEM_PATH if set (even empty) or else the directory
 * amn/plugins beside libamn itself (the install's
 * ${libdir}/amn/plugins, and the build tree's lib/amn/plugins). Modules
 * the registry cache describes unchanged are loaded when first needed
 * (probing, planning, a format asked for by name; doc/plugins.md,
 * "Registry cache"); the functions that list the registry load every
 * plugin first. Loading is serialised inside the context, so one context
 * may be shared by threads.
 */
#ifndef AMN_CONTEXT_H
#define AMN_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "amn/error.h"
#include "amn/export.h"
#include "amn/format.h"
#include "amn/model.h"
#include "amn/scheme.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct amn_ctx amn_ctx;

/* Application ABI: the structs an application fills (options) or lends to
 * libamn to fill (info, summaries, stats) start with struct_size, set by the
 * caller to sizeof the struct as its header declares it. libamn reads or
 * writes only the bytes struct_size covers, so a program built against an
 * older header keeps working when fields are appended; options larger than
 * this libamn knows are accepted only when the unknown tail is zero.
 * A struct_size below the first release's size is AMN_E_INVALID. */
typedef struct amn_ctx_options {
    uint32_t struct_size;           /* sizeof(amn_ctx_options) */
    const char *const *plugin_dirs; /* searched before the environment */
    size_t n_plugin_dirs;
    bool no_env;     /* ignore AMN_PLUGIN_PATH and AMN_PLUGIN_SYSTEM_PATH */
    bool no_default; /* skip the directory beside libamn */
    bool no_builtin; /* skip the plugins linked into libamn (AMN_STATIC_PLUGINS) */
} amn_ctx_options;

/* Load plugins. A plugin that fails to load is recorded (see
 * amn_ctx_plugin_*) and skipped; only running out of memory fails here. */
AMN_API int amn_ctx_new(const amn_ctx_options *opts, amn_ctx **out, amn_error *err);
AMN_API void amn_ctx_free(amn_ctx *ctx);
/* Free the context but leave its plugin modules loaded, for a process about
 * to exit: unloading a module is one munmap per mapping (and, on a
 * multi-core machine, a TLB shootdown each), work the exit does anyway in
 * one go. With 11 plugins this is a quarter of `amn inspect`'s CPU time.
 * Pointers into the plugins stay valid. */
AMN_API void amn_ctx_free_keep_modules(amn_ctx *ctx);

/* What was found, for `amn plugins`. Status is "loaded", "shadowed" or
 * "rejected"; reason explains the last two. */
AMN_API size_t amn_ctx_plugin_count(const amn_ctx *ctx);
typedef struct amn_plugin_info {
    uint32_t struct_size; /* set by the caller; see amn_ctx_options */
    const char *name;
    const char *version;
    const char *description;
    const char *license;
    const char *file; /* "(built-in)" for static plugins */
    const char *status;
    const char *reason;
    unsigned abi_major, abi_minor;
    size_t n_formats, n_schemes;
    const amn_format *const *formats;
    const amn_scheme *const *schemes;
    size_t n_resolvers;
    const struct amn_resolver *const *resolvers;
} amn_plugin_info;
AMN_API int amn_ctx_plugin(const amn_ctx *ctx, size_t i, amn_plugin_info *out);

AMN_API size_t amn_ctx_format_count(const amn_ctx *ctx);
AMN_API const amn_format *amn_ctx_format(const amn_ctx *ctx, size_t i);
AMN_API const amn_format *amn_ctx_find_format(const amn_ctx *ctx, const char *name);
AMN_API size_t amn_ctx_scheme_count(const amn_ctx *ctx);
AMN_API const amn_scheme *amn_ctx_scheme(const amn_ctx *ctx, size_t i);

/* Choose the format of path (file or directory). `from` forces a format by
 * name (NULL: probe). A file no loaded plugin accepts but a known plugin
 * would gives AMN_E_UNSUPPORTED "... install the amn-plugin-X package". */
AMN_API int amn_ctx_detect(const amn_ctx *ctx, const char *path, const char *from,
                           const amn_format **out, amn_error *err);
/* Same, over a read callback (no directory support). */
AMN_API int amn_ctx_detect_source(const amn_ctx *ctx, const amn_source *src, const char *from,
                                  const amn_format **out, amn_error *err);

/* If input is "<scheme>:<spec>" for a registered resolver (ollama:...), write
 * the path it names into path and set *resolved; otherwise leave the input as
 * it is (*resolved = false). Inputs that exist as files are never resolved. */
AMN_API int amn_ctx_resolve(const amn_ctx *ctx, const char *input, char *path, size_t path_size,
                            bool *resolved, amn_error *err);

/* Open a whole model (tensor data mapped). limits may be NULL (defaults). */
AMN_API int amn_open(const amn_ctx *ctx, const char *path, const char *from,
                     const amn_limits *limits, amn_model **out, amn_error *err);
/* Read only the header: tensors come back with data == NULL. */
AMN_API int amn_inspect(const amn_ctx *ctx, const char *path, const char *from,
                        const amn_limits *limits, amn_model **out, amn_error *err);
AMN_API int amn_inspect_source(const amn_ctx *ctx, const amn_source *src, const char *path,
                               const char *from, const amn_limits *limits, amn_model **out,
                               amn_error *err);

#ifdef __cplusplus
}
#endif
#endif
