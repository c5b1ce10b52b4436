/* Model folders out: the outputs split into shards as huggingface_hub's
 * split_torch_state_dict_into_shards splits a state dict (in the model's
 * order, a new shard when the next tensor would pass the limit, a tensor
 * larger than the limit alone in its own), each shard one amn_convert of the
 * tensors it holds, the index as save_pretrained writes it, then config.json
 * and the other files, all in a temporary folder renamed into place. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "folder.h"

#define INDEX_NAME "model.safetensors.index.json"

/* ---- what the command line asks for ---- */

static bool is_dir(const char *path) {
    struct stat st;
    return path && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool is_index(const char *path) {
    size_t n = strlen(path);
    static const char *const sfx[] = {".safetensors.index.json", ".bin.index.json"};
    for (size_t i = 0; i < 2; i++) {
        size_t k = strlen(sfx[i]);
        if (n > k && strcmp(path + n - k, sfx[i]) == 0) return true;
    }
    return false;
}

bool cli_folder_wanted(const cli_args *a, const char *input_path, bool resolved) {
    if (a->output) {
        const size_t n = strlen(a->output), k = strlen(".safetensors");
        if ((n && a->output[n - 1] == '/') || is_dir(a->output)) return true;
        /* A file name asks for one file, whatever the input. */
        if (n > k && strcmp(a->output + n - k, ".safetensors") == 0) return false;
    }
    return !resolved && (is_dir(input_path) || is_index(input_path));
}

const char *cli_folder_input_dir(const char *input_path, bool resolved, char *buf, size_t size) {
    if (resolved) return NULL;
    if (is_dir(input_path)) {
        snprintf(buf, size, "%s", input_path);
        return buf;
    }
    if (!is_index(input_path)) return NULL;
    const char *slash = strrchr(input_path, '/');
    if (!slash)
        snprintf(buf, size, ".");
    else if (slash == input_path)
        snprintf(buf, size, "/");
    else
        snprintf(buf, size, "%.*s", (int)(slash - input_path), input_path);
    return buf;
}

bool cli_folder_output(const cli_args *a, bool resolved, const char *tag, char *buf, size_t size) {
    if (a->output) {
        if ((size_t)snprintf(buf, size, "%s", a->output) >= size) return false;
    } else {
        /* <dir>/<stem>-<tag>: the file-name rule with an extension dropped. */
        char in[4096];
        const char *dir = cli_folder_input_dir(a->input, resolved, in, sizeof in);
        if (!cli_default_output(dir ? dir : a->input, resolved, tag, "d", buf, size)) return false;
        buf[strlen(buf) - 2] = '\0';
    }
    for (size_t n = strlen(buf); n > 1 && buf[n - 1] == '/';) buf[--n] = '\0';
    return true;
}

bool cli_parse_shard_size(const char *s, uint64_t *out) {
    static const struct {
        const char *unit;
        double mul;
    } units[] = {
        {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
        {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
        {"b", 1.0},      {"", 1.0}};
    char *end;
    errno = 0;
    if (!*s || *s == '-' || *s == '+' || *s == ' ') return false;
    const double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0) return false;
    while (*end == ' ') end++;
    for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
        if (strcasecmp(end, units[i].unit) != 0) continue;
        /* int(float(value) * multiplier), as huggingface_hub computes it. */
        const double b = v * units[i].mul;
        if (b >= 18446744073709551616.0) return false;
        *out = (uint64_t)b;
        return true;
    }
    return false;
}

bool cli_parse_shard_range(const char *s, size_t *first, size_t *last) {
    char *end;
    errno = 0;
    if (*s < '1' || *s > '9') return false;
    const unsigned long long a = strtoull(s, &end, 10);
    unsigned long long b = a;
    if (*end == '-') {
        const char *t = end + 1;
        if (*t < '1' || *t > '9') return false;
        b = strtoull(t, &end, 10);
    }
    if (errno || *end || b < a || b > 99999) return false;
    *first = (size_t)a;
    *last = (size_t)b;
    return true;
}

const char *cli_folder_args(const cli_args *a, cli_folder_req *fr) {
    uint64_t size = CLI_SHARD_SIZE_DEFAULT;
    size_t first = 0, last = 0;
    if (a->shard_size && !cli_parse_shard_size(a->shard_size, &size))
        return "bad --shard-size (want bytes, or a size as 5GB or 500MB)";
    if (a->only_shards && !cli_parse_shard_range(a->only_shards, &first, &last))
        return "bad --only-shards (want K or K-L, shard numbers from 1)";
    if (a->resume && (a->only_shards || a->write_index))
        return "--resume continues a whole folder; --only-shards keeps the shards already there";
    if (fr) {
        fr->shard_size = size;
        fr->only_first = first;
        fr->only_last = last;
        fr->write_index = a->write_index;
        fr->resume = a->resume;
        fr->dedup_tied = a->dedup_tied;
    }
    return NULL;
}

/* ---- the shard plan ---- */

typedef struct fo_tensor {
    char *name;
    uint64_t nbytes;
    size_t shard;
} fo_tensor;

typedef struct fo_plan {
    fo_tensor *t;
    size_t n, cap;
    size_t *by_name; /* indices of t sorted by name */
    size_t n_shards;
    uint64_t total; /* sum of tensor bytes: the index's metadata.total_size */
    bool oom;
    char **names; /* every file of the folder, for the signal handler */
    size_t n_names;
    uint64_t digest;  /* FNV-1a of every output's name, dtype, shape and size */
    const char *drop; /* --dedup-tied: the output left out, or NULL */
} fo_plan;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void collect(void *user, const amn_out_tensor *t) {
    fo_plan *p = user;
    if (p->oom || (p->drop && strcmp(t->name, p->drop) == 0)) return;
    p->digest = fnv1a(p->digest, t->name, strlen(t->name) + 1);
    const uint64_t desc[3] = {(uint64_t)t->dtype, t->ndim, t->nbytes};
    p->digest = fnv1a(p->digest, desc, sizeof desc);
    p->digest = fnv1a(p->digest, t->shape, t->ndim * sizeof *t->shape);
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 256;
        fo_tensor *nt = realloc(p->t, cap * sizeof *nt);
        if (!nt) {
            p->oom = true;
            return;
        }
        p->t = nt;
        p->cap = cap;
    }
    p->t[p->n] = (fo_tensor){.name = strdup(t->name), .nbytes = t->nbytes};
    if (!p->t[p->n].name) p->oom = true;
    p->n++;
}

/* split_torch_state_dict_into_shards' rule; shards numbered as they close,
 * so a tensor over the limit comes before the shard it interrupts. */
static void assign_shards(fo_plan *p, uint64_t max) {
    size_t shards = 0, open_members = 0;
    uint64_t open_size = 0;
    size_t *open_idx = p->by_name; /* scratch: members of the open shard */
    for (size_t i = 0; i < p->n; i++) {
        const uint64_t sz = p->t[i].nbytes;
        p->total += sz;
        if (max == 0) {
            p->t[i].shard = 0;
            shards = 1;
            continue;
        }
        if (sz > max) {
            p->t[i].shard = shards++;
            continue;
        }
        if (open_size + sz > max) {
            for (size_t k = 0; k < open_members; k++) p->t[open_idx[k]].shard = shards;
            shards++;
            open_members = 0;
            open_size = 0;
        }
        open_idx[open_members++] = i;
        open_size += sz;
    }
    if (open_members) {
        for (size_t k = 0; k < open_members; k++) p->t[open_idx[k]].shard = shards;
        shards++;
    }
    p->n_shards = shards ? shards : 1;
}

static int cmp_by_name(const void *a, const void *b, void *user) {
    const fo_plan *p = user;
    return strcmp(p->t[*(const size_t *)a].name, p->t[*(const size_t *)b].name);
}

static void shard_name(const fo_plan *p, size_t k, char *buf, size_t size) {
    if (p->n_shards == 1)
        snprintf(buf, size, "model.safetensors");
    else
        snprintf(buf, size, "model-%05zu-of-%05zu.safetensors", k + 1, p->n_shards);
}

static int make_plan(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                     const cli_folder_req *rq, fo_plan *p, cli_folder_result *res, amn_error *err) {
    memset(p, 0, sizeof *p);
    p->digest = 0xcbf29ce484222325ull;
    if (rq->dedup_tied) {
        /* config.json of the input folder, or beside a single input file. */
        char dir[PATH_MAX];
        const char *slash = rq->in_path ? strrchr(rq->in_path, '/') : NULL;
        if (rq->in_dir)
            snprintf(dir, sizeof dir, "%s", rq->in_dir);
        else if (slash)
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - rq->in_path), rq->in_path);
        else
            snprintf(dir, sizeof dir, ".");
        if (cli_tied_embeddings(m, dir, res->tied, sizeof res->tied)) p->drop = CLI_TIED_HEAD;
    }
    int rc = amn_convert_outputs(ctx, m, ap, &rq->base, collect, p, err);
    if (rc) return rc;
    if (p->oom || !(p->by_name = malloc((p->n ? p->n : 1) * sizeof *p->by_name)))
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    assign_shards(p, rq->shard_size);
    for (size_t i = 0; i < p->n; i++) p->by_name[i] = i;
    qsort_r(p->by_name, p->n, sizeof *p->by_name, cmp_by_name, p);
    return AMN_OK;
}

static void free_plan(fo_plan *p) {
    for (size_t i = 0; i < p->n; i++) free(p->t[i].name);
    for (size_t i = 0; i < p->n_names; i++) free(p->names[i]);
    free(p->t), free(p->by_name), free(p->names);
}

static const fo_tensor *find(const fo_plan *p, const char *name) {
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, p->t[p->by_name[mid]].name);
        if (c == 0) return &p->t[p->by_name[mid]];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

typedef struct shard_sel {
    const fo_plan *p;
    size_t shard;
} shard_sel;

static bool in_shard(void *user, const char *name) {
    const shard_sel *s = user;
    const fo_tensor *t = find(s->p, name);
    return t && t->shard == s->shard;
}

/* ---- the temporary folder, and what a signal removes ---- */

static char tmp_dir[PATH_MAX];
static char *const *tmp_names;
static volatile size_t tmp_n_names;
static volatile sig_atomic_t tmp_active;

void cli_folder_on_signal(void) {
    if (!tmp_active) return;
    char path[PATH_MAX + 256];
    const size_t dl = strlen(tmp_dir);
    for (size_t i = 0; i < tmp_n_names; i++) {
        const size_t nl = strlen(tmp_names[i]);
        if (dl + 1 + nl >= sizeof path) continue;
        memcpy(path, tmp_dir, dl);
        path[dl] = '/';
        memcpy(path + dl + 1, tmp_names[i], nl + 1);
        unlink(path);
    }
    rmdir(tmp_dir);
    tmp_active = 0;
}

/* Every name the folder may hold: shards, index, config.json, the copies. */
static int list_names(const fo_plan *pc, const cli_folder_req *rq, amn_error *err) {
    fo_plan *p = (fo_plan *)pc;
    size_t cap = p->n_shards + 4;
    char **names = calloc(cap, sizeof *names);
    if (!names) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    size_t n = 0;
    for (size_t k = 0; k < p->n_shards; k++) {
        char b[64];
        shard_name(p, k, b, sizeof b);
        names[n++] = strdup(b);
    }
    names[n++] = strdup(INDEX_NAME);
    names[n++] = strdup("config.json");
    names[n++] = strdup(CLI_MANIFEST_NAME);
    names[n++] = strdup(CLI_MANIFEST_NAME ".tmp");
    p->names = names;
    p->n_names = n;
    for (size_t i = 0; i < n; i++)
        if (!names[i]) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (rq->in_dir) {
        /* The copies: listed by the same rule folder_files.c applies, so
         * the directory is read here once more. */
        DIR *d = opendir(rq->in_dir);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char **nn = realloc(p->names, (p->n_names + 1) * sizeof *nn);
            if (!nn) {
                closedir(d);
                return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            }
            p->names = nn;
            if (!(nn[p->n_names] = strdup(e->d_name))) {
                closedir(d);
                return amn_error_set(err, AMN_E_NOMEM, "out of memory");
            }
            p->n_names++;
        }
        if (d) closedir(d);
    }
    return AMN_OK;
}

void cli_split_path(const char *path, char *dir, size_t dsize, const char **base) {
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dir, dsize, ".");
    else if (slash == path)
        snprintf(dir, dsize, "/");
    else
        snprintf(dir, dsize, "%.*s", (int)(slash - path), path);
    *base = slash ? slash + 1 : path;
}

int cli_sync_dir(const char *dir, amn_error *err) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", dir, strerror(errno));
    int rc = fsync(fd) != 0 ? amn_error_set(err, AMN_E_IO, "%s: fsync: %s", dir, strerror(errno))
                            : AMN_OK;
    close(fd);
    return rc;
}

/* Refuse a target that exists (without --force) or that holds the input. */
static int check_target(const cli_folder_req *rq, const amn_model *m, amn_error *err) {
    struct stat st;
    if (lstat(rq->out_dir, &st) != 0) return AMN_OK;
    const bool scale_out = rq->only_first || rq->write_index;
    if (scale_out && !S_ISDIR(st.st_mode))
        return amn_error_set(err, AMN_E_INVALID, "output %s exists and is not a folder",
                             rq->out_dir);
    if (!rq->base.overwrite && !scale_out)
        return amn_error_set(err, AMN_E_INVALID,
                             "output %s already exists; pass --force to overwrite it", rq->out_dir);
    char out[PATH_MAX], in[PATH_MAX];
    const char *src = rq->in_dir ? rq->in_dir : amn_model_path(m);
    if (src && realpath(rq->out_dir, out) && realpath(src, in)) {
        const size_t n = strlen(out);
        if (strcmp(out, in) == 0 ||
            (strncmp(out, in, n) == 0 && (in[n] == '/' || strcmp(out, "/") == 0)))
            return amn_error_set(err, AMN_E_INVALID, "output %s would replace the input %s",
                                 rq->out_dir, src);
    }
    return AMN_OK;
}

/* mkdir's 0777, so that the umask applies as to any new folder (mkdtemp's
 * 0700 would stay on the result). */
int cli_make_tmp_dir(const char *target, char *dir, size_t size, amn_error *err) {
    char parent[PATH_MAX];
    const char *base;
    cli_split_path(target, parent, sizeof parent, &base);
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned char r[6];
        if (getentropy(r, sizeof r) != 0)
            return amn_error_set(err, AMN_E_IO, "getentropy: %s", strerror(errno));
        char sfx[7];
        for (int i = 0; i < 6; i++) sfx[i] = digits[r[i] % 36];
        sfx[6] = '\0';
        if ((size_t)snprintf(dir, size, "%s/.%s.amn-%s", parent, base, sfx) >= size)
            return amn_error_set(err, AMN_E_INVALID, "%s: path too long", target);
        if (mkdir(dir, 0777) == 0) return AMN_OK;
        if (errno != EEXIST) break;
    }
    return amn_error_set(err, AMN_E_IO, "%s: cannot create a folder: %s", parent, strerror(errno));
}

static int make_tmp(const cli_folder_req *rq, amn_error *err) {
    return cli_make_tmp_dir(rq->out_dir, tmp_dir, sizeof tmp_dir, err);
}

/* The whole job's progress: each shard's report offset by the shards before. */
typedef struct job_progress {
    const cli_folder_req *rq;
    uint64_t bytes_before, bytes_total;
    size_t tensors_before, tensor_count;
} job_progress;

static void shard_progress(void *user, const amn_progress *info) {
    job_progress *j = user;
    amn_progress q = *info;
    q.bytes_done += j->bytes_before;
    q.tensor_index += j->tensors_before;
    q.tensor_count = j->tensor_count;
    q.bytes_total = j->bytes_total > q.bytes_done ? j->bytes_total : q.bytes_done;
    if (q.tensor_name == NULL && q.tensor_index != q.tensor_count)
        q.tensor_name = ""; /* a shard's end is not the job's */
    j->rq->progress(j->rq->progress_user, &q);
}

static void add_stats(amn_convert_stats *sum, const amn_convert_stats *s) {
    sum->tensors_written += s->tensors_written;
    sum->dequantized += s->dequantized;
    sum->cast += s->cast;
    sum->dropped = s->dropped; /* counted over the whole model each time */
    sum->bytes_written += s->bytes_written;
    sum->encoded += s->encoded;
    sum->abs_err_sum += s->abs_err_sum;
    sum->abs_err_values += s->abs_err_values;
}

static bool no_tensor(void *user, const char *name) {
    (void)user, (void)name;
    return false;
}

/* Shards [first, last) into dir; first == last: a conversion of nothing
 * into a scratch file of dir, for the encoder's quantization_config. */
/* A shard's tensors and bytes, for the progress of a shard kept by --resume. */
static void shard_totals(const fo_plan *p, size_t k, size_t *tensors, uint64_t *bytes) {
    *tensors = 0;
    *bytes = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->t[i].shard == k) (*tensors)++, *bytes += p->t[i].nbytes;
}

static bool in_manifest(const cli_manifest *mf, const char *name) {
    for (size_t i = 0; mf && i < mf->n; i++)
        if (strcmp(mf->shards[i].name, name) == 0) return true;
    return false;
}

/* AMN_TEST_FOLDER_KILL_AFTER=N (tests only): SIGKILL after the N-th shard
 * of the temporary folder is complete and in the manifest; past the last
 * shard, just before the rename. Stands for a crash or an OOM kill (or,
 * with AMN_TEST_FOLDER_KILL_SIGNAL, a Ctrl-C). */
static size_t kill_after(void) {
    const char *v = getenv("AMN_TEST_FOLDER_KILL_AFTER");
    return v && *v ? (size_t)strtoull(v, NULL, 10) : 0;
}

/* The signal the hook raises: AMN_TEST_FOLDER_KILL_SIGNAL (a number, e.g. 2
 * for SIGINT, which the CLI handles), else SIGKILL. */
static void test_kill(void) {
    const char *v = getenv("AMN_TEST_FOLDER_KILL_SIGNAL");
    const int sig = v && *v ? atoi(v) : SIGKILL;
    raise(sig > 0 && sig < 32 ? sig : SIGKILL);
}

/* After a shard is complete: its size and XXH64 into the manifest. */
static int record_shard(const cli_folder_req *rq, cli_manifest *mf, const char *name,
                        const char *path, amn_error *err) {
    uint64_t size, hash;
    int rc = cli_file_hash(path, &size, &hash, err);
    if (!rc) rc = cli_manifest_add(mf, name, size, hash, err);
    if (!rc) rc = cli_manifest_write(tmp_dir, mf, !rq->base.no_sync, err);
    return rc;
}

static int write_shards(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                        const cli_folder_req *rq, const fo_plan *p, size_t first, size_t last,
                        const char *dir, char **qc, cli_manifest *mf, cli_folder_result *res,
                        amn_error *err) {
    job_progress jp = {.rq = rq, .bytes_total = p->total, .tensor_count = p->n};
    const bool scratch = first == last;
    const size_t kill = mf ? kill_after() : 0;
    if (scratch) last = first + 1;
    for (size_t k = first; k < last; k++) {
        char name[64], path[PATH_MAX + 64];
        shard_name(p, k, name, sizeof name);
        if (!scratch && in_manifest(mf, name)) { /* kept from the interrupted run */
            size_t tensors;
            uint64_t bytes;
            shard_totals(p, k, &tensors, &bytes);
            jp.bytes_before += bytes;
            jp.tensors_before += tensors;
            res->resumed++;
            continue;
        }
        if (scratch) snprintf(name, sizeof name, ".quantization_config.safetensors");
        snprintf(path, sizeof path, "%s/%s", dir, name);
        shard_sel sel = {p, k};
        amn_convert_options o = rq->base;
        o.output = path;
        o.overwrite = dir == tmp_dir ? false : rq->base.overwrite;
        o.select = scratch ? no_tensor : in_shard;
        o.select_user = &sel;
        o.progress = rq->progress ? shard_progress : NULL;
        o.progress_user = &jp;
        free(*qc);
        *qc = NULL;
        o.quant_config = rq->forget ? qc : NULL;
        amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
        int rc = amn_convert(ctx, m, ap, &o, &st, err);
        if (rc) return rc;
        if (scratch) {
            unlink(path);
            return AMN_OK;
        }
        add_stats(&res->st, &st);
        /* Each shard counts the sources it did not encode as passed through. */
        if (rq->base.encode) {
            const size_t sources = st.encode_passed + st.encoded;
            res->st.encode_passed = sources > res->st.encoded ? sources - res->st.encoded : 0;
        }
        jp.bytes_before += st.bytes_written;
        jp.tensors_before += st.tensors_written;
        res->shards++;
        if (mf && (rc = record_shard(rq, mf, name, path, err))) return rc;
        if (kill && res->shards + res->resumed == kill) test_kill();
    }
    return AMN_OK;
}

/* JSON string as Python's json.dumps writes it (ensure_ascii). */
static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c;) {
        uint32_t cp = *c;
        size_t len = 1;
        if (cp >= 0x80) {
            const size_t need = cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : cp >= 0xC0 ? 2 : 0;
            cp = need == 4 ? cp & 7 : need == 3 ? cp & 15 : cp & 31;
            len = need;
            for (size_t k = 1; k < need; k++) {
                if ((c[k] & 0xC0) != 0x80) {
                    len = 0;
                    break;
                }
                cp = cp << 6 | (c[k] & 63);
            }
            if (!len) cp = 0xFFFD, len = 1;
        }
        c += len;
        if (cp == '"' || cp == '\\')
            fprintf(f, "\\%c", (char)cp);
        else if (cp == '\n')
            fputs("\\n", f);
        else if (cp == '\r')
            fputs("\\r", f);
        else if (cp == '\t')
            fputs("\\t", f);
        else if (cp == '\b')
            fputs("\\b", f);
        else if (cp == '\f')
            fputs("\\f", f);
        else if (cp >= 0x20 && cp < 0x7f)
            fputc((int)cp, f);
        else if (cp < 0x10000)
            fprintf(f, "\\u%04x", cp);
        else
            fprintf(f, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10),
                    0xDC00 + ((cp - 0x10000) & 0x3FF));
    }
    fputc('"', f);
}

/* model.safetensors.index.json as save_pretrained writes it:
 * json.dumps(index, indent=2, sort_keys=True) + "\n". */
static int write_index(const fo_plan *p, bool sync, amn_error *err) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, INDEX_NAME);
    FILE *f = fopen(path, "wx");
    if (!f) return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {",
            (unsigned long long)p->total);
    for (size_t i = 0; i < p->n; i++) {
        const fo_tensor *t = &p->t[p->by_name[i]];
        char name[64];
        shard_name(p, t->shard, name, sizeof name);
        fputs(i ? ",\n    " : "\n    ", f);
        put_json_string(f, t->name);
        fprintf(f, ": \"%s\"", name);
    }
    fputs(p->n ? "\n  }\n}\n" : "}\n}\n", f);
    int rc = AMN_OK;
    if (fflush(f) != 0 || ferror(f) || (sync && fsync(fileno(f)) != 0))
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    return rc;
}

static int write_others(const cli_folder_req *rq, const char *qc, cli_folder_result *res,
                        amn_error *err) {
    if (rq->side_files) return cli_folder_side_files(tmp_dir, qc, !rq->base.no_sync, res, err);
    if (!rq->in_dir) return AMN_OK;
    const bool sync = !rq->base.no_sync;
    char src[PATH_MAX + 16], dst[PATH_MAX + 16];
    snprintf(src, sizeof src, "%s/config.json", rq->in_dir);
    snprintf(dst, sizeof dst, "%s/config.json", tmp_dir);
    struct stat st;
    if (stat(src, &st) == 0) {
        int rc = cli_config_rewrite(src, dst, rq->forget ? qc : NULL, rq->torch_dtype,
                                    rq->drop_quant, sync, err);
        if (rc) return rc;
        res->config = true;
    }
    return cli_folder_copy_files(rq->in_dir, tmp_dir, rq->drop_quant, sync, &res->copied, err);
}

/* The temporary folder takes the target's name: exchanged with an existing
 * target (then removed), else renamed. */
static int put_in_place(const cli_folder_req *rq, amn_error *err) {
    char parent[PATH_MAX];
    const char *base;
    cli_split_path(rq->out_dir, parent, sizeof parent, &base);
    struct stat st;
    int rc = AMN_OK;
    if (!rq->base.no_sync && (rc = cli_sync_dir(tmp_dir, err))) return rc;
    if (lstat(rq->out_dir, &st) == 0) {
        if (renameat2(AT_FDCWD, tmp_dir, AT_FDCWD, rq->out_dir, RENAME_EXCHANGE) != 0)
            return amn_error_set(err, AMN_E_IO, "%s: rename: %s", rq->out_dir, strerror(errno));
        /* tmp_dir now holds the old target. */
        tmp_active = 0;
        amn_kit_remove_tree(tmp_dir);
    } else {
        if (rename(tmp_dir, rq->out_dir) != 0)
            return amn_error_set(err, AMN_E_IO, "%s: rename: %s", rq->out_dir, strerror(errno));
        tmp_active = 0;
    }
    return rq->base.no_sync ? AMN_OK : cli_sync_dir(parent, err);
}

/* Scale-out: every file of the temporary folder moved into the target,
 * an existing one kept unless --force. */
static int move_into(const cli_folder_req *rq, amn_error *err) {
    DIR *d = opendir(tmp_dir);
    if (!d) return amn_error_set(err, AMN_E_IO, "%s: %s", tmp_dir, strerror(errno));
    int rc = AMN_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char from[PATH_MAX + 256], to[PATH_MAX + 256];
        snprintf(from, sizeof from, "%s/%s", tmp_dir, e->d_name);
        snprintf(to, sizeof to, "%s/%s", rq->out_dir, e->d_name);
        if (renameat2(AT_FDCWD, from, AT_FDCWD, to, rq->base.overwrite ? 0 : RENAME_NOREPLACE))
            rc = errno == EEXIST
                     ? amn_error_set(err, AMN_E_INVALID,
                                     "output %s already exists; pass --force to "
                                     "overwrite it",
                                     to)
                     : amn_error_set(err, AMN_E_IO, "%s: rename: %s", to, strerror(errno));
    }
    closedir(d);
    return rc;
}

/* --only-shards / --write-index: straight into the (shared) target. */
static int run_scale_out(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                         const cli_folder_req *rq, fo_plan *p, cli_folder_result *res,
                         amn_error *err) {
    if (rq->only_last > p->n_shards)
        return amn_error_set(err, AMN_E_INVALID,
                             "--only-shards %zu-%zu: the output has %zu shard%s", rq->only_first,
                             rq->only_last, p->n_shards, p->n_shards == 1 ? "" : "s");
    if (mkdir(rq->out_dir, 0777) != 0 && errno != EEXIST)
        return amn_error_set(err, AMN_E_IO, "%s: %s", rq->out_dir, strerror(errno));
    int rc = AMN_OK;
    char *qc = NULL;
    if (rq->only_first)
        rc = write_shards(ctx, m, ap, rq, p, rq->only_first - 1, rq->only_last, rq->out_dir, &qc,
                          NULL, res, err);
    if (!rc && rq->write_index && !(rc = make_tmp(rq, err))) {
        tmp_names = p->names;
        tmp_n_names = p->n_names;
        tmp_active = 1;
        if (rq->forget && !qc)
            rc = write_shards(ctx, m, ap, rq, p, 0, 0, tmp_dir, &qc, NULL, res, err);
        if (!rc && p->n_shards > 1) rc = write_index(p, !rq->base.no_sync, err);
        if (!rc) rc = write_others(rq, qc, res, err);
        if (!rc) rc = move_into(rq, err);
        tmp_active = 0;
        amn_kit_remove_tree(tmp_dir);
        tmp_names = NULL;
        tmp_n_names = 0;
    }
    if (!rc && !rq->base.no_sync) rc = cli_sync_dir(rq->out_dir, err);
    free(qc);
    return rc;
}

/* Every file of an adopted temporary folder but the manifest and the shards
 * it verifies goes: a partial shard, the index, config.json, the copies. */
static int adopt(const fo_plan *p, cli_manifest *mf, amn_error *err) {
    cli_manifest kept = {.identity = mf->identity};
    int rc = AMN_OK;
    for (size_t k = 0; k < p->n_shards && !rc; k++) {
        char name[64];
        shard_name(p, k, name, sizeof name);
        for (size_t i = 0; i < mf->n; i++)
            if (strcmp(mf->shards[i].name, name) == 0 && cli_manifest_shard_ok(mf, tmp_dir, name))
                rc = cli_manifest_add(&kept, name, mf->shards[i].size, mf->shards[i].xxh64, err);
    }
    DIR *d = rc ? NULL : opendir(tmp_dir);
    if (!rc && !d) rc = amn_error_set(err, AMN_E_IO, "%s: %s", tmp_dir, strerror(errno));
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
            !strcmp(e->d_name, CLI_MANIFEST_NAME) || in_manifest(&kept, e->d_name))
            continue;
        char path[PATH_MAX + 256];
        snprintf(path, sizeof path, "%s/%s", tmp_dir, e->d_name);
        if (unlink(path) != 0) amn_kit_remove_tree(path);
    }
    if (d) closedir(d);
    free(mf->shards);
    mf->shards = kept.shards;
    mf->n = kept.n;
    return rc;
}

/* The temporary folder of this run: with --resume a matching leftover
 * (adopted, its verified shards kept), else a new one; locked, with its
 * manifest written before any shard. */
static int open_tmp(const cli_folder_req *rq, const fo_plan *p, cli_manifest *mf, int *lock_fd,
                    amn_error *err) {
    char parent[PATH_MAX];
    const char *base;
    cli_split_path(rq->out_dir, parent, sizeof parent, &base);
    char *identity = cli_resume_identity(rq, p->digest);
    if (!identity) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (cli_resume_find(parent, base, identity, rq->resume, tmp_dir, sizeof tmp_dir, lock_fd, mf)) {
        free(identity);
        return adopt(p, mf, err);
    }
    if (rq->resume)
        fprintf(stderr, "amn: note: no interrupted conversion of %s to resume; starting it\n",
                rq->out_dir);
    mf->identity = identity;
    int rc = make_tmp(rq, err);
    if (!rc && (*lock_fd = cli_dir_lock(tmp_dir)) < 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: cannot lock it: %s", tmp_dir, strerror(errno));
    if (!rc) rc = cli_manifest_write(tmp_dir, mf, !rq->base.no_sync, err);
    if (rc && tmp_dir[0]) rmdir(tmp_dir);
    return rc;
}

int cli_folder_run(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                   const cli_folder_req *rq, cli_folder_result *res, amn_error *err) {
    memset(res, 0, sizeof *res);
    fo_plan p = {0};
    char *qc = NULL;
    int rc = check_target(rq, m, err);
    if (!rc) rc = make_plan(ctx, m, ap, rq, &p, res, err);
    if (!rc) rc = list_names(&p, rq, err);
    res->total_shards = p.n_shards;
    if (!rc && (rq->only_first || rq->write_index)) {
        rc = run_scale_out(ctx, m, ap, rq, &p, res, err);
        free_plan(&p);
        return rc;
    }
    cli_manifest mf = {0};
    int lock_fd = -1;
    tmp_dir[0] = '\0';
    /* A signal between the temporary folder's mkdir and tmp_active would
     * leave the folder behind: held until the handler can remove it. */
    sigset_t held, old;
    sigemptyset(&held);
    sigaddset(&held, SIGINT), sigaddset(&held, SIGTERM), sigaddset(&held, SIGHUP);
    sigaddset(&held, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &held, &old);
    if (!rc) rc = open_tmp(rq, &p, &mf, &lock_fd, err);
    if (!rc) {
        tmp_names = p.names;
        tmp_n_names = p.n_names;
        /* With --resume a signal leaves the folder for the next run. */
        tmp_active = !rq->resume;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!rc) {
        rc = write_shards(ctx, m, ap, rq, &p, 0, p.n_shards, tmp_dir, &qc, &mf, res, err);
        if (!rc && rq->forget && !qc) /* every shard kept: the config from a scratch run */
            rc = write_shards(ctx, m, ap, rq, &p, 0, 0, tmp_dir, &qc, NULL, res, err);
        if (!rc && p.n_shards > 1) rc = write_index(&p, !rq->base.no_sync, err);
        if (!rc) rc = write_others(rq, qc, res, err);
        if (!rc && kill_after() > p.n_shards) test_kill();
        if (!rc) {
            char path[PATH_MAX + 64];
            snprintf(path, sizeof path, "%s/%s", tmp_dir, CLI_MANIFEST_NAME);
            unlink(path);
            rc = put_in_place(rq, err);
        }
        if (rc && rq->resume) {
            tmp_active = 0;
            fprintf(stderr, "amn: note: %s kept; run the same command again to resume\n", tmp_dir);
        } else if (rc && tmp_active) {
            tmp_active = 0;
            amn_kit_remove_tree(tmp_dir);
        }
        tmp_names = NULL;
        tmp_n_names = 0;
    }
    if (lock_fd >= 0) close(lock_fd);
    cli_manifest_free(&mf);
    free(qc);
    free_plan(&p);
    return rc;
}
