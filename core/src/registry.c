/* Plugin discovery, validation and registration (libltdl). */
#include <dirent.h>
#include <dlfcn.h>
#include <ltdl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "abi_internal.h"
#include "util_internal.h"
#include "amn/plugin.h"
#include "amn/version.h"
#include "registry_internal.h"

struct amn_registrar {
    amn_ctx *ctx;
    const char *plugin;
    const amn_format **formats;
    size_t n_formats, cap_formats;
    const amn_scheme **schemes;
    size_t n_schemes, cap_schemes;
    const amn_resolver **resolvers;
    size_t n_resolvers, cap_resolvers;
    char reason[256];
};

/* The smallest layouts the core accepts (every slot a plugin must fill);
 * later slots are read only when a vtable's struct_size covers them. */
#define DESC_MIN_SIZE    AMNI_SIZE_TO(amn_plugin_desc, init)
#define FORMAT_MIN_SIZE  AMNI_SIZE_TO(amn_format, writer)
#define SCHEME_MIN_SIZE  AMNI_SIZE_TO(amn_scheme, dequantize)
#define WRITER_MIN_SIZE  AMNI_SIZE_TO(amn_writer, abort)
#define ENCODER_MIN_SIZE AMNI_SIZE_TO(amn_encoder, end)

static bool push(void *arrp, size_t *n, size_t *cap, const void *item) {
    const void ***arr = arrp;
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 8;
        const void **p = realloc(*arr, nc * sizeof *p);
        if (!p) return false;
        *arr = p;
        *cap = nc;
    }
    (*arr)[(*n)++] = item;
    return true;
}

static bool valid_name(const char *s) {
    if (!s || !*s || strlen(s) > 64) return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' || *s == '-'))
            return false;
    return true;
}

/* A plugin known from the cache but not loaded yet still holds its names, as
 * it would had it been loaded in its turn. */
static bool pending_holds(const amn_ctx *ctx, const char *format, const char *scheme,
                          const char *resolver) {
    for (size_t i = 0; i < ctx->n_plugins; i++) {
        const amni_cached_plugin *c = ctx->plugins[i].pending ? ctx->plugins[i].cached : NULL;
        for (size_t k = 0; c && format && k < c->n_formats; k++)
            if (strcmp(c->formats[k].name, format) == 0) return true;
        for (size_t k = 0; c && scheme && k < c->n_schemes; k++)
            if (strcmp(c->schemes[k].name, scheme) == 0) return true;
        for (size_t k = 0; c && resolver && k < c->n_resolvers; k++)
            if (strcmp(c->resolvers[k], resolver) == 0) return true;
    }
    return false;
}

static bool format_taken(const amn_registrar *r, const char *name) {
    if (pending_holds(r->ctx, name, NULL, NULL)) return true;
    for (size_t i = 0; i < r->ctx->n_formats; i++)
        if (strcmp(r->ctx->formats[i]->name, name) == 0) return true;
    for (size_t i = 0; i < r->n_formats; i++)
        if (strcmp(r->formats[i]->name, name) == 0) return true;
    return false;
}

static bool scheme_taken(const amn_registrar *r, const char *name) {
    if (pending_holds(r->ctx, NULL, name, NULL)) return true;
    for (size_t i = 0; i < r->ctx->n_schemes; i++)
        if (strcmp(r->ctx->schemes[i]->name, name) == 0) return true;
    for (size_t i = 0; i < r->n_schemes; i++)
        if (strcmp(r->schemes[i]->name, name) == 0) return true;
    return false;
}

static int reject(amn_registrar *r, const char *why, const char *name) {
    snprintf(r->reason, sizeof r->reason, "%s%s%s", why, name ? ": " : "", name ? name : "");
    return AMN_E_INVALID;
}

int amn_register_format(amn_registrar *r, const amn_format *f) {
    if (!r || !f) return AMN_E_INVALID;
    if (f->struct_size < FORMAT_MIN_SIZE) return reject(r, "format vtable too small", NULL);
    if (!valid_name(f->name)) return reject(r, "invalid format name", f->name);
    if (!f->probe) return reject(r, "format without probe", f->name);
    if (!f->open && !f->inspect && !f->writer)
        return reject(r, "format with neither reader nor writer", f->name);
    if (f->writer && (f->writer->struct_size < WRITER_MIN_SIZE || !f->writer->begin ||
                      !f->writer->finish || !f->writer->abort))
        return reject(r, "incomplete writer", f->name);
    const char *const *opts = amni_writer_options(f->writer);
    for (size_t i = 0; opts && opts[i]; i++)
        if (i >= 64 || !valid_name(opts[i])) return reject(r, "invalid writer option", opts[i]);
    if (format_taken(r, f->name)) return reject(r, "format already registered", f->name);
    if (!push(&r->formats, &r->n_formats, &r->cap_formats, f)) return AMN_E_NOMEM;
    return AMN_OK;
}

int amn_register_scheme(amn_registrar *r, const amn_scheme *s) {
    if (!r || !s) return AMN_E_INVALID;
    if (s->struct_size < SCHEME_MIN_SIZE) return reject(r, "scheme vtable too small", NULL);
    if (!valid_name(s->name)) return reject(r, "invalid scheme name", s->name);
    if (!s->detect || !s->dequantize) return reject(r, "scheme without detect/dequantize", s->name);
    const amn_encoder *e = amn_scheme_encoder(s);
    if (e && (e->struct_size < ENCODER_MIN_SIZE || !e->targets || !e->begin || !e->tensor ||
              !e->fill || !e->tensor_free || !e->end))
        return reject(r, "scheme with an incomplete encoder", s->name);
    if (scheme_taken(r, s->name)) return reject(r, "scheme already registered", s->name);
    if (!push(&r->schemes, &r->n_schemes, &r->cap_schemes, s)) return AMN_E_NOMEM;
    return AMN_OK;
}

int amn_register_resolver(amn_registrar *r, const amn_resolver *res) {
    if (!r || !res) return AMN_E_INVALID;
    if (res->struct_size < offsetof(amn_resolver, resolve) + sizeof(void *))
        return reject(r, "resolver vtable too small", NULL);
    if (!valid_name(res->scheme) || !res->resolve)
        return reject(r, "invalid resolver", res->scheme);
    for (size_t i = 0; i < r->ctx->n_resolvers; i++)
        if (strcmp(r->ctx->resolvers[i]->scheme, res->scheme) == 0)
            return reject(r, "resolver already registered", res->scheme);
    if (pending_holds(r->ctx, NULL, NULL, res->scheme))
        return reject(r, "resolver already registered", res->scheme);
    if (!push(&r->resolvers, &r->n_resolvers, &r->cap_resolvers, res)) return AMN_E_NOMEM;
    return AMN_OK;
}

static plugin_rec *new_record(amn_ctx *ctx) {
    if (ctx->n_plugins == ctx->cap_plugins) {
        size_t nc = ctx->cap_plugins ? ctx->cap_plugins * 2 : 16;
        plugin_rec *p = realloc(ctx->plugins, nc * sizeof *p);
        if (!p) return NULL;
        ctx->plugins = p;
        ctx->cap_plugins = nc;
    }
    plugin_rec *rec = &ctx->plugins[ctx->n_plugins++];
    memset(rec, 0, sizeof *rec);
    return rec;
}

static void set_status(plugin_rec *rec, const char *status, const char *reason) {
    free(rec->status);
    free(rec->reason);
    rec->status = amni_strdup(status);
    rec->reason = amni_strdup(reason);
}

/* A plugin of that name that loaded, or that the cache says will load. */
static const plugin_rec *loaded_plugin(const amn_ctx *ctx, const char *name) {
    for (size_t i = 0; i < ctx->n_plugins; i++) {
        const plugin_rec *p = &ctx->plugins[i];
        if (!p->name || strcmp(p->name, name) != 0) continue;
        if (p->pending || (p->status && strcmp(p->status, "loaded") == 0)) return p;
    }
    return NULL;
}

static void trace(const amn_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(const amn_ctx *ctx, const char *fmt, ...) {
    if (!ctx->trace) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("amn registry: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* The context's flat lists, rebuilt from the loaded plugins in search order
 * (not load order: schemes detect in that order, and a plugin loaded late
 * must not change what an earlier one sees). */
static bool rebuild_lists(amn_ctx *ctx) {
    size_t nf = 0, ns = 0, nr = 0;
    for (size_t i = 0; i < ctx->n_plugins; i++) {
        nf += ctx->plugins[i].n_formats;
        ns += ctx->plugins[i].n_schemes;
        nr += ctx->plugins[i].n_resolvers;
    }
    const amn_format **fs = malloc((nf + 1) * sizeof *fs);
    const char **fo = malloc((nf + 1) * sizeof *fo);
    const amn_scheme **ss = malloc((ns + 1) * sizeof *ss);
    const char **so = malloc((ns + 1) * sizeof *so);
    const amn_resolver **rs = malloc((nr + 1) * sizeof *rs);
    if (!fs || !fo || !ss || !so || !rs) {
        free(fs), free(fo), free(ss), free(so), free(rs);
        return false;
    }
    nf = ns = nr = 0;
    for (size_t i = 0; i < ctx->n_plugins; i++) {
        const plugin_rec *p = &ctx->plugins[i];
        for (size_t k = 0; k < p->n_formats; k++) fo[nf] = p->name, fs[nf++] = p->formats[k];
        for (size_t k = 0; k < p->n_schemes; k++) so[ns] = p->name, ss[ns++] = p->schemes[k];
        for (size_t k = 0; k < p->n_resolvers; k++) rs[nr++] = p->resolvers[k];
    }
    free(ctx->formats), free(ctx->format_owner), free(ctx->schemes), free(ctx->scheme_owner);
    free(ctx->resolvers);
    ctx->formats = fs, ctx->format_owner = fo, ctx->n_formats = nf;
    ctx->schemes = ss, ctx->scheme_owner = so, ctx->n_schemes = ns;
    ctx->resolvers = rs, ctx->n_resolvers = nr;
    return true;
}

/* Validate a descriptor before any of its code runs, then let it register into
 * a staging area that is committed only if init succeeds. */
static int admit(amn_ctx *ctx, plugin_rec *rec, const amn_plugin_desc *d, const char *expect) {
    char why[256];
    if (d->magic != AMN_PLUGIN_MAGIC) {
        set_status(rec, "rejected", "bad descriptor magic");
        return -1;
    }
    if (d->abi_major != AMN_PLUGIN_ABI_MAJOR || d->abi_minor > AMN_PLUGIN_ABI_MINOR) {
        snprintf(why, sizeof why, "built for plugin ABI %u.%u, this amn speaks %d.%d", d->abi_major,
                 d->abi_minor, AMN_PLUGIN_ABI_MAJOR, AMN_PLUGIN_ABI_MINOR);
        set_status(rec, "rejected", why);
        return -1;
    }
    rec->abi_major = d->abi_major;
    rec->abi_minor = d->abi_minor;
    if (d->desc_size < DESC_MIN_SIZE || !d->init || !d->name || !d->version || !d->description ||
        !d->license) {
        set_status(rec, "rejected", "incomplete descriptor");
        return -1;
    }
    if (!valid_name(d->name) || (expect && strcmp(d->name, expect) != 0)) {
        snprintf(why, sizeof why, "descriptor names plugin '%.64s', file says '%.64s'", d->name,
                 expect ? expect : "");
        set_status(rec, "rejected", why);
        return -1;
    }
    /* A plugin loaded late had these from the cache: the descriptor's win. */
    free(rec->name), free(rec->version), free(rec->description), free(rec->license);
    rec->name = amni_strdup(d->name);
    rec->version = amni_strdup(d->version);
    rec->description = amni_strdup(d->description);
    rec->license = amni_strdup(d->license);
    if (loaded_plugin(ctx, d->name)) {
        set_status(rec, "shadowed", "a plugin of the same name was found earlier");
        return -1;
    }
    amn_registrar r = {.ctx = ctx, .plugin = d->name};
    int rc = d->init(&r);
    if (rc != AMN_OK) {
        snprintf(why, sizeof why, "init failed: %.200s",
                 r.reason[0] ? r.reason : amn_error_class(rc));
        set_status(rec, "rejected", why);
        free(r.formats);
        free(r.schemes);
        free(r.resolvers);
        return -1;
    }
    /* Commit: the plugin's own lists, then the context's flat lists. */
    rec->formats = r.formats;
    rec->n_formats = r.n_formats;
    rec->schemes = r.schemes;
    rec->n_schemes = r.n_schemes;
    rec->resolvers = r.resolvers;
    rec->n_resolvers = r.n_resolvers;
    if (!rebuild_lists(ctx)) {
        set_status(rec, "rejected", "out of memory");
        free(rec->formats), free(rec->schemes), free(rec->resolvers);
        rec->formats = NULL, rec->schemes = NULL, rec->resolvers = NULL;
        rec->n_formats = rec->n_schemes = rec->n_resolvers = 0;
        return -1;
    }
    set_status(rec, "loaded", NULL);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- what the cache records of a loaded module ---- */

static bool describe_format(const amn_format *f, amni_cached_format *cf) {
    cf->name = amni_strdup(f->name);
    cf->extensions = amni_strdup(f->extensions ? f->extensions : "");
    if (!cf->name || !cf->extensions) return false;
    const amn_probe_sig *sigs = amn_format_probe_sigs(f);
    size_t n = 0;
    while (sigs && n <= AMNI_CACHE_MAX_ITEMS && (sigs[n].length || sigs[n].flags)) n++;
    bool ok = sigs && n <= AMNI_CACHE_MAX_ITEMS;
    for (size_t i = 0; ok && i < n; i++)
        ok = sigs[i].offset < AMN_PROBE_HEAD && sigs[i].length <= sizeof sigs[i].bytes &&
             sigs[i].flags <= AMN_PROBE_SIG_DIRECTORY;
    if (!ok) return true; /* no usable signatures: the probe must run */
    cf->sigs = malloc((n ? n : 1) * sizeof *cf->sigs);
    if (!cf->sigs) return false;
    memcpy(cf->sigs, sigs, n * sizeof *sigs);
    cf->n_sigs = n;
    cf->sigs_known = true;
    return true;
}

static bool describe_keys(const amn_scheme *s, amni_cached_scheme *cs) {
    const amn_detect_key *keys = amn_scheme_detect_keys(s);
    size_t n = 0;
    while (keys && n <= AMNI_CACHE_MAX_ITEMS && keys[n].suffix) n++;
    if (!keys || n > AMNI_CACHE_MAX_ITEMS) return true; /* detect must run */
    cs->keys = calloc(n ? n : 1, sizeof *cs->keys);
    if (!cs->keys) return false;
    for (size_t i = 0; i < n; i++) {
        cs->keys[i].suffix = amni_strdup(keys[i].suffix);
        cs->keys[i].dtypes = keys[i].dtypes;
        cs->n_keys = i + 1;
        if (!cs->keys[i].suffix) return false;
    }
    cs->keys_known = true;
    return true;
}

static bool describe_targets(const amn_scheme *s, amni_cached_scheme *cs) {
    const amn_encoder *e = amn_scheme_encoder(s);
    size_t n = 0;
    while (e && n <= AMNI_CACHE_MAX_ITEMS && e->targets[n]) n++;
    if (n > AMNI_CACHE_MAX_ITEMS) return true; /* the plugin must be asked */
    cs->targets = calloc(n ? n : 1, sizeof *cs->targets);
    if (!cs->targets) return false;
    for (size_t i = 0; i < n; i++) {
        cs->targets[i] = amni_strdup(e->targets[i]);
        cs->n_targets = i + 1;
        if (!cs->targets[i]) return false;
    }
    cs->targets_known = true;
    return true;
}

static bool describe_scheme(const amn_scheme *s, amni_cached_scheme *cs) {
    cs->name = amni_strdup(s->name);
    return cs->name && describe_keys(s, cs) && describe_targets(s, cs);
}

/* The cache entry of a module that just loaded; NULL when it cannot be
 * cached (then it is simply loaded again next time). */
static amni_cached_plugin *describe(const plugin_rec *rec) {
    if (!rec->file || rec->file[0] != '/') return NULL;
    amni_cached_plugin *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->file = amni_strdup(rec->file);
    c->key = rec->key;
    c->name = amni_strdup(rec->name);
    c->version = amni_strdup(rec->version);
    c->description = amni_strdup(rec->description);
    c->license = amni_strdup(rec->license);
    c->abi_major = rec->abi_major;
    c->abi_minor = rec->abi_minor;
    c->formats = calloc(rec->n_formats + 1, sizeof *c->formats);
    c->schemes = calloc(rec->n_schemes + 1, sizeof *c->schemes);
    c->resolvers = calloc(rec->n_resolvers + 1, sizeof *c->resolvers);
    bool ok = c->file && c->name && c->version && c->description && c->license && c->formats &&
              c->schemes && c->resolvers;
    for (size_t i = 0; ok && i < rec->n_formats; i++, c->n_formats++)
        ok = describe_format(rec->formats[i], &c->formats[i]);
    for (size_t i = 0; ok && i < rec->n_schemes; i++, c->n_schemes++)
        ok = describe_scheme(rec->schemes[i], &c->schemes[i]);
    for (size_t i = 0; ok && i < rec->n_resolvers; i++, c->n_resolvers++)
        ok = (c->resolvers[i] = amni_strdup(rec->resolvers[i]->scheme)) != NULL;
    if (!ok) {
        amni_cached_plugin_free(c);
        return NULL;
    }
    return c;
}

/* ---- loading a module ---- */

/* dlopen path and admit its descriptor; the outcome is in rec->status. */
static bool load_module(amn_ctx *ctx, plugin_rec *rec, const char *path, const char *stem) {
    lt_dladvise adv;
    lt_dladvise_init(&adv);
    lt_dladvise_local(&adv);
    lt_dlhandle h = lt_dlopenadvise(path, adv);
    lt_dladvise_destroy(&adv);
    if (!h) {
        /* libltdl reports "file not found" for any failure; ask the
         * dynamic loader itself for the real reason. */
        void *probe = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        const char *why = probe ? "libltdl could not load it" : dlerror();
        set_status(rec, "rejected", why ? why : "cannot load");
        if (probe) dlclose(probe);
        return false;
    }
    /* The descriptor's name carries the ABI major: a module of another
     * major is told apart without reading any of its data. */
    const amn_plugin_desc *desc = lt_dlsym(h, "amn_plugin_v2");
    if (!desc) {
        const char *why = "no amn_plugin_v2 descriptor (not an amn plugin)";
        if (lt_dlsym(h, "amn_plugin_v1"))
            why = "built for plugin ABI 1 (before 2.0 settled the struct layouts), this amn "
                  "speaks 2; rebuild it";
        set_status(rec, "rejected", why);
        lt_dlclose(h);
        return false;
    }
    if (admit(ctx, rec, desc, stem) != 0) {
        lt_dlclose(h);
        return false;
    }
    rec->handle = h;
    return true;
}

/* The unused cache entry for this very file, taken out of the cache. */
static amni_cached_plugin *take_cached(amn_ctx *ctx, const char *path, const amni_file_key *k,
                                       const char *stem) {
    for (size_t i = 0; i < ctx->cache.n; i++) {
        amni_cached_plugin *c = ctx->cache.plugins[i];
        if (strcmp(c->file, path) != 0) continue;
        if (memcmp(&c->key, k, sizeof *k) != 0 || strcmp(c->name, stem) != 0 ||
            c->abi_major != AMN_PLUGIN_ABI_MAJOR || c->abi_minor > AMN_PLUGIN_ABI_MINOR)
            return NULL; /* changed since: load it */
        ctx->cache.plugins[i] = ctx->cache.plugins[--ctx->cache.n];
        return c;
    }
    return NULL;
}

/* A module the cache describes: registered as pending, loaded when needed. */
static void add_pending(amn_ctx *ctx, plugin_rec *rec, amni_cached_plugin *c) {
    free(rec->name);
    rec->name = amni_strdup(c->name);
    rec->version = amni_strdup(c->version);
    rec->description = amni_strdup(c->description);
    rec->license = amni_strdup(c->license);
    rec->abi_major = c->abi_major;
    rec->abi_minor = c->abi_minor;
    rec->cached = c;
    rec->pending = true;
    ctx->n_pending++;
}

/* Register every amn-<name>.so in dir, in name order: from the cache when it
 * describes the file as it is now, else by loading it. */
static void load_dir(amn_ctx *ctx, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 8 || strncmp(e->d_name, "amn-", 4) != 0 || strcmp(e->d_name + len - 3, ".so"))
            continue;
        char *s = amni_strdup(e->d_name);
        if (!s || !push(&names, &n, &cap, s)) {
            free(s);
            break;
        }
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[4096], stem[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        size_t sl = strlen(names[i]) - 7;
        if (sl >= sizeof stem) sl = sizeof stem - 1;
        memcpy(stem, names[i] + 4, sl);
        stem[sl] = '\0';
        free(names[i]);
        names[i] = NULL;
        amni_file_key key;
        if (!amni_file_key_of(path, &key)) continue;
        plugin_rec *rec = new_record(ctx);
        if (!rec) break;
        rec->file = amni_strdup(path);
        rec->name = amni_strdup(stem);
        rec->key = key;
        if (loaded_plugin(ctx, stem)) {
            set_status(rec, "shadowed", "a plugin of the same name was found earlier");
            continue;
        }
        amni_cached_plugin *c = ctx->cache_path ? take_cached(ctx, path, &key, stem) : NULL;
        if (c) {
            add_pending(ctx, rec, c);
            continue;
        }
        trace(ctx, "load %s: not in the cache", stem);
        if (load_module(ctx, rec, path, stem) && ctx->cache_path) {
            rec->cached = describe(rec);
            if (rec->cached) ctx->cache_dirty = true;
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* ---- the cache file ---- */

static void write_cache(amn_ctx *ctx) {
    const amni_cached_plugin **list = calloc(ctx->n_plugins + 1, sizeof *list);
    if (!list) return;
    size_t n = 0;
    for (size_t i = 0; i < ctx->n_plugins; i++)
        if (ctx->plugins[i].cached) list[n++] = ctx->plugins[i].cached;
    size_t len = 0;
    char *text = amni_cache_format(list, n, &len);
    free(list);
    const bool ok = text && amni_cache_store(ctx->cache_path, text, len);
    free(text);
    trace(ctx, "cache %s: %s (%zu plugins)", ctx->cache_path, ok ? "written" : "not written", n);
    ctx->cache_dirty = false;
}

static uint64_t fnv1a_str(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return (h ^ '\n') * 0x100000001b3ull;
}

/* $AMN_REGISTRY_CACHE_DIR, else $XDG_CACHE_HOME/amn, else ~/.cache/amn; one
 * file per list of plugin directories. AMN_REGISTRY_CACHE=0 turns it off. */
static void open_cache(amn_ctx *ctx, char *const *dirs, size_t n) {
    const char *off = getenv("AMN_REGISTRY_CACHE");
    if (off && strcmp(off, "0") == 0) {
        trace(ctx, "cache disabled (AMN_REGISTRY_CACHE=0)");
        return;
    }
    char base[4096];
    const char *env = getenv("AMN_REGISTRY_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"),
               *home = getenv("HOME");
    int w;
    if (env && env[0] == '/')
        w = snprintf(base, sizeof base, "%s", env);
    else if (xdg && xdg[0] == '/')
        w = snprintf(base, sizeof base, "%s/amn", xdg);
    else if (home && home[0] == '/')
        w = snprintf(base, sizeof base, "%s/.cache/amn", home);
    else
        return;
    if (w < 0 || (size_t)w >= sizeof base - 64) return;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = fnv1a_str(h, dirs[i]);
    char path[4096];
    snprintf(path, sizeof path, "%s/registry-%016llx.cache", base, (unsigned long long)h);
    ctx->cache_path = amni_strdup(path);
    if (!ctx->cache_path) return;
    const bool ok = amni_cache_load(path, &ctx->cache);
    trace(ctx, "cache %s: %s (%zu plugins)", path, ok ? "read" : "absent or invalid", ctx->cache.n);
    if (!ok) ctx->cache_dirty = true; /* rewrite it even if nothing loads */
}

/* ---- lazy loading ---- */

static void load_pending(amn_ctx *ctx, plugin_rec *rec, const char *why) {
    rec->pending = false;
    ctx->n_pending--;
    trace(ctx, "load %s: %s", rec->name, why);
    amni_cached_plugin *c = rec->cached;
    rec->cached = NULL;
    if (load_module(ctx, rec, rec->file, c->name)) {
        rec->cached = c;
        return;
    }
    /* Described by the cache yet failing now (a library it needs changed):
     * drop it from the cache, so the next run loads it as a stranger. */
    amni_cached_plugin_free(c);
    if (ctx->cache_path) write_cache(ctx);
}

static amn_ctx *locked(const amn_ctx *cctx) {
    amn_ctx *ctx = (amn_ctx *)cctx; /* every context is made non-const by amn_ctx_new */
    pthread_mutex_lock(&ctx->lock);
    return ctx;
}

static void unlock(amn_ctx *ctx) {
    pthread_mutex_unlock(&ctx->lock);
}

void amni_registry_lock(const amn_ctx *ctx) {
    (void)locked(ctx);
}

void amni_registry_unlock(const amn_ctx *ctx) {
    unlock((amn_ctx *)ctx);
}

void amni_registry_load_all(const amn_ctx *cctx) {
    amn_ctx *ctx = locked(cctx);
    for (size_t i = 0; ctx->n_pending && i < ctx->n_plugins; i++)
        if (ctx->plugins[i].pending) load_pending(ctx, &ctx->plugins[i], "every plugin asked for");
    unlock(ctx);
}

/* Why a pending plugin must be loaded for `arg`, from what the cache says
 * it registered; NULL: it need not be. */
typedef const char *(*need_fn)(const amni_cached_plugin *c, const void *arg);

static void load_where(const amn_ctx *cctx, need_fn need, const void *arg) {
    amn_ctx *ctx = locked(cctx);
    for (size_t i = 0; ctx->n_pending && i < ctx->n_plugins; i++) {
        plugin_rec *p = &ctx->plugins[i];
        const char *why = p->pending ? need(p->cached, arg) : NULL;
        if (why) load_pending(ctx, p, why);
    }
    unlock(ctx);
}

static bool sig_matches(const amn_probe_sig *s, const amn_probe_data *pd) {
    if (pd->is_directory) return (s->flags & AMN_PROBE_SIG_DIRECTORY) != 0;
    return s->length && s->offset <= pd->head_size && s->length <= pd->head_size - s->offset &&
           memcmp(pd->head + s->offset, s->bytes, s->length) == 0;
}

static const char *format_may_claim(const amni_cached_plugin *c, const void *arg) {
    for (size_t k = 0; k < c->n_formats; k++) {
        const amni_cached_format *f = &c->formats[k];
        if (!f->sigs_known) return "its probe has no signature";
        for (size_t i = 0; i < f->n_sigs; i++)
            if (sig_matches(&f->sigs[i], arg)) return "a probe signature matches";
    }
    return NULL;
}

void amni_registry_load_for_probe(const amn_ctx *ctx, const amn_probe_data *pd) {
    load_where(ctx, format_may_claim, pd);
}

static bool key_matches(const amni_cached_key *k, const amn_tensor *t) {
    const size_t n = strlen(t->name), sl = strlen(k->suffix);
    if (sl > n || memcmp(t->name + n - sl, k->suffix, sl) != 0) return false;
    return !k->dtypes || ((unsigned)t->dtype < 64 && (k->dtypes >> t->dtype & 1));
}

static const char *scheme_may_claim(const amni_cached_plugin *c, const void *arg) {
    const amn_model *m = arg;
    const size_t n = amn_model_tensor_count(m);
    for (size_t k = 0; k < c->n_schemes; k++) {
        const amni_cached_scheme *s = &c->schemes[k];
        if (!s->keys_known) return "its detect has no keys";
        for (size_t i = 0; i < n; i++) {
            const amn_tensor *t = amn_model_tensor(m, i);
            for (size_t j = 0; t && t->name && j < s->n_keys; j++)
                if (key_matches(&s->keys[j], t)) return "a detect key matches";
        }
    }
    return NULL;
}

bool amni_registry_load_for_model(const amn_ctx *cctx, const amn_model *m) {
    load_where(cctx, scheme_may_claim, m);
    amn_ctx *ctx = locked(cctx);
    bool all = true;
    for (size_t i = 0; i < ctx->n_plugins; i++)
        if (ctx->plugins[i].pending && ctx->plugins[i].cached->n_schemes) all = false;
    unlock(ctx);
    return all;
}

typedef struct prefix {
    const char *s;
    size_t n;
} prefix;

static const char *resolves(const amni_cached_plugin *c, const void *arg) {
    const prefix *pf = arg;
    for (size_t k = 0; k < c->n_resolvers; k++)
        if (strlen(c->resolvers[k]) == pf->n && strncmp(c->resolvers[k], pf->s, pf->n) == 0)
            return "its resolver is asked for";
    return NULL;
}

void amni_registry_load_resolver(const amn_ctx *ctx, const char *prefix_s, size_t n) {
    const prefix pf = {prefix_s, n};
    load_where(ctx, resolves, &pf);
}

static const char *may_encode(const amni_cached_plugin *c, const void *arg) {
    for (size_t k = 0; k < c->n_schemes; k++) {
        const amni_cached_scheme *s = &c->schemes[k];
        if (!s->targets_known) return "its targets are not cached";
        for (size_t i = 0; i < s->n_targets; i++)
            if (strcasecmp(s->targets[i], arg) == 0) return "it encodes the target";
    }
    return NULL;
}

/* The encoder of `target` among the loaded schemes, once every plugin that
 * may provide it is loaded: `amn convert --to safetensors` asks whether
 * "safetensors" is an encode target, and need not load every plugin to
 * hear that it is not. */
const amn_scheme *amn_ctx_find_encoder(const amn_ctx *cctx, const char *target) {
    if (!target) return NULL;
    load_where(cctx, may_encode, target);
    amn_ctx *ctx = locked(cctx);
    const amn_scheme *found = NULL;
    for (size_t i = 0; !found && i < ctx->n_schemes; i++) {
        const amn_encoder *e = amn_scheme_encoder(ctx->schemes[i]);
        for (size_t k = 0; e && e->targets[k] && !found; k++)
            if (strcasecmp(e->targets[k], target) == 0) found = ctx->schemes[i];
    }
    unlock(ctx);
    return found;
}

static const char *registers_format(const amni_cached_plugin *c, const void *name) {
    for (size_t k = 0; k < c->n_formats; k++)
        if (strcmp(c->formats[k].name, name) == 0) return "its format is asked for by name";
    return NULL;
}

/* Load the pending plugin that registers format `name`, if any. */
static void load_format(const amn_ctx *ctx, const char *name) {
    load_where(ctx, registers_format, name);
}

/* ---- building the registry ---- */

static bool push_dir(char ***dirs, size_t *n, size_t *cap, const char *dir) {
    char *s = amni_strdup(dir);
    if (s && push(dirs, n, cap, s)) return true;
    free(s);
    return false;
}

static void push_path_list(char ***dirs, size_t *n, size_t *cap, const char *list) {
    char *copy = amni_strdup(list);
    if (!copy) return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
        if (*tok) push_dir(dirs, n, cap, tok);
    free(copy);
}

/* The plugin directory beside libamn: ${libdir}/amn/plugins when installed,
 * <build>/lib/amn/plugins in the build tree. */
static void push_default(char ***dirs, size_t *n, size_t *cap) {
    Dl_info info;
    if (!dladdr((void *)&amn_ctx_new, &info) || !info.dli_fname) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (!slash) return;
    *slash = '\0';
    size_t used = strlen(path);
    snprintf(path + used, sizeof path - used, "/%s", AMN_PLUGIN_SUBDIR);
    push_dir(dirs, n, cap, path);
}

/* Plugins linked into libamn go first, through the same checks as modules;
 * a module of the same name found later is reported as shadowed. */
static void load_builtins(amn_ctx *ctx) {
    for (size_t i = 0; amni_builtin_plugins[i]; i++) {
        plugin_rec *rec = new_record(ctx);
        if (!rec) return;
        admit(ctx, rec, amni_builtin_plugins[i], NULL);
    }
}

int amn_ctx_new(const amn_ctx_options *opts, amn_ctx **out, amn_error *err) {
    amn_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    pthread_mutex_init(&ctx->lock, NULL);
    const char *tr = getenv("AMN_REGISTRY_TRACE");
    ctx->trace = tr && *tr && strcmp(tr, "0") != 0;
    if (lt_dlinit() == 0) ctx->ltdl_ready = 1;
    amn_ctx_options o = {.struct_size = sizeof o};
    if (opts) {
        int rc =
            amni_struct_in(&o, sizeof o, AMNI_CTX_OPTIONS_SIZE_1, opts, "amn_ctx_options", err);
        if (rc) {
            free(ctx);
            return rc;
        }
    }
    opts = &o;
    if (!opts->no_builtin) load_builtins(ctx);
    if (ctx->ltdl_ready) {
        char **dirs = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < opts->n_plugin_dirs; i++)
            push_dir(&dirs, &n, &cap, opts->plugin_dirs[i]);
        const char *env = opts->no_env ? NULL : getenv("AMN_PLUGIN_PATH");
        if (env) push_path_list(&dirs, &n, &cap, env);
        const char *sys = opts->no_env ? NULL : getenv("AMN_PLUGIN_SYSTEM_PATH");
        if (sys)
            push_path_list(&dirs, &n, &cap, sys);
        else if (!opts->no_default)
            push_default(&dirs, &n, &cap);
        if (n) open_cache(ctx, dirs, n);
        for (size_t i = 0; i < n; i++) load_dir(ctx, dirs[i]);
        for (size_t i = 0; i < n; i++) free(dirs[i]);
        free(dirs);
        /* Entries left over describe files that are gone. */
        if (ctx->cache_path && (ctx->cache_dirty || ctx->cache.n)) write_cache(ctx);
        amni_cache_clear(&ctx->cache);
    }
    *out = ctx;
    return AMN_OK;
}

static void ctx_free(amn_ctx *ctx, bool unload) {
    if (!ctx) return;
    for (size_t i = 0; i < ctx->n_plugins; i++) {
        plugin_rec *p = &ctx->plugins[i];
        if (p->handle && unload) lt_dlclose(p->handle);
        free(p->name), free(p->version), free(p->description), free(p->license);
        free(p->file), free(p->status), free(p->reason);
        free(p->formats), free(p->schemes), free(p->resolvers);
        amni_cached_plugin_free(p->cached);
    }
    free(ctx->plugins);
    free(ctx->formats);
    free(ctx->format_owner);
    free(ctx->schemes);
    free(ctx->scheme_owner);
    free(ctx->resolvers);
    amni_cache_clear(&ctx->cache);
    free(ctx->cache_path);
    pthread_mutex_destroy(&ctx->lock);
    if (ctx->ltdl_ready && unload) lt_dlexit();
    free(ctx);
}

void amn_ctx_free(amn_ctx *ctx) {
    ctx_free(ctx, true);
}

/* The modules stay mapped (libltdl keeps their handles) until the process
 * exits, which tears the whole address space down at once. */
void amn_ctx_free_keep_modules(amn_ctx *ctx) {
    ctx_free(ctx, false);
}

/* Everything that lists the registry sees every plugin, loaded and checked
 * (`amn plugins`, the conversion matrix, the encoders' targets). */
size_t amn_ctx_plugin_count(const amn_ctx *ctx) {
    amni_registry_load_all(ctx);
    return ctx->n_plugins;
}

int amn_ctx_plugin(const amn_ctx *ctx, size_t i, amn_plugin_info *out) {
    amni_registry_load_all(ctx);
    if (i >= ctx->n_plugins) return AMN_E_INVALID;
    const plugin_rec *p = &ctx->plugins[i];
    const amn_plugin_info info = {
        .struct_size = sizeof info,
        .name = p->name ? p->name : "?",
        .version = p->version ? p->version : "",
        .description = p->description ? p->description : "",
        .license = p->license ? p->license : "",
        .file = p->file ? p->file : "(built-in)",
        .status = p->status ? p->status : "rejected",
        .reason = p->reason,
        .abi_major = p->abi_major,
        .abi_minor = p->abi_minor,
        .n_formats = p->n_formats,
        .n_schemes = p->n_schemes,
        .formats = p->formats,
        .schemes = p->schemes,
        .n_resolvers = p->n_resolvers,
        .resolvers = p->resolvers,
    };
    return amni_struct_out(out, &info, sizeof info, AMNI_PLUGIN_INFO_SIZE_1, "amn_plugin_info",
                           NULL);
}

size_t amn_ctx_format_count(const amn_ctx *ctx) {
    amni_registry_load_all(ctx);
    return ctx->n_formats;
}
const amn_format *amn_ctx_format(const amn_ctx *ctx, size_t i) {
    amni_registry_load_all(ctx);
    return i < ctx->n_formats ? ctx->formats[i] : NULL;
}
static const amn_format *find_loaded_format(const amn_ctx *ctx, const char *name) {
    for (size_t i = 0; name && i < ctx->n_formats; i++)
        if (strcmp(ctx->formats[i]->name, name) == 0) return ctx->formats[i];
    return NULL;
}
const amn_format *amn_ctx_find_format(const amn_ctx *ctx, const char *name) {
    if (!name) return NULL;
    amni_registry_lock(ctx);
    const amn_format *f = find_loaded_format(ctx, name);
    amni_registry_unlock(ctx);
    if (f) return f;
    load_format(ctx, name);
    amni_registry_lock(ctx);
    f = find_loaded_format(ctx, name);
    amni_registry_unlock(ctx);
    return f;
}
size_t amn_ctx_scheme_count(const amn_ctx *ctx) {
    amni_registry_load_all(ctx);
    return ctx->n_schemes;
}
const amn_scheme *amn_ctx_scheme(const amn_ctx *ctx, size_t i) {
    amni_registry_load_all(ctx);
    return i < ctx->n_schemes ? ctx->schemes[i] : NULL;
}
