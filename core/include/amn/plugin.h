/* amn/plugin.h — what a plugin exports, and how it registers what it provides.
 *
 * A plugin is a shared module named amn-<name>.so exporting exactly one data
 * symbol, amn_plugin_v2, an amn_plugin_desc. The core checks the descriptor
 * (magic, ABI, size, name) before running any plugin code, then calls init()
 * with a registrar; what init registers is committed only if init succeeds and
 * every vtable validates.
 *
 *     static int init(amn_registrar *r) { return amn_register_format(r, &my_format); }
 *     AMN_PLUGIN_DEFINE(toy, "1.0", "A toy format", "MIT", init);
 *
 * ABI rules. The descriptor records the ABI the plugin was built for
 * (AMN_PLUGIN_ABI_MAJOR / _MINOR from amn/version.h); the core loads it when
 * the major is equal and the minor not newer than its own. Within a major,
 * structs only grow at their end, and every struct that crosses the boundary
 * starts with struct_size (or, for amn_plugin_desc, desc_size): the core reads
 * only the fields a plugin's size covers and takes NULL / 0 for the rest, so a
 * plugin built against an older 2.x header keeps working. amn_kv, amn_str and
 * amn_source are frozen (see their headers).
 *
 * Built-in plugins: with -DAMN_STATIC_PLUGINS=ON the build compiles each
 * in-tree plugin with AMN_PLUGIN_BUILTIN defined, so its descriptor is named
 * amn_<name>_LTX_amn_plugin_v2 (libltdl's preloaded-symbol convention) and
 * links it into libamn, which registers these first, through the same checks
 * as a loaded module. A module of the same name found on disk is then
 * reported as shadowed.
 */
#ifndef AMN_PLUGIN_H
#define AMN_PLUGIN_H

#include <stdint.h>

#include "amn/format.h"
#include "amn/scheme.h"
#include "amn/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMN_PLUGIN_MAGIC 0x504e4d41u /* "AMNP" */

typedef struct amn_registrar amn_registrar;

typedef struct amn_plugin_desc {
    uint32_t magic;     /* AMN_PLUGIN_MAGIC */
    uint16_t abi_major; /* must equal the core's AMN_PLUGIN_ABI_MAJOR */
    uint16_t abi_minor; /* must be <= the core's AMN_PLUGIN_ABI_MINOR */
    uint32_t desc_size; /* sizeof(amn_plugin_desc) as the plugin was built */
    uint32_t flags;     /* reserved, 0 */
    const char *name;   /* matches the file: amn-<name>.so */
    const char *version;
    const char *description;
    const char *license;
    int (*init)(amn_registrar *r); /* returns AMN_OK or an AMN_E_* code */
} amn_plugin_desc;

/* Turns "<scheme>:<spec>" inputs (e.g. "ollama:llama3.2:1b") into a path. */
typedef struct amn_resolver {
    uint32_t struct_size;
    const char *scheme; /* "ollama" */
    const char *description;
    /* spec is the text after "<scheme>:"; writes a NUL-terminated path. */
    int (*resolve)(const char *spec, char *path, size_t path_size, amn_error *err);
} amn_resolver;

/* Register a format, scheme or input resolver. The vtable must outlive the
 * plugin's use (static const data); struct_size lets later ABI minors append
 * slots. */
AMN_API int amn_register_format(amn_registrar *r, const amn_format *f);
AMN_API int amn_register_scheme(amn_registrar *r, const amn_scheme *s);
AMN_API int amn_register_resolver(amn_registrar *r, const amn_resolver *res);

#ifdef AMN_PLUGIN_BUILTIN
/* Inside libamn: a distinct name per plugin, found through libamn's table. */
#define AMN_PLUGIN_SYMBOL_(n) amn_##n##_LTX_amn_plugin_v2
#define AMN_PLUGIN_EXPORT_    __attribute__((visibility("hidden")))
#else
#define AMN_PLUGIN_SYMBOL_(n) amn_plugin_v2
#define AMN_PLUGIN_EXPORT_    __attribute__((visibility("default")))
#endif
#define AMN_PLUGIN_SYMBOL(n) AMN_PLUGIN_SYMBOL_(n)

/* clang-format off */
#define AMN_PLUGIN_DEFINE(n, ver, desc, lic, initfn)                                               \
    AMN_PLUGIN_EXPORT_ extern const amn_plugin_desc AMN_PLUGIN_SYMBOL(n);                          \
    AMN_PLUGIN_EXPORT_ const amn_plugin_desc AMN_PLUGIN_SYMBOL(n) = {                              \
        AMN_PLUGIN_MAGIC,                                                                          \
        AMN_PLUGIN_ABI_MAJOR,                                                                      \
        AMN_PLUGIN_ABI_MINOR,                                                                      \
        sizeof(amn_plugin_desc),                                                                   \
        0,                                                                                         \
        #n,                                                                                        \
        ver,                                                                                       \
        desc,                                                                                      \
        lic,                                                                                       \
        initfn}
/* clang-format on */

#ifdef __cplusplus
}
#endif
#endif
