/* Model folders packed as archives: see archive_internal.h.
 *
 * One pass of libarchive over the archive's mapping reads every member
 * header, refuses what a folder could not hold (absolute or ".." paths,
 * links, devices, two members of one name), and keeps the weight files
 * of the shallowest folder: a member stored whole in the mapping is used
 * where it lies (zero copy, like a file of a folder), any other is
 * decompressed into an unlinked temporary file (below), settings and index
 * files into memory, under the limits (--max-alloc, --max-total,
 * --max-ratio over the whole archive). The folder's weight files are then
 * chosen as for a folder (an index, else every *.safetensors, else its one
 * weight file), opened by their formats' plugins through views of those
 * bytes, and joined into one model. A gzip stream is decompressed by
 * gunzip.c rather than libarchive, for the checks libarchive skips. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <json-c/json.h>

#include "amn/checked.h"
#include "amn/kit/zip_reader.h"
#include "archive_internal.h"
#include "gunzip.h"
#include "io_internal.h"

/* KIND_GZIP: a compressed stream read through gunzip.c; KIND_FILTERED: any
 * other, through libarchive's filters. */
enum { KIND_NONE, KIND_TAR, KIND_FILTERED, KIND_GZIP, KIND_ZIP };

typedef struct member {
    char *name; /* normalised: no "./", no empty components */
    uint64_t size;
    const uint8_t *data; /* kept bytes (in the mapping, heap or spill), else NULL */
    uint8_t *heap;
    amn_map *spill;  /* a compressed model file, decompressed into a temporary file */
    uint64_t kept;   /* bytes at data: size, or a prefix (header_only) */
    uint64_t beyond; /* header_only: end of the first read past the prefix, or UINT64_MAX */
    char *label;     /* "<archive>/<member>", when read as a sibling (amn_siblings) */
    unsigned depth;
    bool weight, dir;
} member;

struct amni_archive {
    const char *path;
    amn_map *map;
    const amn_limits *lim; /* &lim_copy: the caller's may not outlive the open */
    amn_limits lim_copy;
    bool header_only;
    int kind; /* KIND_* */
    member *m;
    size_t n, cap;
    uint64_t csize;          /* the archive's size (its map goes to the model) */
    uint64_t since_drop;     /* bytes read through the mapping since it was last dropped */
    uint64_t produced, held; /* bytes decompressed; bytes kept on the heap */
    unsigned min_depth;      /* of the weight files seen */
    size_t *chosen, n_chosen;
    char **labels;
    char *folder;          /* the packed folder's name (amn_model_archive_folder) */
    json_object *index;    /* the chosen index's weight_map owner, or NULL */
    const amni_gunzip *gz; /* the gzip stream being read, or NULL */
};

static const char *const weight_ext[] = {
    ".safetensors", ".safetensors.index.json", ".gguf", ".npz", ".pth", ".pt",
    ".bin",         ".bin.index.json",         NULL};

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static const char *base_name(const char *s) {
    const char *b = strrchr(s, '/');
    return b ? b + 1 : s;
}

/* The settings files read beside a model's weights: the core's check of a
 * declared quantization (known_config.c) and the schemes' own settings
 * (the plugin kit's quant_common.c), kept whole when small. */
static const char *const settings_files[] = {"config.json", "hf_quant_config.json",
                                             "quantize_config.json", "quant_config.json", NULL};
#define SETTINGS_MAX (4u << 20)

static bool is_settings(const char *name) {
    const char *b = strrchr(name, '/');
    b = b ? b + 1 : name;
    for (size_t i = 0; settings_files[i]; i++)
        if (strcmp(b, settings_files[i]) == 0) return true;
    return false;
}

static bool is_weight(const char *name) {
    for (size_t i = 0; weight_ext[i]; i++)
        if (ends_with(name, weight_ext[i])) return true;
    return false;
}

/* The archive kinds by their magic bytes; a compressed file is a tar only
 * if libarchive finds one inside (else it is left to the formats). */
static int sniff(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return KIND_NONE;
    uint8_t h[512];
    ssize_t n = pread(fd, h, sizeof h, 0);
    close(fd);
    if (n >= 262 && memcmp(h + 257, "ustar", 5) == 0) return KIND_TAR;
    if (n >= 4 && memcmp(h, "PK\3\4", 4) == 0) return KIND_ZIP;
    if (n >= 2 && h[0] == 0x1f && h[1] == 0x8b) return KIND_GZIP;
    if ((n >= 6 && memcmp(h,
                          "\xfd"
                          "7zXZ\0",
                          6) == 0) ||
        (n >= 4 && memcmp(h, "\x28\xb5\x2f\xfd", 4) == 0) || (n >= 3 && memcmp(h, "BZh", 3) == 0))
        return KIND_FILTERED;
    return KIND_NONE;
}

/* "./a//b/" -> "a/b"; refuses what would lead outside a folder. */
static int normalise(const amni_archive *A, const char *raw, char **out, amn_error *err) {
    if (!raw || !*raw) return amn_error_set(err, AMN_E_PARSE, "%s: a member has no name", A->path);
    if (raw[0] == '/')
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: member '%s' has an absolute path; a model folder holds none",
                             A->path, raw);
    char *s = malloc(strlen(raw) + 1);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t o = 0;
    for (const char *p = raw; *p;) {
        size_t k = strcspn(p, "/");
        if (k == 2 && p[0] == '.' && p[1] == '.') {
            free(s);
            return amn_error_set(err, AMN_E_DISALLOWED,
                                 "%s: member '%s' leads outside the archive (a '..' component)",
                                 A->path, raw);
        }
        if (k > 0 && !(k == 1 && p[0] == '.')) {
            if (o) s[o++] = '/';
            memcpy(s + o, p, k);
            o += k;
        }
        p += k;
        while (*p == '/') p++;
    }
    s[o] = '\0';
    *out = s;
    return AMN_OK;
}

static unsigned depth_of(const char *name) {
    unsigned d = 0;
    for (; *name; name++) d += *name == '/';
    return d;
}

/* The bytes of a member to keep: all of it, or with header_only the first
 * ones a header can span (index files whole: they are read whole). */
static uint64_t keep_cap(const amni_archive *A, const member *mb) {
    if (!A->header_only || ends_with(mb->name, ".json")) return mb->size; /* read whole */
    uint64_t cap = A->lim->max_header_bytes + 8; /* safetensors: the length, then the header */
    return mb->size < cap ? mb->size : cap;
}

static int check_ratio(amni_archive *A, uint64_t more, const char *name, amn_error *err) {
    uint64_t most;
    const uint64_t csize = A->csize ? A->csize : 1;
    if (!amn_add_u64(A->produced, more, &A->produced) ||
        (A->lim->max_ratio && amn_mul_u64(csize, A->lim->max_ratio, &most) && A->produced > most))
        return amn_error_set(err, AMN_E_LIMIT,
                             "%s: member '%s': the archive expands past %u times its %llu bytes "
                             "(the --max-ratio cap)",
                             A->path, name, A->lim->max_ratio, (unsigned long long)csize);
    return AMN_OK;
}

static bool in_map(const amni_archive *A, const void *p, size_t n) {
    const uint8_t *base = amn_map_data(A->map), *q = p;
    return q >= base && (uint64_t)(q - base) <= amn_map_size(A->map) &&
           n <= amn_map_size(A->map) - (uint64_t)(q - base);
}

/* A member whose header announces more than the ratio cap allows is
 * refused before anything is allocated or reserved for it. */
static int check_announced(const amni_archive *A, const member *mb, amn_error *err) {
    const amn_limits *l = A->lim;
    uint64_t most;
    if (l->max_ratio && amn_mul_u64(A->csize + 1, l->max_ratio, &most) && mb->size > most)
        return amn_error_set(err, AMN_E_LIMIT,
                             "%s: member '%s' says it holds %llu bytes, more than %u times the "
                             "archive (the --max-ratio cap)",
                             A->path, mb->name, (unsigned long long)mb->size, l->max_ratio);
    return AMN_OK;
}

static int heap_for(amni_archive *A, member *mb, uint64_t cap, amn_error *err) {
    const amn_limits *l = A->lim;
    int rc = check_announced(A, mb, err);
    if (rc) return rc;
    if ((l->max_alloc_one && cap > l->max_alloc_one) || cap > SIZE_MAX)
        return amn_error_set(err, AMN_E_LIMIT,
                             "%s: member '%s' decompresses to %llu bytes, more than the "
                             "single-allocation cap (--max-alloc)",
                             A->path, mb->name, (unsigned long long)cap);
    uint64_t held;
    if (!amn_add_u64(A->held, cap, &held) || (l->max_alloc && held > l->max_alloc))
        return amn_error_set(err, AMN_E_LIMIT,
                             "%s: member '%s': its model files decompress to more than the "
                             "--max-total cap of %llu bytes",
                             A->path, mb->name, (unsigned long long)l->max_alloc);
    if (!(mb->heap = malloc(cap ? (size_t)cap : 1)))
        return amn_error_set(err, AMN_E_NOMEM, "%s: member '%s': out of memory", A->path, mb->name);
    A->held = held;
    mb->data = mb->heap;
    mb->kept = cap;
    return AMN_OK;
}

/* ---- spilling: a compressed model file into an unlinked temporary file --
 * A compressed member cannot be mapped where it lies, and the formats'
 * readers and the convert pipeline read a model file at any offset (a
 * GGUF's tensors in any order, a .pth's ZIP directory at its end). So the
 * member is decompressed once, block by block as the archive streams past
 * (memory: one block of libarchive's), into a scratch file (amn_spill,
 * spill.c) whose space is reserved first from the size its header says
 * (capped by --max-ratio): a full disk fails before decompressing, naming
 * the member. The file is then mapped and read as a folder's file is
 * (pread, copy_file_range, splice: input.c), and vanishes with the model. */

static int spill_open(amni_archive *A, member *mb, amn_spill **sp, amn_error *err) {
    int rc = check_announced(A, mb, err);
    if (rc) return rc;
    const size_t n = strlen(A->path) + 1 + strlen(mb->name) + 1;
    char *label = malloc(n);
    if (!label) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    snprintf(label, n, "%s/%s", A->path, mb->name); /* the map's name in messages */
    rc = amn_spill_open(mb->size, label, sp, err);
    free(label);
    if (rc) amn_error_prefix(err, "%s: member '%s': ", A->path, mb->name);
    return rc;
}

static int spill_write(const amni_archive *A, const member *mb, amn_spill *sp, const void *buf,
                       size_t n, amn_error *err) {
    const int rc = amn_spill_write(sp, buf, n, err);
    if (rc) amn_error_prefix(err, "%s: member '%s': ", A->path, mb->name);
    return rc;
}

/* The whole member is in the spill: map it (which frees the spill). */
static int spill_map(amni_archive *A, member *mb, amn_spill *sp, amn_error *err) {
    int rc = amn_spill_map(sp, &mb->spill, err);
    if (rc) {
        amn_error_prefix(err, "%s: member '%s': ", A->path, mb->name);
        return rc;
    }
    mb->data = amn_map_data(mb->spill);
    mb->kept = mb->size;
    return AMN_OK;
}

/* A ZIP is read through the archive's mapping (its stored members are used
 * in place), so the compressed bytes libarchive reads would stay resident
 * in the process, as much as the archive: every DROP_EVERY bytes of data
 * read they are dropped from the process's page tables (not from the page
 * cache; a member used in place faults its pages back in when read). A
 * compressed tar is read with read() and needs none of this. */
#define DROP_EVERY (16u << 20)

static void drop_resident(amni_archive *A, size_t more) {
    if (A->kind != KIND_ZIP || (A->since_drop += more) < DROP_EVERY) return;
    A->since_drop = 0;
    amni_map_drop_resident(A->map);
}

/* The next data block of mb, `got` bytes into it: checked to follow on
 * (libarchive gives a sparse or damaged member's blocks at other offsets),
 * to stay within the header's size, and against the ratio cap. *len = 0
 * and *end at the member's end. */
static int next_block(amni_archive *A, struct archive *a, const member *mb, uint64_t got,
                      const void **buf, size_t *len, bool *end, amn_error *err) {
    la_int64_t off;
    const int r = archive_read_data_block(a, buf, len, &off);
    if ((*end = r == ARCHIVE_EOF)) {
        *len = 0;
        return AMN_OK;
    }
    /* A warning on data is libarchive's word for damage it found at the
     * member's end (a ZIP's CRC or sizes not those of its header), with the
     * last block: the member is not what was packed. */
    /* gzip's checks cover the whole stream (and libarchive reads ahead of
     * the member it returns): they tell where the damage was found, not
     * which member holds it. */
    if (r < ARCHIVE_OK && amni_gunzip_error(A->gz))
        return amn_error_set(err, AMN_E_PARSE, "%s: %s (found while reading member '%s')", A->path,
                             amni_gunzip_error(A->gz), mb->name);
    if (r < ARCHIVE_OK)
        return amn_error_set(err, AMN_E_PARSE, "%s: member '%s': %s", A->path, mb->name,
                             archive_error_string(a) ? archive_error_string(a) : "damaged");
    int rc = check_ratio(A, *len, mb->name, err);
    if (!rc && (off < 0 || (uint64_t)off != got || *len > mb->size - got))
        rc = amn_error_set(err, AMN_E_PARSE,
                           "%s: member '%s' holds other bytes than its header says", A->path,
                           mb->name);
    return rc;
}

static int check_whole(const amni_archive *A, const member *mb, uint64_t got, amn_error *err) {
    if (got == mb->size) return AMN_OK;
    return amn_error_set(err, AMN_E_PARSE, "%s: member '%s' is truncated (%llu of its %llu bytes)",
                         A->path, mb->name, (unsigned long long)got, (unsigned long long)mb->size);
}

/* Read a member's data blocks: checked against its header's size and the
 * ratio cap, kept (in place or copied) when `keep`. A model file of a
 * compressed archive is spilled (above) rather than held in memory.
 *
 * A ZIP's member is read no further than what is kept of it (nothing, or a
 * header's prefix): libarchive reads a ZIP held in memory by its central
 * directory and goes to the next member by seeking, so the rest is never
 * decompressed (inspecting a 256 MiB deflated model took 1.1 s when it
 * was). A compressed tar must decompress a member to go past it, so its
 * members are read through here, each block counted against the ratio
 * cap, rather than skipped inside libarchive with no cap. */
static int read_member(amni_archive *A, struct archive *a, member *mb, bool keep, amn_error *err) {
    uint64_t cap = keep ? keep_cap(A, mb) : 0;
    uint64_t got = 0;
    const bool spill = keep && !A->header_only && mb->weight && !ends_with(mb->name, ".json");
    amn_spill *sp = NULL;
    int rc = AMN_OK;
    bool cut = false; /* left unread past what is kept */
    for (;;) {
        const void *buf;
        size_t len;
        bool end;
        if (A->kind == KIND_ZIP && got >= cap && got < mb->size) {
            cut = true;
            break;
        }
        if ((rc = next_block(A, a, mb, got, &buf, &len, &end, err)) || end) break;
        if (keep && got == 0 && len == mb->size && in_map(A, buf, len)) {
            mb->data = buf; /* stored whole in the archive: used in place */
            mb->kept = len;
        } else if (spill && len) { /* (libarchive may end with an empty block) */
            if (!sp && (rc = spill_open(A, mb, &sp, err))) break;
            if ((rc = spill_write(A, mb, sp, buf, len, err))) break;
        } else if (keep && got < cap && len) { /* (an empty block may come with no buffer) */
            if (!mb->heap && got == 0 && A->header_only && len >= 8 &&
                ends_with(mb->name, ".safetensors")) {
                /* A header-only look at safetensors needs its length and header alone. */
                uint64_t n = 0;
                for (int i = 7; i >= 0; i--) n = n << 8 | ((const uint8_t *)buf)[i];
                if (cap >= 8 && n <= cap - 8) cap = 8 + n;
            }
            if (!mb->heap && (rc = heap_for(A, mb, cap, err))) break;
            const uint64_t n = cap - got < len ? cap - got : len;
            memcpy(mb->heap + got, buf, (size_t)n);
        }
        got += len;
        drop_resident(A, len);
    }
    if (!rc && !cut) rc = check_whole(A, mb, got, err);
    if (sp) {
        if (rc)
            amn_spill_free(sp);
        else
            rc = spill_map(A, mb, sp, err);
    }
    if (rc) return rc;
    if (keep && mb->size == 0) {
        mb->data = (const uint8_t *)"";
        mb->kept = 0;
    }
    return AMN_OK;
}

static void drop_data(amni_archive *A, member *mb) {
    if (mb->heap) A->held -= mb->kept;
    free(mb->heap);
    mb->heap = NULL;
    amn_map_close(mb->spill);
    mb->spill = NULL;
    mb->data = NULL;
    mb->kept = 0;
}

/* One member header: checked, recorded, its data read. */
static int entry(amni_archive *A, struct archive *a, struct archive_entry *e, bool list_only,
                 amn_error *err) {
    const char *raw = archive_entry_pathname(e);
    char *name = NULL;
    int rc = normalise(A, raw, &name, err);
    if (rc) return rc;
    const char *link = archive_entry_hardlink(e);
    const mode_t type = archive_entry_filetype(e);
    if (link || type == AE_IFLNK)
        rc = amn_error_set(err, AMN_E_DISALLOWED,
                           "%s: member '%s' is a %s link (to '%s'); a model archive holds plain "
                           "files",
                           A->path, name, link ? "hard" : "symbolic",
                           link                       ? link
                           : archive_entry_symlink(e) ? archive_entry_symlink(e)
                                                      : "");
    else if (type != AE_IFDIR && !*name) /* ".", "./" */
        rc = amn_error_set(err, AMN_E_PARSE, "%s: member '%s' is a file without a name", A->path,
                           raw);
    else if (type != AE_IFREG && type != AE_IFDIR)
        rc = amn_error_set(err, AMN_E_DISALLOWED, "%s: member '%s' is not a regular file", A->path,
                           name);
    else if (archive_entry_sparse_count(e) > 0)
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: %s: member '%s' is a sparse file",
                           A->path, name);
    else if (archive_entry_is_encrypted(e))
        rc = amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: %s: member '%s' is encrypted",
                           A->path, name);
    else if (type == AE_IFREG && (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0))
        rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                           "unsupported: %s: member '%s' does not say its size", A->path, name);
    if (rc) {
        free(name);
        return rc;
    }
    if (A->n == A->cap) {
        size_t cap = A->cap ? A->cap * 2 : 16;
        member *p = realloc(A->m, cap * sizeof *p);
        if (!p) {
            free(name);
            return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        }
        A->m = p;
        A->cap = cap;
    }
    member *mb = &A->m[A->n++];
    *mb = (member){
        .name = name, .dir = type == AE_IFDIR, .depth = depth_of(name), .beyond = UINT64_MAX};
    if (mb->dir) return AMN_OK;
    mb->size = (uint64_t)archive_entry_size(e);
    mb->weight = is_weight(name);
    if (list_only) return AMN_OK;
    bool keep = mb->weight && mb->depth <= A->min_depth;
    if (keep && mb->depth < A->min_depth) { /* a shallower folder: the deeper ones are not it */
        for (size_t i = 0; i + 1 < A->n; i++)
            if (A->m[i].weight) drop_data(A, &A->m[i]);
        A->min_depth = mb->depth;
    }
    keep |= is_settings(name) && mb->size <= SETTINGS_MAX;
    return read_member(A, a, mb, keep, err);
}

/* Every member header once. AMNI_NOT_ARCHIVE when libarchive finds no tar
 * or ZIP at all. */
static struct archive *reader_new(void) {
    struct archive *a = archive_read_new();
    if (!a) return NULL;
    /* Each decompressor only if libarchive has it built in: its fallback
     * (ARCHIVE_WARN) runs an outside program, which a library must not. */
    static int (*const filters[])(struct archive *) = {
        archive_read_support_filter_gzip, archive_read_support_filter_xz,
        archive_read_support_filter_zstd, archive_read_support_filter_bzip2};
    unsigned skip = 0;
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++) {
        if (skip & 1u << i || filters[i](a) == ARCHIVE_OK) continue;
        skip |= 1u << i; /* start again without it */
        archive_read_free(a);
        if (!(a = archive_read_new())) return NULL;
        i = (size_t)-1;
    }
    archive_read_support_format_tar(a);
    archive_read_support_format_zip(a);
    return a;
}

/* Opens `a` on the archive. A compressed stream is read with read():
 * nothing of it is used in place, and its pages would only swell the
 * mapping's resident set; a gzip one is decompressed by gunzip.c, which
 * checks what libarchive's gzip reader does not. libarchive's status. */
static int reader_open(amni_archive *A, struct archive *a, bool from_file, amni_gunzip **gz) {
    *gz = NULL;
    A->gz = NULL;
    if (A->kind != KIND_FILTERED && A->kind != KIND_GZIP && !from_file)
        return archive_read_open_memory(a, amn_map_data(A->map), (size_t)amn_map_size(A->map));
    if (A->kind != KIND_GZIP) return archive_read_open_filename(a, A->path, 1u << 20);
    amn_error scratch = {0};
    if (amni_gunzip_new(A->path, gz, &scratch)) return ARCHIVE_FATAL;
    A->gz = *gz;
    return archive_read_open(a, *gz, NULL, amni_gunzip_read, NULL);
}

static int ratio_past_end(void *A, uint64_t n, amn_error *err) {
    return check_ratio(A, n, "(past the end of the tar)", err);
}

/* libarchive's reading ends with the tar: the gzip stream is read on to its
 * end, its checks run, its bytes counted against the ratio cap. */
static int reader_close(amni_archive *A, struct archive *a, amni_gunzip *gz, int rc,
                        amn_error *err) {
    if (!rc && gz) rc = amni_gunzip_finish(gz, ratio_past_end, A, err);
    archive_read_free(a);
    amni_gunzip_free(gz);
    A->gz = NULL;
    return rc;
}

static int pass(amni_archive *A, bool list_only, amn_error *err) {
    struct archive *a = reader_new();
    if (!a) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = AMN_OK;
    amni_gunzip *gz;
    if (reader_open(A, a, false, &gz) != ARCHIVE_OK) {
        /* A gzip stream damaged within libarchive's first look is a tar
         * (amn_path_is_archive found its first header), not another file. */
        rc = amni_gunzip_error(gz)
                 ? amn_error_set(err, AMN_E_PARSE, "%s: %s", A->path, amni_gunzip_error(gz))
                 : AMNI_NOT_ARCHIVE;
        return reader_close(A, a, gz, rc, err);
    }
    for (uint64_t k = 0;; k++) {
        struct archive_entry *e;
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
            rc = k == 0 ? AMNI_NOT_ARCHIVE
                        : amn_error_set(err, AMN_E_PARSE, "%s: damaged or truncated archive: %s",
                                        A->path,
                                        archive_error_string(a) ? archive_error_string(a) : "?");
            break;
        }
        const int fmt = archive_format(a) & ARCHIVE_FORMAT_BASE_MASK;
        if (k == 0 && fmt != ARCHIVE_FORMAT_TAR && fmt != ARCHIVE_FORMAT_ZIP) {
            rc = AMNI_NOT_ARCHIVE;
            break;
        }
        if (A->lim->max_tensors && k >= A->lim->max_tensors) {
            rc = amn_error_set(err, AMN_E_LIMIT, "%s: more than %llu members (--max-items)",
                               A->path, (unsigned long long)A->lim->max_tensors);
            break;
        }
        if ((rc = entry(A, a, e, list_only, err))) break;
    }
    return reader_close(A, a, gz, rc, err);
}

static int cmp_member(const void *x, const void *y) {
    const member *a = *(member *const *)x, *b = *(member *const *)y;
    return strcmp(a->name, b->name);
}

/* Two members of one name: which one a folder holds depends on the tool
 * that unpacks it, so neither is taken. */
static int check_duplicates(const amni_archive *A, amn_error *err) {
    member **v = malloc((A->n ? A->n : 1) * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < A->n; i++)
        if (!A->m[i].dir) v[n++] = &A->m[i];
    qsort(v, n, sizeof *v, cmp_member);
    int rc = AMN_OK;
    for (size_t i = 1; i < n && !rc; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            rc = amn_error_set(err, AMN_E_DISALLOWED,
                               "%s: ambiguous archive: two members named '%s'; tools that unpack "
                               "it keep different ones",
                               A->path, v[i]->name);
    free(v);
    return rc;
}

/* A ZIP holding *.npy members is an npz; one holding data.pkl a torch file. */
static int classify_zip(const amni_archive *A, amn_error *err) {
    const char *marker = NULL, *weight = NULL;
    for (size_t i = 0; i < A->n; i++) {
        const member *mb = &A->m[i];
        if (mb->dir) continue;
        if (!marker &&
            (ends_with(mb->name, ".npy") || strcmp(base_name(mb->name), "data.pkl") == 0))
            marker = mb->name;
        if (!weight && mb->weight) weight = mb->name;
    }
    if (!weight) return AMNI_NOT_ARCHIVE;
    if (marker)
        return amn_error_set(err, AMN_E_DISALLOWED,
                             "%s: ambiguous ZIP: it holds '%s' as an npz or torch file does, and "
                             "model files ('%s') as a packed model folder does",
                             A->path, marker, weight);
    return AMN_OK;
}

/* libarchive reads a ZIP by its central directory, tools that stream one
 * (bsdtar from a pipe, Java's ZipInputStream) by its local headers, and
 * where there are two end records readers pick different ones: an archive
 * they could read as different folders is refused (AMN_E_DISALLOWED), as
 * the npz and torch readers refuse such a file. The kit's ZIP reader,
 * which they use, checks this: one end record, every byte in one member,
 * each local header as the directory says. */
static int zip_unambiguous(const amni_archive *A, amn_error *err) {
    zip_memsrc ms;
    zip_memsrc_init(&ms, amn_map_data(A->map), amn_map_size(A->map), A->path);
    zip_dir d;
    const int rc = zip_dir_read(&ms.src, A->lim, &d, err);
    if (!rc) zip_dir_free(&d);
    return rc;
}

static void dir_of(const char *name, const char **dir, size_t *len) {
    const char *slash = strrchr(name, '/');
    *dir = name;
    *len = slash ? (size_t)(slash - name) : 0;
}

static member *find_member(amni_archive *A, const char *dir, size_t dl, const char *file) {
    for (size_t i = 0; i < A->n; i++) {
        member *mb = &A->m[i];
        if (!mb->data || mb->dir) continue;
        const char *d;
        size_t l;
        dir_of(mb->name, &d, &l);
        if (l == dl && strncmp(d, dir, dl) == 0 && strcmp(base_name(mb->name), file) == 0)
            return mb;
    }
    return NULL;
}

static int choose_add(amni_archive *A, const member *mb, amn_error *err) {
    for (size_t i = 0; i < A->n_chosen; i++)
        if (A->chosen[i] == (size_t)(mb - A->m)) return AMN_OK;
    size_t *p = realloc(A->chosen, (A->n_chosen + 1) * sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    A->chosen = p;
    A->chosen[A->n_chosen++] = (size_t)(mb - A->m);
    return AMN_OK;
}

/* The shards a model.safetensors.index.json (or pytorch_model.bin.index.json)
 * names, in order of first mention, each a plain *.safetensors (*.bin) file
 * of the index's folder. */
static int choose_indexed(amni_archive *A, const member *ix, const char *ext, amn_error *err) {
    if (ix->size > A->lim->max_header_bytes)
        return amn_error_set(err, AMN_E_LIMIT, "%s: member '%s' is larger than --max-header",
                             A->path, ix->name);
    json_tokener *tok = json_tokener_new_ex((int)A->lim->max_depth);
    if (!tok) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_object *root = json_tokener_parse_ex(tok, (const char *)ix->data, (int)ix->size);
    const bool ok = json_tokener_get_error(tok) == json_tokener_success;
    json_tokener_free(tok);
    json_object *map = NULL;
    if (!ok || !json_object_object_get_ex(root, "weight_map", &map) ||
        !json_object_is_type(map, json_type_object)) {
        json_object_put(root);
        return amn_error_set(err, AMN_E_PARSE, "%s: member '%s': no weight_map object", A->path,
                             ix->name);
    }
    A->index = root;
    const char *dir;
    size_t dl;
    dir_of(ix->name, &dir, &dl);
    json_object_object_foreach(map, key, val) {
        const char *file = json_object_get_string(val);
        member *mb = NULL;
        if (json_object_is_type(val, json_type_string) && !strchr(file, '/') &&
            ends_with(file, ext) && strcmp(file, ext) != 0)
            mb = find_member(A, dir, dl, file);
        if (!mb)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: member '%s': weight_map entry %s names a bad shard (not a "
                                 "%s file beside the index)",
                                 A->path, ix->name, key, ext);
        int rc = choose_add(A, mb, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

/* NAME-0000K-of-0000N.gguf (a split GGUF's shard, llama_split_path): K and
 * N, and the length of NAME. */
static bool split_name(const char *name, unsigned *k, unsigned *n, size_t *prefix) {
    const char *b = base_name(name);
    const size_t len = strlen(b), tail = sizeof "-00001-of-00001.gguf" - 1;
    if (len <= tail || !ends_with(b, ".gguf")) return false;
    const char *t = b + len - tail;
    unsigned kk = 0, nn = 0;
    for (int i = 0; i < 5; i++) {
        if (t[1 + i] < '0' || t[1 + i] > '9' || t[10 + i] < '0' || t[10 + i] > '9') return false;
        kk = kk * 10 + (unsigned)(t[1 + i] - '0');
        nn = nn * 10 + (unsigned)(t[10 + i] - '0');
    }
    if (t[0] != '-' || memcmp(t + 6, "-of-", 4) != 0 || kk < 1 || kk > nn) return false;
    *k = kk;
    *n = nn;
    *prefix = (size_t)(t - name);
    return true;
}

/* When the folder's model files (no safetensors) are all shards of one
 * split GGUF, the lowest-numbered: the GGUF plugin opens the others as its
 * siblings (amn_siblings) and checks them all, a missing one included. */
static const member *split_first(const amni_archive *A) {
    const member *first = NULL;
    unsigned first_k = 0, count = 0;
    size_t plen = 0;
    for (size_t i = 0; i < A->n; i++) {
        const member *mb = &A->m[i];
        if (!mb->weight || !mb->data || ends_with(mb->name, ".safetensors")) continue;
        unsigned k, n;
        size_t p;
        if (!split_name(mb->name, &k, &n, &p)) return NULL;
        if (first && (n != count || p != plen || strncmp(mb->name, first->name, p) != 0))
            return NULL; /* shards of two models */
        if (!first) {
            count = n;
            plen = p;
        }
        if (!first || k < first_k) {
            first_k = k;
            first = mb;
        }
    }
    return first;
}

/* Every chosen-to-be member whose name ends in ext (and, with prefix, whose
 * base name starts with it), in name order. */
static int choose_sorted(amni_archive *A, const char *prefix, const char *ext, size_t n,
                         amn_error *err) {
    member **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t k = 0;
    for (size_t i = 0; i < A->n && k < n; i++)
        if (A->m[i].weight && A->m[i].data && ends_with(A->m[i].name, ext) &&
            (!prefix || strncmp(base_name(A->m[i].name), prefix, strlen(prefix)) == 0))
            v[k++] = &A->m[i];
    qsort(v, k, sizeof *v, cmp_member);
    int rc = AMN_OK;
    for (size_t i = 0; i < k && !rc; i++) rc = choose_add(A, v[i], err);
    free(v);
    return rc;
}

/* pytorch_model*.bin shards without their index (and no pytorch_model.bin,
 * the one file transformers would take): how many, or 0 when the folder's
 * other model files are not all such shards. */
static size_t bin_parts(const amni_archive *A) {
    size_t n = 0;
    for (size_t i = 0; i < A->n; i++) {
        const member *mb = &A->m[i];
        if (!mb->weight || !mb->data) continue;
        const char *b = base_name(mb->name);
        if (strncmp(b, "pytorch_model", 13) != 0 || !ends_with(b, ".bin") ||
            strcmp(b, "pytorch_model.bin") == 0)
            return 0;
        n++;
    }
    return n;
}

/* The weight files of the shallowest folder, as a folder's are chosen. */
static int choose(amni_archive *A, amn_error *err) {
    const member *first = NULL, *ix = NULL, *bix = NULL, *other = NULL;
    size_t n_st = 0, n_other = 0;
    for (size_t i = 0; i < A->n; i++) {
        const member *mb = &A->m[i];
        if (!mb->weight || !mb->data) continue;
        const char *d0, *d1;
        size_t l0, l1;
        if (!first) first = mb;
        dir_of(first->name, &d0, &l0);
        dir_of(mb->name, &d1, &l1);
        if (l0 != l1 || strncmp(d0, d1, l0) != 0)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: %s: model files in two folders ('%s' and '%s'); "
                                 "unpack it and open one",
                                 A->path, first->name, mb->name);
        if (ends_with(mb->name, ".safetensors.index.json")) {
            if (ix)
                return amn_error_set(err, AMN_E_PARSE, "%s: more than one index file ('%s', '%s')",
                                     A->path, ix->name, mb->name);
            ix = mb;
        } else if (ends_with(mb->name, ".safetensors")) {
            n_st++;
        } else if (ends_with(mb->name, ".bin.index.json")) {
            if (bix)
                return amn_error_set(err, AMN_E_PARSE, "%s: more than one index file ('%s', '%s')",
                                     A->path, bix->name, mb->name);
            bix = mb;
        } else {
            if (!other) other = mb;
            n_other++;
        }
    }
    if (!first)
        return amn_error_set(err, AMN_E_PARSE,
                             "%s: the archive holds no model files (*.safetensors, *.gguf, "
                             "*.npz, *.pth, *.bin)",
                             A->path);
    if (ix) return choose_indexed(A, ix, ".safetensors", err);
    if (n_st) return choose_sorted(A, NULL, ".safetensors", n_st, err);
    if (bix) return choose_indexed(A, bix, ".bin", err);
    if (n_other > 1 && bin_parts(A) == n_other)
        return choose_sorted(A, "pytorch_model", ".bin", n_other, err);
    const member *shard = n_other > 1 ? split_first(A) : NULL;
    if (shard) return choose_add(A, shard, err); /* it opens its siblings */
    if (n_other > 1)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "unsupported: %s: %zu model files beside '%s' and no safetensors; "
                             "unpack it and open one",
                             A->path, n_other, other->name);
    return choose_add(A, other, err);
}

/* The packed folder's name: its folder in the archive ("model" of
 * model/config.json; the last component of a deeper one), or, packed at
 * the top level, the archive's file name without its archive extension
 * (what `tar xf` into a folder of that name gives). */
static int name_folder(amni_archive *A, amn_error *err) {
    static const char *const exts[] = {".tar.gz", ".tar.xz", ".tar.zst", ".tar.bz2", ".tgz",
                                       ".txz",    ".tzst",   ".tbz2",    ".tar",     ".zip"};
    const char *dir;
    size_t dl;
    dir_of(A->m[A->chosen[0]].name, &dir, &dl);
    const char *b = dir;
    if (dl) { /* the last component of dir[0, dl) */
        for (size_t i = 0; i < dl; i++)
            if (dir[i] == '/') b = dir + i + 1;
        dl -= (size_t)(b - dir);
    } else {
        b = base_name(A->path);
        dl = strlen(b);
        for (size_t i = 0; i < sizeof exts / sizeof *exts; i++) {
            const size_t el = strlen(exts[i]);
            if (dl > el && strcmp(b + dl - el, exts[i]) == 0) {
                dl -= el;
                break;
            }
        }
    }
    if (!(A->folder = strndup(b, dl))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return AMN_OK;
}

static int make_labels(amni_archive *A, amn_error *err) {
    if (!(A->labels = calloc(A->n_chosen ? A->n_chosen : 1, sizeof *A->labels)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < A->n_chosen; i++) {
        const char *name = A->m[A->chosen[i]].name;
        const size_t n = strlen(A->path) + 1 + strlen(name) + 1;
        if (!(A->labels[i] = malloc(n))) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
        snprintf(A->labels[i], n, "%s/%s", A->path, name);
    }
    return AMN_OK;
}

void amni_archive_free(amni_archive *A) {
    if (!A) return;
    for (size_t i = 0; i < A->n; i++) {
        free(A->m[i].heap);
        amn_map_close(A->m[i].spill);
        free(A->m[i].name);
        free(A->m[i].label);
    }
    for (size_t i = 0; A->labels && i < A->n_chosen; i++) free(A->labels[i]);
    free(A->labels);
    free(A->folder);
    free(A->m);
    free(A->chosen);
    json_object_put(A->index);
    amn_map_close(A->map);
    free((char *)A->path);
    free(A);
}

static int archive_new(const char *path, int kind, const amn_limits *lim, bool header_only,
                       amni_archive **out, amn_error *err) {
    amni_archive *A = *out = calloc(1, sizeof *A);
    if (!A || !(A->path = strdup(path))) {
        free(A);
        *out = NULL;
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    A->lim_copy = *lim;
    A->lim = &A->lim_copy;
    A->header_only = header_only;
    A->kind = kind;
    A->min_depth = ~0u;
    /* A header-only look reads the member headers and little else: no
     * read-ahead over the whole archive (amn_map_open's). */
    int rc =
        header_only ? amni_map_open_lazy(path, &A->map, err) : amn_map_open(path, &A->map, err);
    if (!rc) A->csize = amn_map_size(A->map);
    return rc;
}

/* A ZIP's names first: an npz or a .pth is not a packed model folder. */
static int zip_names(amni_archive *A, amn_error *err) {
    amn_error scratch = {0};
    int rc = pass(A, true, err);
    if (!rc)
        rc = classify_zip(A, err);
    else if (classify_zip(A, &scratch) != AMN_OK)
        rc = AMNI_NOT_ARCHIVE; /* not a model folder: the ZIP formats say what is wrong */
    for (size_t i = 0; i < A->n; i++) free(A->m[i].name);
    A->n = 0;
    return rc;
}

/* A compressed stream holds a tar: its first member header says so. */
static bool holds_tar(const char *path) {
    struct archive *a = reader_new();
    struct archive_entry *e;
    const bool yes = a && archive_read_open_filename(a, path, 1u << 16) == ARCHIVE_OK &&
                     archive_read_next_header(a, &e) >= ARCHIVE_WARN &&
                     (archive_format(a) & ARCHIVE_FORMAT_BASE_MASK) == ARCHIVE_FORMAT_TAR;
    if (a) archive_read_free(a);
    return yes;
}

bool amn_path_is_archive(const char *path) {
    const int kind = path ? sniff(path) : KIND_NONE;
    if (kind == KIND_TAR) return true;
    if (kind == KIND_FILTERED || kind == KIND_GZIP) return holds_tar(path);
    if (kind != KIND_ZIP) return false;
    amn_limits lim;
    amn_limits_default(&lim);
    amni_archive *A;
    amn_error err = {0};
    int rc = archive_new(path, kind, &lim, true, &A, &err);
    if (!rc) rc = zip_names(A, &err);
    amni_archive_free(A);
    return rc == AMN_OK;
}

int amni_archive_load(const char *path, const amn_limits *lim, bool header_only, amni_archive **out,
                      amn_error *err) {
    *out = NULL;
    const int kind = sniff(path);
    if (kind == KIND_NONE) return AMNI_NOT_ARCHIVE;
    amni_archive *A;
    int rc = archive_new(path, kind, lim, header_only, &A, err);
    if (!rc && kind == KIND_ZIP) rc = zip_names(A, err);
    if (!rc && kind == KIND_ZIP) rc = zip_unambiguous(A, err);
    if (!rc) rc = pass(A, false, err);
    if (!rc) rc = check_duplicates(A, err);
    if (!rc) rc = choose(A, err);
    if (!rc) rc = make_labels(A, err);
    if (!rc) rc = name_folder(A, err);
    if (rc) {
        amni_archive_free(A);
        return rc;
    }
    *out = A;
    return AMN_OK;
}

size_t amni_archive_count(const amni_archive *A) {
    return A->n_chosen;
}
const char *amni_archive_label(const amni_archive *A, size_t i) {
    return A->labels[i];
}
const uint8_t *amni_archive_data(const amni_archive *A, size_t i) {
    return A->m[A->chosen[i]].data;
}
uint64_t amni_archive_size(const amni_archive *A, size_t i) {
    return A->m[A->chosen[i]].size;
}

int amni_archive_detect(const amn_ctx *ctx, const amni_archive *A, size_t i, const char *from,
                        const amn_format **out, amn_error *err) {
    const member *mb = &A->m[A->chosen[i]];
    amn_source src;
    amn_source_memory(&src, mb->data, (size_t)mb->kept, A->labels[i]);
    return amn_ctx_detect_source(ctx, &src, from, out, err);
}

/* ---- opening: every chosen member by its format, joined into one model --- */

static void view_release(void *p) {
    amn_map_close(p); /* a view: not amn_map_release, so no one takes it for a file */
}

static void model_release(void *p) {
    amn_model_free(p);
}

static void archive_release(void *p) {
    amni_archive_free(p);
}

/* Header-only reads of a member kept in part: past the prefix is where a
 * compressed archive cannot go back to. */
static int prefix_read(void *ctx, uint64_t off, void *buf, size_t n, size_t *got) {
    member *mb = ctx;
    if (off > mb->kept || n > mb->kept - off) {
        if (mb->beyond == UINT64_MAX) mb->beyond = off + n; /* n <= the member's size */
        *got = 0;
        return AMN_E_UNSUPPORTED;
    }
    memcpy(buf, mb->data + off, n);
    *got = n;
    return AMN_OK;
}

/* ---- the files beside a model file (amn_siblings): the other shards of a
 * split GGUF are members of the same folder, read from the bytes the
 * archive holds (in place, spilled, or a header's prefix). */
typedef struct siblings_ctx {
    amni_archive *A;
    const char *dir; /* the opened member's folder */
    size_t dl;
} siblings_ctx;

static bool sibling_find(void *ctx, const char *name, amn_sibling *out) {
    siblings_ctx *c = ctx;
    amni_archive *A = c->A;
    member *mb = name && !strchr(name, '/') ? find_member(A, c->dir, c->dl, name) : NULL;
    if (!mb || !mb->weight) return false;
    if (!mb->label) {
        const size_t n = strlen(A->path) + 1 + strlen(mb->name) + 1;
        if (!(mb->label = malloc(n))) return false;
        snprintf(mb->label, n, "%s/%s", A->path, mb->name);
    }
    *out = (amn_sibling){.struct_size = sizeof *out, .size = mb->size};
    if (A->header_only) {
        out->src =
            (amn_source){.ctx = mb, .size = mb->size, .read_at = prefix_read, .name = mb->label};
    } else {
        if (mb->kept != mb->size || mb->size > SIZE_MAX) return false;
        amn_source_memory(&out->src, mb->data, (size_t)mb->size, mb->label);
        out->data = mb->data;
    }
    return true;
}

/* The member a header-only read went past the prefix of, or NULL. */
static const member *read_past(const amni_archive *A) {
    for (size_t i = 0; i < A->n; i++)
        if (A->m[i].beyond != UINT64_MAX) return &A->m[i];
    return NULL;
}

/* Member `chosen` i by its format: header-only (inspect) through a source
 * over what is kept, or opened through a view of its bytes. */
static int open_member(amni_archive *A, size_t i, const amn_format *f, bool header_only,
                       amn_model **sub, amn_error *err) {
    member *mb = &A->m[A->chosen[i]];
    const char *label = A->labels[i];
    siblings_ctx sc = {.A = A};
    dir_of(mb->name, &sc.dir, &sc.dl);
    const amn_siblings sib = {.struct_size = sizeof sib, .ctx = &sc, .find = sibling_find};
    int rc;
    if (header_only) {
        if (!f->inspect)
            return amn_error_set(err, AMN_E_UNSUPPORTED,
                                 "unsupported: format %s has no header-only inspection", f->name);
        amn_source src = {.ctx = mb, .size = mb->size, .read_at = prefix_read, .name = label};
        amn_inspect_args ia = {.struct_size = sizeof ia,
                               .src = &src,
                               .path = label,
                               .limits = A->lim,
                               .siblings = &sib};
        rc = f->inspect(&ia, sub, err);
        const member *past = rc ? read_past(A) : NULL;
        if (past)
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: %s/%s: %s reads this member up to byte %llu, past "
                               "the first %llu bytes kept from the compressed archive: it needs "
                               "random access (use parse, or an uncompressed .tar)",
                               A->path, past->name, f->name, (unsigned long long)past->beyond,
                               (unsigned long long)past->kept);
        return rc;
    }
    amn_map *view;
    if ((rc = amni_map_view(mb->data, mb->size, label, &view, err))) return rc;
    amn_open_args oa = {
        .struct_size = sizeof oa, .path = label, .map = view, .limits = A->lim, .siblings = &sib};
    if ((rc = f->open(&oa, sub, err)) || !*sub) {
        amn_map_close(view);
        return rc ? rc
                  : amn_error_set(err, AMN_E_PARSE, "%s: format %s returned no model", label,
                                  f->name);
    }
    return amn_model_adopt(*sub, view, view_release, err);
}

int amni_archive_inspect(amni_archive *A, size_t i, const amn_format *f, amn_model **out,
                         amn_error *err) {
    *out = NULL;
    const int rc = open_member(A, i, f, true, out, err);
    return rc && read_past(A) ? AMNI_NEEDS_WHOLE : rc;
}

bool amni_archive_whole(const amni_archive *A, size_t i) {
    const member *mb = &A->m[A->chosen[i]];
    return mb->kept == mb->size;
}

/* sub's tensors, metadata, key/values and notes into dst, which then owns sub. */
static int join(amn_model *dst, amn_model *sub, const char *label, amn_error *err) {
    int rc = AMN_OK;
    for (size_t i = 0; !rc && i < amn_model_tensor_count(sub); i++) {
        const amn_tensor *t = amn_model_tensor(sub, i);
        if (amn_model_find(dst, t->name) >= 0)
            rc = amn_error_set(err, AMN_E_PARSE,
                               "%s: tensor %s is in two shards (and an earlier one)", label,
                               t->name);
        else
            rc = amn_model_add_tensor(dst, t, err);
    }
    for (size_t i = 0; !rc && i < amn_model_meta_count(sub); i++)
        rc = amn_model_set_meta(dst, amn_model_meta_key(sub, i), amn_model_meta_value(sub, i), err);
    for (size_t i = 0; !rc && i < amn_model_kv_count(sub); i++)
        rc = amn_model_add_kv(dst, amn_model_kv(sub, i), err);
    for (size_t i = 0; !rc && i < amn_model_note_count(sub); i++)
        rc =
            amn_model_add_note(dst, amn_model_note_name(sub, i), amn_model_note_value(sub, i), err);
    if (rc) {
        amn_model_free(sub);
        return rc;
    }
    return amn_model_adopt(dst, sub, model_release, err);
}

/* Every tensor the index's weight_map names is held by a shard. */
static int check_held(const amni_archive *A, const amn_model *m, amn_error *err) {
    json_object *map = NULL;
    if (!A->index || !json_object_object_get_ex(A->index, "weight_map", &map)) return AMN_OK;
    json_object_object_foreach(map, key, val) {
        (void)val;
        if (amn_model_find(m, key) < 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "%s: the index's weight_map names %s, no shard holds it", A->path,
                                 key);
    }
    return AMN_OK;
}

static int join_all(const amn_ctx *ctx, amni_archive *A, const char *from, amn_model **out,
                    amn_error *err) {
    amn_model *m = NULL;
    int rc = AMN_OK;
    const char *label = NULL;
    for (size_t i = 0; !rc && i < A->n_chosen; i++) {
        const amn_format *f;
        amn_model *sub = NULL;
        if ((rc = amni_archive_detect(ctx, A, i, from, &f, err))) break;
        if (A->header_only ? !f->inspect : !f->open) {
            rc = amn_error_set(err, AMN_E_UNSUPPORTED, "unsupported: format %s cannot be read",
                               f->name);
            break;
        }
        if ((rc = open_member(A, i, f, A->header_only, &sub, err))) break;
        if (!m && !(m = amn_model_new(amn_model_format(sub)))) {
            amn_model_free(sub);
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
            break;
        }
        if (strcmp(amn_model_format(m), amn_model_format(sub)) != 0) {
            rc = amn_error_set(err, AMN_E_UNSUPPORTED,
                               "unsupported: %s: model files of two formats (%s and %s)", A->path,
                               amn_model_format(m), amn_model_format(sub));
            amn_model_free(sub);
            break;
        }
        label = i == 0 ? amn_model_label(sub) : NULL; /* the first file's, as a folder's */
        if (label && (rc = amn_model_set_label(m, label, err))) {
            amn_model_free(sub);
            break;
        }
        rc = join(m, sub, A->labels[i], err);
    }
    if (!rc && A->n_chosen > 1) { /* "safetensors (sharded)", "PyTorch state_dict (sharded)" */
        char text[128];
        snprintf(text, sizeof text, "%s (sharded)", amn_model_label(m));
        rc = amn_model_set_label(m, text, err);
    }
    if (!rc) rc = check_held(A, m, err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

int amni_archive_open(const amn_ctx *ctx, const char *path, const char *from, const amn_limits *lim,
                      bool header_only, amn_model **out, amn_error *err) {
    *out = NULL;
    amni_archive *A;
    int rc = amni_archive_load(path, lim, header_only, &A, err);
    if (rc) return rc;
    amn_model *m = NULL;
    if ((rc = join_all(ctx, A, from, &m, err))) {
        amni_archive_free(A);
        return rc;
    }
    /* The archive's mapping as the model's own file (so reads of members
     * stored in place go the ways a file's do), then the rest it keeps. */
    amn_map *map = A->map;
    A->map = NULL;
    if ((rc = amn_model_adopt(m, map, amn_map_release, err))) {
        amni_archive_free(A);
        amn_model_free(m);
        return rc;
    }
    /* So are the temporary files model files were decompressed into. */
    for (size_t i = 0; i < A->n; i++) {
        amn_map *spill = A->m[i].spill;
        A->m[i].spill = NULL;
        if (spill && (rc = amn_model_adopt(m, spill, amn_map_release, err))) {
            amni_archive_free(A);
            amn_model_free(m);
            return rc;
        }
    }
    if ((rc = amn_model_adopt(m, A, archive_release, err))) {
        amn_model_free(m);
        return rc;
    }
    /* The model's path is its first model file's "<archive>/<member>": no
     * file of that name exists, so what looks for settings files beside a
     * model's path (the plugin kit's quantization configs) finds none,
     * rather than those beside the archive, which are not the model's. */
    if ((rc = amn_model_set_path(m, A->labels[0], err))) {
        amn_model_free(m);
        return rc;
    }
    amn_model_set_limits(m, lim);
    *out = m;
    return AMN_OK;
}

/* ---- what the core asks of a model opened from an archive -------------- */

const char *amni_archive_path(const amn_model *m) {
    const amni_archive *A = amni_model_resource(m, archive_release);
    return A ? A->path : NULL;
}

/* A file of the packed model folder held whole, by its plain name. */
static const member *folder_file(const amn_model *m, const char *name) {
    amni_archive *A = m ? amni_model_resource(m, archive_release) : NULL;
    if (!A || !A->n_chosen || !name || strchr(name, '/')) return NULL;
    const char *dir;
    size_t dl;
    dir_of(A->m[A->chosen[0]].name, &dir, &dl);
    const member *mb = find_member(A, dir, dl, name);
    return mb && mb->kept == mb->size ? mb : NULL;
}

const uint8_t *amni_archive_settings(const amn_model *m, const char *name, size_t *size) {
    const member *mb = is_settings(name) ? folder_file(m, name) : NULL;
    if (!mb) return NULL;
    *size = (size_t)mb->size;
    return mb->data;
}

bool amn_model_archive_file(const amn_model *m, const char *name, const uint8_t **data,
                            uint64_t *size) {
    const member *mb = folder_file(m, name);
    if (!mb) return false;
    *data = mb->data;
    *size = mb->size;
    return true;
}

const char *amn_model_archive_model_file(const amn_model *m, size_t i) {
    const amni_archive *A = m ? amni_model_resource(m, archive_release) : NULL;
    return A && i < A->n_chosen ? base_name(A->m[A->chosen[i]].name) : NULL;
}

const char *amn_model_archive_folder(const amn_model *m) {
    const amni_archive *A = m ? amni_model_resource(m, archive_release) : NULL;
    return A && A->n_chosen ? A->folder : NULL;
}

/* ---- the packed folder's other files, for a model folder written out ---- */

const char *amn_model_archive(const amn_model *m) {
    return m ? amni_archive_path(m) : NULL;
}

/* A member of the model folder (no subfolder) that is not a model file. */
static bool side_member(const char *name, const char *dir, size_t dl) {
    const char *d;
    size_t l;
    dir_of(name, &d, &l);
    if (l != dl || strncmp(d, dir, dl) != 0 || is_weight(name)) return false;
    const char *b = base_name(name);
    return *b && *b != '.';
}

/* n bytes at offset at of fd; 0, else the errno (EIO: no progress). */
static int write_at(int fd, uint64_t at, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = pwrite(fd, p, n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        n -= (size_t)w;
        at += (uint64_t)w;
    }
    return 0;
}

/* Member bytes into dir/<base name>, made new (O_EXCL), its mtime the
 * archive's: a file of the folder as tar or unzip would unpack it. */
static int extract_one(amni_archive *A, struct archive *a, struct archive_entry *e, member *mb,
                       const char *dir, amn_error *err) {
    const size_t n = strlen(dir) + 1 + strlen(base_name(mb->name)) + 1;
    char *path = malloc(n);
    if (!path) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    snprintf(path, n, "%s/%s", dir, base_name(mb->name));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    int rc = AMN_OK;
    if (fd < 0) {
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
        free(path);
        return rc;
    }
    uint64_t got = 0;
    for (;;) {
        const void *buf;
        size_t len;
        bool end;
        if ((rc = next_block(A, a, mb, got, &buf, &len, &end, err)) || end) break;
        const int werr = write_at(fd, got, buf, len);
        if (werr) {
            rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(werr));
            break;
        }
        got += len;
    }
    if (!rc) rc = check_whole(A, mb, got, err);
    if (!rc && archive_entry_mtime_is_set(e)) {
        const struct timespec t[2] = {
            {.tv_nsec = UTIME_OMIT},
            {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};
        futimens(fd, t); /* best effort: only --resume's identity notices */
    }
    if (close(fd) != 0 && !rc) rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    if (rc) unlink(path);
    free(path);
    return rc;
}

int amn_model_archive_extract(const amn_model *m, const char *dir, size_t *count, amn_error *err) {
    *count = 0;
    amni_archive *A = m ? amni_model_resource(m, archive_release) : NULL;
    if (!A || !A->n_chosen)
        return amn_error_set(err, AMN_E_INVALID, "amn_model_archive_extract: not from an archive");
    const char *mdir;
    size_t mdl;
    dir_of(A->m[A->chosen[0]].name, &mdir, &mdl);
    /* The archive again, from its start: the ratio cap counts this pass too. */
    struct archive *a = reader_new();
    if (!a) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    A->produced = 0;
    int rc = AMN_OK;
    amni_gunzip *gz;
    if (reader_open(A, a, true, &gz) != ARCHIVE_OK) {
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", A->path,
                           archive_error_string(a) ? archive_error_string(a) : "unreadable");
        return reader_close(A, a, gz, rc, err);
    }
    for (size_t k = 0; !rc; k++) {
        struct archive_entry *e;
        int r = archive_read_next_header(a, &e);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN || k >= A->n) { /* the archive changed since it was read */
            rc = amn_error_set(err, AMN_E_IO, "%s: damaged, or changed since it was opened",
                               A->path);
            break;
        }
        member *mb = &A->m[k];
        char *name = NULL;
        if ((rc = normalise(A, archive_entry_pathname(e), &name, err))) break;
        const bool same = strcmp(name, mb->name) == 0;
        free(name);
        if (!same) {
            rc = amn_error_set(err, AMN_E_IO, "%s: member '%s' changed since it was opened",
                               A->path, mb->name);
            break;
        }
        if (mb->dir || !side_member(mb->name, mdir, mdl)) continue;
        if ((uint64_t)archive_entry_size(e) != mb->size) {
            rc = amn_error_set(err, AMN_E_IO, "%s: member '%s' changed since it was opened",
                               A->path, mb->name);
            break;
        }
        if (!(rc = extract_one(A, a, e, mb, dir, err))) ++*count;
    }
    return reader_close(A, a, gz, rc, err);
}
