/* Private to core: the registry behind amn_ctx. */
#ifndef AMN_REGISTRY_INTERNAL_H
#define AMN_REGISTRY_INTERNAL_H

#include <stddef.h>

#include <pthread.h>
#include <stdbool.h>

#include "amn/context.h"
#include "amn/plugin.h"
#include "registry_cache.h"

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
    /* What the registry cache says of this module: for a pending plugin the
     * entry it was found by, for a loaded module the one to write. */
    amni_cached_plugin *cached;
    amni_file_key key;
    bool pending; /* known from the cache, not loaded yet */
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
    /* Lazy loading (registry.c): the cache read at start, where it lives
     * (NULL: no cache), whether it must be rewritten, how many plugins are
     * still pending, and a lock that serialises loading. */
    amni_cache cache;
    char *cache_path;
    bool cache_dirty, trace;
    size_t n_pending;
    pthread_mutex_t lock;
};

/* The lists above change when a pending plugin loads: whoever walks them
 * (probing, planning, a lookup by name) holds the registry's lock, so that a
 * context can be shared by threads. Once every plugin is loaded they never
 * change again (the public accessors load everything first). */
void amni_registry_lock(const amn_ctx *ctx);
void amni_registry_unlock(const amn_ctx *ctx);

/* Loading what the registry only knows from its cache. Each takes the lock;
 * none fails (a module that fails to load is recorded as rejected). */
void amni_registry_load_all(const amn_ctx *ctx);
/* Every pending plugin with a format whose probe could score pd above WEAK. */
void amni_registry_load_for_probe(const amn_ctx *ctx, const amn_probe_data *pd);
/* Every pending plugin with a scheme whose detect could claim in m; true when
 * no plugin with a scheme stays pending afterwards. */
bool amni_registry_load_for_model(const amn_ctx *ctx, const amn_model *m);
/* The pending plugin whose resolver handles "<prefix>:" inputs. */
void amni_registry_load_resolver(const amn_ctx *ctx, const char *prefix, size_t n);

/* Plugins linked into libamn (AMN_STATIC_PLUGINS), NULL-terminated; only the
 * terminator in a build of loadable modules. Generated: builtin_plugins.c. */
extern const amn_plugin_desc *const amni_builtin_plugins[];

/* Plugins the project knows, for "install the amn-plugin-X package" messages. */
const char *amni_known_plugin_for_file(const char *path, const uint8_t *head, size_t head_size,
                                       uint64_t file_size);

#endif
