/* The registry cache file: what each plugin module registered, keyed on the
 * module file's identity, so that a later process can choose a plugin
 * without loading it.
 *
 * The file is text, one record a line, fields separated by tabs:
 *
 *   amn-registry-cache <format version> <amn version> <plugin ABI>
 *   P file size mtime_ns inode device name abi_major abi_minor version description license
 *   F name extensions sigs_known            a format of the last P
 *   S offset flags hex-bytes                a probe signature of the last F
 *   C name keys_known targets_known         a scheme of the last P
 *   K dtype-mask-hex suffix                 a detect key of the last C
 *   T target                                an encode target of the last C
 *   R scheme                                a resolver of the last P
 *   end fnv1a64-of-everything-before-this-line
 *
 * It is read as hostile input: a size cap before reading, a checksum over
 * the whole text (a truncated or torn file fails it), every field checked,
 * counts capped; any fault discards the whole file, which the next process
 * rewrites. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/version.h"
#include "registry_cache.h"
#include "util_internal.h"

#define CACHE_MAGIC   "amn-registry-cache"
#define CACHE_VERSION "2" /* 2: encode targets (T) */
#define MAX_FIELDS    13

static const char *identity(void) {
#define STR_(x) #x
#define STR(x)  STR_(x)
    return CACHE_MAGIC "\t" CACHE_VERSION "\t" AMN_VERSION_STRING
                       "\t" STR(AMN_PLUGIN_ABI_MAJOR) "." STR(AMN_PLUGIN_ABI_MINOR);
#undef STR
#undef STR_
}

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

bool amni_cache_str_ok(const char *s) {
    if (!s) return true; /* written as empty */
    size_t n = 0;
    for (; s[n]; n++)
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) return false;
    return n < AMNI_CACHE_MAX_FIELD;
}

/* ---- freeing ---- */

void amni_cached_plugin_free(amni_cached_plugin *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_formats; i++) {
        free(p->formats[i].name), free(p->formats[i].extensions), free(p->formats[i].sigs);
    }
    for (size_t i = 0; i < p->n_schemes; i++) {
        for (size_t k = 0; k < p->schemes[i].n_keys; k++) free(p->schemes[i].keys[k].suffix);
        for (size_t k = 0; k < p->schemes[i].n_targets; k++) free(p->schemes[i].targets[k]);
        free(p->schemes[i].name), free(p->schemes[i].keys), free(p->schemes[i].targets);
    }
    for (size_t i = 0; i < p->n_resolvers; i++) free(p->resolvers[i]);
    free(p->formats), free(p->schemes), free(p->resolvers);
    free(p->file), free(p->name), free(p->version), free(p->description), free(p->license);
    free(p);
}

void amni_cache_clear(amni_cache *c) {
    for (size_t i = 0; i < c->n; i++) amni_cached_plugin_free(c->plugins[i]);
    free(c->plugins);
    memset(c, 0, sizeof *c);
}

/* ---- parsing ---- */

/* Split a line (NUL-terminated, no newline) at tabs, in place. */
static size_t split(char *line, char **f, size_t max) {
    size_t n = 0;
    f[n++] = line;
    for (char *p = line; *p; p++)
        if (*p == '\t') {
            if (n == max) return max + 1;
            *p = '\0';
            f[n++] = p + 1;
        }
    return n;
}

static bool parse_u64(const char *s, int base, uint64_t max, uint64_t *out) {
    if (!*s || *s == '-' || *s == '+' || *s == ' ') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, base);
    if (errno || *end || v > max) return false;
    *out = v;
    return true;
}

static bool dup_field(const char *s, char **out) {
    if (!amni_cache_str_ok(s)) return false;
    *out = amni_strdup(s);
    return *out != NULL;
}

/* Grow *arr by one zeroed element of `size` bytes; capped at `max`. */
static void *grow(void *arrp, size_t *n, size_t size, size_t max) {
    void **arr = arrp;
    if (*n >= max) return NULL;
    void *p = realloc(*arr, (*n + 1) * size);
    if (!p) return NULL;
    *arr = p;
    void *item = (char *)p + *n * size;
    memset(item, 0, size);
    (*n)++;
    return item;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static bool parse_plugin(char **f, size_t nf, amni_cached_plugin **out) {
    if (nf != 12) return false;
    amni_cached_plugin *p = calloc(1, sizeof *p);
    if (!p) return false;
    *out = p;
    uint64_t am, an;
    return dup_field(f[1], &p->file) && p->file[0] == '/' &&
           parse_u64(f[2], 10, UINT64_MAX, &p->key.size) &&
           parse_u64(f[3], 10, UINT64_MAX, &p->key.mtime_ns) &&
           parse_u64(f[4], 10, UINT64_MAX, &p->key.ino) &&
           parse_u64(f[5], 10, UINT64_MAX, &p->key.dev) && dup_field(f[6], &p->name) &&
           p->name[0] && parse_u64(f[7], 10, 0xffff, &am) && parse_u64(f[8], 10, 0xffff, &an) &&
           (p->abi_major = (unsigned)am, p->abi_minor = (unsigned)an, true) &&
           dup_field(f[9], &p->version) && dup_field(f[10], &p->description) &&
           dup_field(f[11], &p->license);
}

static bool parse_format(amni_cached_plugin *p, char **f, size_t nf) {
    if (nf != 4 || (strcmp(f[3], "0") && strcmp(f[3], "1"))) return false;
    amni_cached_format *cf =
        grow(&p->formats, &p->n_formats, sizeof *p->formats, AMNI_CACHE_MAX_ITEMS);
    if (!cf) return false;
    cf->sigs_known = f[3][0] == '1';
    return dup_field(f[1], &cf->name) && cf->name[0] && dup_field(f[2], &cf->extensions);
}

static bool parse_sig(amni_cached_format *cf, char **f, size_t nf) {
    uint64_t off, flags;
    if (nf != 4 || !cf->sigs_known || !parse_u64(f[1], 10, AMN_PROBE_HEAD - 1, &off) ||
        !parse_u64(f[2], 10, AMN_PROBE_SIG_DIRECTORY, &flags))
        return false;
    const size_t hl = strlen(f[3]);
    if (hl % 2 || hl / 2 > sizeof((amn_probe_sig *)0)->bytes || (hl == 0 && !flags)) return false;
    amn_probe_sig *s = grow(&cf->sigs, &cf->n_sigs, sizeof *cf->sigs, AMNI_CACHE_MAX_ITEMS);
    if (!s) return false;
    s->offset = (uint32_t)off;
    s->flags = (uint16_t)flags;
    s->length = (uint16_t)(hl / 2);
    for (size_t i = 0; i < hl / 2; i++) {
        const int hi = hexval(f[3][2 * i]), lo = hexval(f[3][2 * i + 1]);
        if (hi < 0 || lo < 0) return false;
        s->bytes[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

static bool parse_flag(const char *f, bool *out) {
    *out = f[0] == '1';
    return strcmp(f, "0") == 0 || strcmp(f, "1") == 0;
}

static bool parse_scheme(amni_cached_plugin *p, char **f, size_t nf) {
    bool keys, targets;
    if (nf != 4 || !parse_flag(f[2], &keys) || !parse_flag(f[3], &targets)) return false;
    amni_cached_scheme *cs =
        grow(&p->schemes, &p->n_schemes, sizeof *p->schemes, AMNI_CACHE_MAX_ITEMS);
    if (!cs) return false;
    cs->keys_known = keys;
    cs->targets_known = targets;
    return dup_field(f[1], &cs->name) && cs->name[0];
}

static bool parse_key(amni_cached_scheme *cs, char **f, size_t nf) {
    uint64_t mask;
    if (nf != 3 || !cs->keys_known || !parse_u64(f[1], 16, UINT64_MAX, &mask)) return false;
    amni_cached_key *k = grow(&cs->keys, &cs->n_keys, sizeof *cs->keys, AMNI_CACHE_MAX_ITEMS);
    if (!k) return false;
    k->dtypes = mask;
    return dup_field(f[2], &k->suffix);
}

static bool parse_target(amni_cached_scheme *cs, char **f, size_t nf) {
    if (nf != 2 || !f[1][0] || !cs->targets_known) return false;
    char **t = grow(&cs->targets, &cs->n_targets, sizeof *cs->targets, AMNI_CACHE_MAX_ITEMS);
    return t && dup_field(f[1], t);
}

static bool parse_resolver(amni_cached_plugin *p, char **f, size_t nf) {
    if (nf != 2 || !f[1][0]) return false;
    char **r = grow(&p->resolvers, &p->n_resolvers, sizeof *p->resolvers, AMNI_CACHE_MAX_ITEMS);
    return r && dup_field(f[1], r);
}

static bool parse_lines(char *text, size_t len, amni_cache *c) {
    amni_cached_plugin *p = NULL;
    amni_cached_format *cf = NULL;
    amni_cached_scheme *cs = NULL;
    char *line = text, *const end = text + len;
    bool first = true;
    while (line < end) {
        char *nl = memchr(line, '\n', (size_t)(end - line));
        if (!nl) return false;
        *nl = '\0';
        char *f[MAX_FIELDS + 1];
        const size_t nf = split(line, f, MAX_FIELDS);
        line = nl + 1;
        if (nf > MAX_FIELDS) return false;
        if (first) {
            first = false;
            /* identity() holds tabs: compare the rejoined line. */
            char buf[256];
            size_t used = 0;
            for (size_t i = 0; i < nf && used < sizeof buf; i++)
                used +=
                    (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i ? "\t" : "", f[i]);
            if (used >= sizeof buf || strcmp(buf, identity()) != 0) return false;
            continue;
        }
        const char *tag = f[0];
        bool ok;
        if (strcmp(tag, "P") == 0) {
            amni_cached_plugin *np = NULL;
            ok = c->n < AMNI_CACHE_MAX_PLUGINS && parse_plugin(f, nf, &np);
            if (ok) {
                void *arr = realloc(c->plugins, (c->n + 1) * sizeof *c->plugins);
                ok = arr != NULL;
                if (ok) c->plugins = arr;
            }
            if (!ok) {
                amni_cached_plugin_free(np);
                return false;
            }
            c->plugins[c->n++] = p = np;
            cf = NULL, cs = NULL;
        } else if (strcmp(tag, "F") == 0) {
            ok = p && parse_format(p, f, nf);
            if (ok) cf = &p->formats[p->n_formats - 1];
        } else if (strcmp(tag, "S") == 0) {
            ok = cf && parse_sig(cf, f, nf);
        } else if (strcmp(tag, "C") == 0) {
            ok = p && parse_scheme(p, f, nf);
            if (ok) cs = &p->schemes[p->n_schemes - 1];
        } else if (strcmp(tag, "K") == 0) {
            ok = cs && parse_key(cs, f, nf);
        } else if (strcmp(tag, "T") == 0) {
            ok = cs && parse_target(cs, f, nf);
        } else if (strcmp(tag, "R") == 0) {
            ok = p && parse_resolver(p, f, nf);
        } else {
            ok = false;
        }
        if (!ok) return false;
    }
    return !first;
}

bool amni_cache_parse(const char *text, size_t len, amni_cache *c) {
    memset(c, 0, sizeof *c);
    if (len > AMNI_CACHE_MAX_BYTES || len < 2 || text[len - 1] != '\n') return false;
    /* The last line is "end\t<checksum>" over everything before it. */
    const char *last = text + len - 1;
    while (last > text && last[-1] != '\n') last--;
    const size_t body = (size_t)(last - text);
    char want[40];
    snprintf(want, sizeof want, "end\t%016" PRIx64 "\n", fnv1a(text, body));
    if (len - body != strlen(want) || memcmp(last, want, len - body) != 0) return false;
    char *copy = malloc(body + 1);
    if (!copy) return false;
    memcpy(copy, text, body);
    copy[body] = '\0';
    /* A NUL inside the text would hide the rest of a line from the checks. */
    const bool ok = memchr(copy, '\0', body) == NULL && parse_lines(copy, body, c);
    free(copy);
    if (!ok) amni_cache_clear(c);
    return ok;
}

/* ---- writing ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
    bool failed;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...) {
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        /* NULL + 0 is undefined in C: the first call measures into NULL. */
        const int w = vsnprintf(b->p ? b->p + b->n : NULL, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->failed = true;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        size_t nc = (b->cap + (size_t)w + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->failed = true;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
}

static const char *s_or_empty(const char *s) {
    return s ? s : "";
}

static bool plugin_writable(const amni_cached_plugin *p) {
    bool ok = p->file && p->file[0] == '/' && p->name && p->name[0] && amni_cache_str_ok(p->file) &&
              amni_cache_str_ok(p->name) && amni_cache_str_ok(p->version) &&
              amni_cache_str_ok(p->description) && amni_cache_str_ok(p->license) &&
              p->n_formats <= AMNI_CACHE_MAX_ITEMS && p->n_schemes <= AMNI_CACHE_MAX_ITEMS &&
              p->n_resolvers <= AMNI_CACHE_MAX_ITEMS;
    for (size_t i = 0; ok && i < p->n_formats; i++) {
        const amni_cached_format *f = &p->formats[i];
        ok = f->name && f->name[0] && amni_cache_str_ok(f->name) &&
             amni_cache_str_ok(f->extensions) && f->n_sigs <= AMNI_CACHE_MAX_ITEMS;
        for (size_t k = 0; ok && k < f->n_sigs; k++)
            ok = f->sigs[k].offset < AMN_PROBE_HEAD &&
                 f->sigs[k].length <= sizeof f->sigs[k].bytes &&
                 f->sigs[k].flags <= AMN_PROBE_SIG_DIRECTORY &&
                 (f->sigs[k].length || f->sigs[k].flags);
    }
    for (size_t i = 0; ok && i < p->n_schemes; i++) {
        const amni_cached_scheme *s = &p->schemes[i];
        ok = s->name && s->name[0] && amni_cache_str_ok(s->name) &&
             s->n_keys <= AMNI_CACHE_MAX_ITEMS && s->n_targets <= AMNI_CACHE_MAX_ITEMS;
        for (size_t k = 0; ok && k < s->n_keys; k++) ok = amni_cache_str_ok(s->keys[k].suffix);
        for (size_t k = 0; ok && k < s->n_targets; k++)
            ok = s->targets[k] && s->targets[k][0] && amni_cache_str_ok(s->targets[k]);
    }
    for (size_t i = 0; ok && i < p->n_resolvers; i++)
        ok = p->resolvers[i] && p->resolvers[i][0] && amni_cache_str_ok(p->resolvers[i]);
    return ok;
}

char *amni_cache_format(const amni_cached_plugin *const *plugins, size_t n, size_t *len) {
    buf b = {0};
    put(&b, "%s\n", identity());
    for (size_t i = 0; i < n && i < AMNI_CACHE_MAX_PLUGINS; i++) {
        const amni_cached_plugin *p = plugins[i];
        if (!plugin_writable(p)) continue;
        put(&b,
            "P\t%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\t%u\t%u\t%s\t%s\t%s\n",
            p->file, p->key.size, p->key.mtime_ns, p->key.ino, p->key.dev, p->name, p->abi_major,
            p->abi_minor, s_or_empty(p->version), s_or_empty(p->description),
            s_or_empty(p->license));
        for (size_t k = 0; k < p->n_formats; k++) {
            const amni_cached_format *f = &p->formats[k];
            put(&b, "F\t%s\t%s\t%d\n", f->name, s_or_empty(f->extensions), f->sigs_known);
            for (size_t s = 0; f->sigs_known && s < f->n_sigs; s++) {
                put(&b, "S\t%u\t%u\t", (unsigned)f->sigs[s].offset, (unsigned)f->sigs[s].flags);
                for (size_t j = 0; j < f->sigs[s].length; j++) put(&b, "%02x", f->sigs[s].bytes[j]);
                put(&b, "\n");
            }
        }
        for (size_t k = 0; k < p->n_schemes; k++) {
            const amni_cached_scheme *s = &p->schemes[k];
            put(&b, "C\t%s\t%d\t%d\n", s->name, s->keys_known, s->targets_known);
            for (size_t j = 0; s->keys_known && j < s->n_keys; j++)
                put(&b, "K\t%" PRIx64 "\t%s\n", s->keys[j].dtypes, s_or_empty(s->keys[j].suffix));
            for (size_t j = 0; s->targets_known && j < s->n_targets; j++)
                put(&b, "T\t%s\n", s->targets[j]);
        }
        for (size_t k = 0; k < p->n_resolvers; k++) put(&b, "R\t%s\n", p->resolvers[k]);
    }
    if (!b.failed) put(&b, "end\t%016" PRIx64 "\n", fnv1a(b.p, b.n));
    if (b.failed || b.n > AMNI_CACHE_MAX_BYTES) {
        free(b.p);
        return NULL;
    }
    *len = b.n;
    return b.p;
}

/* ---- files ---- */

bool amni_file_key_of(const char *path, amni_file_key *k) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    k->size = (uint64_t)st.st_size;
    k->mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
    k->ino = (uint64_t)st.st_ino;
    k->dev = (uint64_t)st.st_dev;
    return true;
}

bool amni_cache_load(const char *path, amni_cache *c) {
    memset(c, 0, sizeof *c);
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat st;
    char *text = NULL;
    size_t got = 0;
    /* Someone else's cache (a shared directory) could hide plugins: ignored. */
    bool ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
              st.st_size > 0 && (uint64_t)st.st_size <= AMNI_CACHE_MAX_BYTES;
    if (ok) text = malloc((size_t)st.st_size);
    ok = ok && text;
    while (ok && got < (size_t)st.st_size) {
        const ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            ok = false;
        else
            got += (size_t)r;
    }
    close(fd);
    ok = ok && amni_cache_parse(text, got, c);
    free(text);
    return ok;
}

static bool make_dirs(const char *dir) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) return false;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return false;
            *p = '/';
        }
    return mkdir(tmp, 0700) == 0 || errno == EEXIST;
}

bool amni_cache_store(const char *path, const char *text, size_t len) {
    char dir[4096], tmp[4200];
    if (snprintf(dir, sizeof dir, "%s", path) >= (int)sizeof dir) return false;
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return false;
    *slash = '\0';
    if (!make_dirs(dir)) return false;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return false;
    size_t done = 0;
    bool ok = true;
    while (ok && done < len) {
        const ssize_t w = write(fd, text + done, len - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            ok = false;
        else
            done += (size_t)w;
    }
    /* A cache is rebuilt from the modules whenever it is wrong, so no fsync:
     * a torn file after a crash only fails the checksum. */
    ok = close(fd) == 0 && ok;
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}
