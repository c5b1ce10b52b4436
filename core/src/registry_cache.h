/* Private to core: the registry cache, what the core knows about a plugin
 * module without loading it (doc/plugins.md, "Registry cache"). */
#ifndef AMN_REGISTRY_CACHE_H
#define AMN_REGISTRY_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/format.h"

/* Caps on what one cache file may describe (a hostile file cannot make the
 * parser allocate more than this). */
#define AMNI_CACHE_MAX_BYTES   (1u << 20)
#define AMNI_CACHE_MAX_PLUGINS 1024
#define AMNI_CACHE_MAX_ITEMS   64 /* formats, schemes, resolvers, signatures, keys per parent */
#define AMNI_CACHE_MAX_FIELD   1024

/* The identity of a module file: any difference means "load it again". */
typedef struct amni_file_key {
    uint64_t size, mtime_ns, ino, dev;
} amni_file_key;

typedef struct amni_cached_format {
    char *name, *extensions;
    bool sigs_known; /* false: the probe must run (load the plugin) */
    size_t n_sigs;
    amn_probe_sig *sigs;
} amni_cached_format;

typedef struct amni_cached_key {
    char *suffix;
    uint64_t dtypes;
} amni_cached_key;

typedef struct amni_cached_scheme {
    char *name;
    bool keys_known; /* false: detect must run (load the plugin) */
    size_t n_keys;
    amni_cached_key *keys;
    bool targets_known; /* false: only loading the plugin tells what it encodes */
    size_t n_targets;
    char **targets; /* its encoder's targets ("bnb-nf4", "Q4_K_M"); none without one */
} amni_cached_scheme;

typedef struct amni_cached_plugin {
    char *file;
    amni_file_key key;
    char *name, *version, *description, *license;
    unsigned abi_major, abi_minor;
    size_t n_formats, n_schemes, n_resolvers;
    amni_cached_format *formats;
    amni_cached_scheme *schemes;
    char **resolvers; /* the resolver's scheme ("ollama") */
} amni_cached_plugin;

typedef struct amni_cache {
    size_t n, cap;
    amni_cached_plugin **plugins;
} amni_cache;

void amni_cached_plugin_free(amni_cached_plugin *p);
void amni_cache_clear(amni_cache *c);

/* Parse a whole cache file held in memory; any fault (version, checksum,
 * field, size) leaves *c empty and returns false. */
bool amni_cache_parse(const char *text, size_t len, amni_cache *c);
/* Serialize; returns a malloc'd NUL-terminated text, or NULL (out of memory,
 * or a string that cannot be written, which then is not cached). */
char *amni_cache_format(const amni_cached_plugin *const *plugins, size_t n, size_t *len);

/* Read the cache at path (missing, unreadable or invalid: empty). */
bool amni_cache_load(const char *path, amni_cache *c);
/* Write atomically (temporary file + rename) into path's directory, making
 * the directory if needed; false when anything fails (no cache then). */
bool amni_cache_store(const char *path, const char *text, size_t len);

bool amni_file_key_of(const char *path, amni_file_key *k);

/* Whether a plain string may go into the cache (printable, no tab, bounded). */
bool amni_cache_str_ok(const char *s);

#endif
