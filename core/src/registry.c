/* Plugin discovery, validation and registration (libltdl). */
#include <dirent.h>
#include <dlfcn.h>
#include <ltdl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static bool format_taken(const amn_registrar *r, const char *name) {
    for (size_t i = 0; i < r->ctx->n_formats; i++)
        if (strcmp(r->ctx->formats[i]->name, name) == 0) return true;
    for (size_t i = 0; i < r->n_formats; i++)
        if (strcmp(r->formats[i]->name, name) == 0) return true;
    return false;
}

static bool scheme_taken(const amn_registrar *r, const char *name) {
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

static const plugin_rec *loaded_plugin(const amn_ctx *ctx, const char *name) {
    for (size_t i = 0; i < ctx->n_plugins; i++)
        if (ctx->plugins[i].name && ctx->plugins[i].status &&
            strcmp(ctx->plugins[i].name, name) == 0 &&
            strcmp(ctx->plugins[i].status, "loaded") == 0)
            return &ctx->plugins[i];
    return NULL;
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
    free(rec->name);
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
    /* Commit: append to the context's flat lists. */
    size_t nf = ctx->n_formats + r.n_formats, ns = ctx->n_schemes + r.n_schemes;
    const amn_format **fs = realloc(ctx->formats, (nf ? nf : 1) * sizeof *fs);
    if (fs) ctx->formats = fs;
    const char **fo = fs ? realloc(ctx->format_owner, (nf ? nf : 1) * sizeof *fo) : NULL;
    if (fo) ctx->format_owner = fo;
    const amn_scheme **ss = fo ? realloc(ctx->schemes, (ns ? ns : 1) * sizeof *ss) : NULL;
    if (ss) ctx->schemes = ss;
    const char **so = ss ? realloc(ctx->scheme_owner, (ns ? ns : 1) * sizeof *so) : NULL;
    if (so) ctx->scheme_owner = so;
    const amn_resolver **rs =
        so ? realloc(ctx->resolvers, (ctx->n_resolvers + r.n_resolvers + 1) * sizeof *rs) : NULL;
    if (rs) ctx->resolvers = rs;
    if (!rs) {
        set_status(rec, "rejected", "out of memory");
        free(r.formats);
        free(r.schemes);
        free(r.resolvers);
        return -1;
    }
    for (size_t i = 0; i < r.n_resolvers; i++) ctx->resolvers[ctx->n_resolvers++] = r.resolvers[i];
    rec->resolvers = r.resolvers;
    rec->n_resolvers = r.n_resolvers;
    for (size_t i = 0; i < r.n_formats; i++) {
        ctx->format_owner[ctx->n_formats] = rec->name;
        ctx->formats[ctx->n_formats++] = r.formats[i];
    }
    for (size_t i = 0; i < r.n_schemes; i++) {
        ctx->scheme_owner[ctx->n_schemes] = rec->name;
        ctx->schemes[ctx->n_schemes++] = r.schemes[i];
    }
    rec->formats = r.formats;
    rec->n_formats = r.n_formats;
    rec->schemes = r.schemes;
    rec->n_schemes = r.n_schemes;
    set_status(rec, "loaded", NULL);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Load every amn-<name>.so in dir, in name order. */
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
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        plugin_rec *rec = new_record(ctx);
        if (!rec) break;
        rec->file = amni_strdup(path);
        rec->name = amni_strdup(stem);
        if (loaded_plugin(ctx, stem)) {
            set_status(rec, "shadowed", "a plugin of the same name was found earlier");
            continue;
        }
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
            continue;
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
            continue;
        }
        if (admit(ctx, rec, desc, stem) != 0) {
            lt_dlclose(h);
            continue;
        }
        rec->handle = h;
    }
    free(names);
}

static void load_path_list(amn_ctx *ctx, const char *list) {
    char *copy = amni_strdup(list);
    if (!copy) return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ":", &save); tok; tok = strtok_r(NULL, ":", &save))
        if (*tok) load_dir(ctx, tok);
    free(copy);
}

/* The plugin directory beside libamn: ${libdir}/amn/plugins when installed,
 * <build>/lib/amn/plugins in the build tree. */
static void load_default(amn_ctx *ctx) {
    Dl_info info;
    if (!dladdr((void *)&amn_ctx_new, &info) || !info.dli_fname) return;
    char path[4096];
    snprintf(path, sizeof path, "%s", info.dli_fname);
    char *slash = strrchr(path, '/');
    if (!slash) return;
    *slash = '\0';
    size_t used = strlen(path);
    snprintf(path + used, sizeof path - used, "/%s", AMN_PLUGIN_SUBDIR);
    load_dir(ctx, path);
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
        for (size_t i = 0; i < opts->n_plugin_dirs; i++) load_dir(ctx, opts->plugin_dirs[i]);
        const char *env = opts->no_env ? NULL : getenv("AMN_PLUGIN_PATH");
        if (env) load_path_list(ctx, env);
        const char *sys = opts->no_env ? NULL : getenv("AMN_PLUGIN_SYSTEM_PATH");
        if (sys)
            load_path_list(ctx, sys);
        else if (!opts->no_default)
            load_default(ctx);
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
    }
    free(ctx->plugins);
    free(ctx->formats);
    free(ctx->format_owner);
    free(ctx->schemes);
    free(ctx->scheme_owner);
    free(ctx->resolvers);
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

size_t amn_ctx_plugin_count(const amn_ctx *ctx) {
    return ctx->n_plugins;
}

int amn_ctx_plugin(const amn_ctx *ctx, size_t i, amn_plugin_info *out) {
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
    return ctx->n_formats;
}
const amn_format *amn_ctx_format(const amn_ctx *ctx, size_t i) {
    return i < ctx->n_formats ? ctx->formats[i] : NULL;
}
const amn_format *amn_ctx_find_format(const amn_ctx *ctx, const char *name) {
    for (size_t i = 0; name && i < ctx->n_formats; i++)
        if (strcmp(ctx->formats[i]->name, name) == 0) return ctx->formats[i];
    return NULL;
}
size_t amn_ctx_scheme_count(const amn_ctx *ctx) {
    return ctx->n_schemes;
}
const amn_scheme *amn_ctx_scheme(const amn_ctx *ctx, size_t i) {
    return i < ctx->n_schemes ? ctx->schemes[i] : NULL;
}
