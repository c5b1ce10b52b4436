/* Resuming a model folder (--resume): the temporary folder of a run holds a
 * manifest, ".amn-resume.json", rewritten atomically (temporary file, fsync,
 * rename) after each shard is complete. It records what the output depends
 * on — every input file's name, size and mtime, the options that change
 * bytes and a digest of the shard plan — and, per finished shard, its size
 * and XXH64. A later run with --resume adopts a leftover temporary folder
 * whose manifest says the same, keeps the shards whose size and XXH64 still
 * match and writes the rest. Everything read from a manifest is untrusted:
 * a file that is not the JSON we write, is too large or records other inputs
 * is simply not resumed; shard names are never taken from it (the plan's own
 * names are looked up in it). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "amn/byteorder.h"
#include "amn/version.h"
#include "folder.h"

#define MANIFEST_MAX    (16u << 20) /* 99999 shards of ~100 bytes each fit */
#define MANIFEST_FORMAT 1

/* ---- what the output depends on ---- */

typedef struct strbuf {
    char *s;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_add(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_add(strbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->oom = true;
            return;
        }
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        const size_t cap = (b->cap + (size_t)k + 1) * 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->oom = true;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
}

static int by_name(const struct dirent **a, const struct dirent **b) {
    return strcmp((*a)->d_name, (*b)->d_name);
}

static bool visible(const struct dirent *e) {
    return e->d_name[0] != '.';
}

static int visible_filter(const struct dirent *e) {
    return visible(e);
}

static void add_file(strbuf *b, const char *label, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        sb_add(b, "input %s: missing\n", label);
        return;
    }
    /* A folder by its files (listed apart): its own mtime moves with any
     * hidden file an editor or a sync tool makes there. */
    if (S_ISDIR(st.st_mode))
        sb_add(b, "input %s: folder\n", label);
    else
        sb_add(b, "input %s: %llu bytes, mtime %lld.%09ld\n", label, (unsigned long long)st.st_size,
               (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

/* Every visible file of the input folder (weights, config.json, the files
 * copied), or the input file, by name, size and mtime. */
static void add_inputs(strbuf *b, const cli_folder_req *rq) {
    if (rq->in_path) {
        /* Absolute, so that a resume from another directory matches. */
        char real[PATH_MAX];
        add_file(b, realpath(rq->in_path, real) ? real : rq->in_path, rq->in_path);
    }
    if (!rq->in_dir) return;
    struct dirent **ents = NULL;
    const int n = scandir(rq->in_dir, &ents, visible_filter, by_name);
    if (n < 0) {
        sb_add(b, "folder %s: unreadable\n", rq->in_dir);
        return;
    }
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", rq->in_dir, ents[i]->d_name);
        add_file(b, ents[i]->d_name, path);
        free(ents[i]);
    }
    free(ents);
}

char *cli_resume_identity(const cli_folder_req *rq, uint64_t plan_digest) {
    strbuf b = {0};
    const amn_convert_options *o = &rq->base;
    sb_add(&b, "amn %s\n", AMN_VERSION_STRING);
    add_inputs(&b, rq);
    sb_add(&b, "mode %d target %s out_dtype %d shard_size %llu\n", (int)o->mode,
           o->target ? o->target : "safetensors", (int)o->out_dtype,
           (unsigned long long)rq->shard_size);
    for (size_t i = 0; i < o->n_options; i++) sb_add(&b, "opt %s\n", o->options[i]);
    for (size_t i = 0; i < o->n_keep; i++) sb_add(&b, "keep %s\n", o->keep[i]);
    if (o->encode) {
        sb_add(&b, "encode %s block %llu\n", o->encode->target ? o->encode->target : "",
               (unsigned long long)o->encode->block_size);
        for (size_t i = 0; i < o->encode->n_params; i++)
            sb_add(&b, "param %s\n", o->encode->params[i]);
    }
    sb_add(&b, "config drop_quant %d forget %d torch_dtype %s dedup_tied %d\n", rq->drop_quant,
           rq->forget, rq->torch_dtype ? rq->torch_dtype : "-", rq->dedup_tied);
    sb_add(&b, "plan %016llx\n", (unsigned long long)plan_digest);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* ---- the manifest ---- */

void cli_manifest_free(cli_manifest *mf) {
    free(mf->identity);
    free(mf->shards);
    memset(mf, 0, sizeof *mf);
}

int cli_manifest_write(const char *dir, const cli_manifest *mf, bool sync, amn_error *err) {
    char tmp[PATH_MAX + 64], path[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, CLI_MANIFEST_NAME);
    snprintf(path, sizeof path, "%s/%s", dir, CLI_MANIFEST_NAME);
    json_object *root = json_object_new_object(), *shards = json_object_new_object();
    if (!root || !shards) {
        json_object_put(root), json_object_put(shards);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    json_object_object_add(root, "amn_resume", json_object_new_int(MANIFEST_FORMAT));
    json_object_object_add(root, "identity", json_object_new_string(mf->identity));
    for (size_t i = 0; i < mf->n; i++) {
        json_object *s = json_object_new_object();
        json_object_object_add(s, "size", json_object_new_int64((int64_t)mf->shards[i].size));
        char hex[17];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)mf->shards[i].xxh64);
        json_object_object_add(s, "xxh64", json_object_new_string(hex));
        json_object_object_add(shards, mf->shards[i].name, s);
    }
    json_object_object_add(root, "shards", shards);
    const char *text = json_object_to_json_string_ext(
        root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    int rc = AMN_OK;
    FILE *f = text ? fopen(tmp, "w") : NULL;
    if (!text)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else if (!f || fputs(text, f) == EOF || fputc('\n', f) == EOF || fflush(f) != 0 ||
             (sync && fsync(fileno(f)) != 0))
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", tmp, strerror(errno));
    if (f && fclose(f) != 0 && !rc)
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", tmp, strerror(errno));
    json_object_put(root);
    if (!rc && rename(tmp, path) != 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: rename: %s", path, strerror(errno));
    if (rc) unlink(tmp);
    return rc;
}

static bool read_text(const char *path, char **out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat st;
    char *buf = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size <= MANIFEST_MAX && (buf = malloc((size_t)st.st_size + 1))) {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t k = read(fd, buf + got, (size_t)st.st_size - got);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            got += (size_t)k;
        }
        if (got == (size_t)st.st_size) {
            buf[got] = '\0';
        } else {
            free(buf);
            buf = NULL;
        }
    }
    close(fd);
    *out = buf;
    return buf != NULL;
}

/* Our own manifest, or false: any other shape is not resumable. */
bool cli_manifest_read(const char *dir, cli_manifest *mf) {
    memset(mf, 0, sizeof *mf);
    char path[PATH_MAX + 64], *text;
    snprintf(path, sizeof path, "%s/%s", dir, CLI_MANIFEST_NAME);
    if (!read_text(path, &text)) return false;
    json_tokener *tok = json_tokener_new();
    json_object *root = tok ? json_tokener_parse_ex(tok, text, (int)strlen(text)) : NULL;
    const bool whole = tok && json_tokener_get_error(tok) == json_tokener_success &&
                       (size_t)json_tokener_get_parse_end(tok) == strlen(text);
    json_tokener_free(tok);
    free(text);
    json_object *fmt, *id, *shards;
    bool ok = whole && root && json_object_is_type(root, json_type_object) &&
              json_object_object_get_ex(root, "amn_resume", &fmt) &&
              json_object_is_type(fmt, json_type_int) &&
              json_object_get_int64(fmt) == MANIFEST_FORMAT &&
              json_object_object_get_ex(root, "identity", &id) &&
              json_object_is_type(id, json_type_string) &&
              json_object_object_get_ex(root, "shards", &shards) &&
              json_object_is_type(shards, json_type_object);
    if (ok) ok = (mf->identity = strdup(json_object_get_string(id))) != NULL;
    const size_t n = ok ? (size_t)json_object_object_length(shards) : 0;
    if (ok && n && !(mf->shards = calloc(n, sizeof *mf->shards))) ok = false;
    if (ok) {
        json_object_object_foreach(shards, key, val) {
            json_object *size, *hash;
            const char *hex = NULL;
            char *end = NULL;
            if (strlen(key) < sizeof mf->shards->name &&
                json_object_is_type(val, json_type_object) &&
                json_object_object_get_ex(val, "size", &size) &&
                json_object_is_type(size, json_type_int) && json_object_get_int64(size) >= 0 &&
                json_object_object_get_ex(val, "xxh64", &hash) &&
                json_object_is_type(hash, json_type_string))
                hex = json_object_get_string(hash);
            unsigned long long h = 0;
            if (hex && strlen(hex) == 16 && strspn(hex, "0123456789abcdef") == 16)
                h = strtoull(hex, &end, 16);
            if (!end || *end) {
                ok = false;
                break;
            }
            cli_manifest_shard *s = &mf->shards[mf->n++];
            snprintf(s->name, sizeof s->name, "%s", key);
            s->size = (uint64_t)json_object_get_int64(size);
            s->xxh64 = h;
        }
    }
    json_object_put(root);
    if (!ok) cli_manifest_free(mf);
    return ok;
}

int cli_manifest_add(cli_manifest *mf, const char *name, uint64_t size, uint64_t hash,
                     amn_error *err) {
    cli_manifest_shard *ns = realloc(mf->shards, (mf->n + 1) * sizeof *ns);
    if (!ns) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    mf->shards = ns;
    cli_manifest_shard *s = &ns[mf->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->size = size;
    s->xxh64 = hash;
    return AMN_OK;
}

/* XXH64 (seed 0), as Yann Collet's specification defines it
 * (github.com/Cyan4973/xxHash, doc/xxhash_spec.md): about 4x zlib's crc32
 * on one core, so that checking each shard costs little beside writing it. */
#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static uint64_t rotl(uint64_t x, int r) {
    return x << r | x >> (64 - r);
}

static uint64_t rd64(const unsigned char *p) {
    return amn_load_le64(p); /* XXH64 reads little-endian words on every host */
}

static uint64_t xround(uint64_t acc, uint64_t in) {
    return rotl(acc + in * P2, 31) * P1;
}

typedef struct xxh64 {
    uint64_t v[4], len;
} xxh64;

static void xxh_init(xxh64 *h) {
    *h = (xxh64){{P1 + P2, P2, 0, 0 - P1}, 0};
}

/* Whole 32-byte stripes only (the caller keeps the rest for xxh_final). */
static void xxh_stripes(xxh64 *h, const unsigned char *p, size_t n) {
    for (size_t i = 0; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) h->v[k] = xround(h->v[k], rd64(p + i + 8 * k));
    h->len += n - n % 32;
}

static uint64_t xxh_final(const xxh64 *h, const unsigned char *p, size_t n) {
    const uint64_t len = h->len + n;
    uint64_t r;
    if (h->len) {
        r = rotl(h->v[0], 1) + rotl(h->v[1], 7) + rotl(h->v[2], 12) + rotl(h->v[3], 18);
        for (int k = 0; k < 4; k++) r = (r ^ xround(0, h->v[k])) * P1 + P4;
    } else {
        r = P5;
    }
    r += len;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) r = rotl(r ^ xround(0, rd64(p + i)), 27) * P1 + P4;
    if (i + 4 <= n) {
        const uint32_t w = amn_load_le32(p + i);
        r = rotl(r ^ (uint64_t)w * P1, 23) * P2 + P3;
        i += 4;
    }
    for (; i < n; i++) r = rotl(r ^ p[i] * P5, 11) * P1;
    r ^= r >> 33;
    r *= P2;
    r ^= r >> 29;
    r *= P3;
    return r ^ r >> 32;
}

int cli_file_hash(const char *path, uint64_t *size, uint64_t *hash, amn_error *err) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK);
    struct stat st;
    int rc = AMN_OK;
    if (!buf)
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    else if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = amn_error_set(err, AMN_E_IO, "%s: not a regular file", path);
    xxh64 h;
    xxh_init(&h);
    size_t have = 0; /* bytes in buf not yet hashed (fewer than 32 at a read's end) */
    posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    while (!rc) {
        ssize_t k = read(fd, buf + have, CHUNK - have);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) rc = amn_error_set(err, AMN_E_IO, "%s: read: %s", path, strerror(errno));
        if (k <= 0) break;
        have += (size_t)k;
        const size_t whole = have - have % 32;
        xxh_stripes(&h, buf, whole);
        memmove(buf, buf + whole, have - whole);
        have -= whole;
    }
    *size = h.len + have;
    *hash = rc ? 0 : xxh_final(&h, buf, have);
    free(buf);
    close(fd);
    return rc;
}

bool cli_manifest_shard_ok(const cli_manifest *mf, const char *dir, const char *name) {
    const cli_manifest_shard *s = NULL;
    for (size_t i = 0; i < mf->n && !s; i++)
        if (strcmp(mf->shards[i].name, name) == 0) s = &mf->shards[i];
    if (!s) return false;
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != s->size)
        return false;
    uint64_t size, hash;
    amn_error e = {0};
    return cli_file_hash(path, &size, &hash, &e) == AMN_OK && size == s->size && hash == s->xxh64;
}

/* ---- finding a leftover temporary folder ---- */

int cli_dir_lock(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ".<base>.amn-XXXXXX": the names make_tmp gives. */
static bool is_tmp_name(const char *name, const char *base) {
    const size_t bl = strlen(base);
    if (name[0] != '.' || strncmp(name + 1, base, bl) != 0) return false;
    const char *t = name + 1 + bl;
    if (strncmp(t, ".amn-", 5) != 0 || strlen(t + 5) != 6) return false;
    for (const char *c = t + 5; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z'))) return false;
    return true;
}

int cli_resume_find(const char *parent, const char *base, const char *identity, bool resume,
                    char *dir, size_t size, int *lock_fd, cli_manifest *mf) {
    *lock_fd = -1;
    memset(mf, 0, sizeof *mf);
    DIR *d = opendir(parent);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!is_tmp_name(e->d_name, base)) continue;
        char path[PATH_MAX + 256];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", parent, e->d_name) >= sizeof path)
            continue;
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        cli_manifest m;
        if (!cli_manifest_read(path, &m)) continue; /* not ours, or a run before its first write */
        const int fd = cli_dir_lock(path);
        if (fd < 0) { /* another amn is writing it */
            cli_manifest_free(&m);
            continue;
        }
        if (!resume) {
            fprintf(stderr,
                    "amn: note: %s is left from an interrupted conversion; --resume would "
                    "continue it\n",
                    path);
        } else if (!found && strcmp(m.identity, identity) == 0 && strlen(path) < size) {
            snprintf(dir, size, "%s", path);
            *lock_fd = fd;
            *mf = m;
            found = 1;
            continue;
        } else {
            fprintf(stderr, "amn: note: removing %s, left by a conversion with %s\n", path,
                    strcmp(m.identity, identity) ? "other inputs or options" : "the same options");
            amn_kit_remove_tree(path);
        }
        close(fd);
        cli_manifest_free(&m);
    }
    closedir(d);
    return found;
}
