/* Private to core: the registry behind amn_ctx. */
#ifndef AMN_REGISTRY_INTERNAL_H
#define AMN_REGISTRY_INTERNAL_H

#include <stddef.h>

#include "amn/context.h"
#include "amn/plugin.h"

typedef struct plugin_rec {
    char *name, *version, *description, *license, *file, *status, *reason;
    unsigned abi_major, abi_minor;
    void *handle; /* lt_dlhandle, NULL for built-ins and rejected files */
    const amn_format **formats;
    size_t n_formats;
    const amn_scheme **schemes;
    size_t n_schemes;
    const amn_resolver **resolvers;
    size_t n_resolvers;
} plugin_rec;

struct amn_ctx {
    plugin_rec *plugins;
    size_t n_plugins, cap_plugins;
    const amn_format **formats; /* of loaded plugins, in load order */
    size_t n_formats;
    const amn_scheme **schemes;
    size_t n_schemes;
    const char **scheme_owner; /* plugin name per scheme */
    const char **format_owner;
    const amn_resolver **resolvers;
    size_t n_resolvers;
    int ltdl_ready;
};

/* Plugins linked into libamn (AMN_STATIC_PLUGINS), NULL-terminated; only the
 * terminator in a build of loadable modules. Generated: builtin_plugins.c. */
extern const amn_plugin_desc *const amni_builtin_plugins[];

/* Plugins the project knows, for "install the amn-X plugin" messages. */
const char *amni_known_plugin_for_file(const char *path, const uint8_t *head, size_t head_size,
                                       uint64_t file_size);

#endif
