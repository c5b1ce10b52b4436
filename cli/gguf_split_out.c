/* Split GGUF out: `forget IN --to TYPE --keep-split` (one output shard per
 * input shard, as llama-quantize --keep-split) and `convert IN --to gguf
 * --split-max-tensors N | --split-max-size SIZE` (as llama-gguf-split
 * --split). Each shard is one amn_convert of the tensors it holds, the gguf
 * writer's split=NO/COUNT/TENSORS option giving its split.* keys; all of
 * them are written into a temporary folder beside the target, then renamed
 * into place: the shards after the first, last to first, then the first, so
 * that shard 1 (the file a reader opens) appears once every other shard is
 * there. A failure or a signal before the renames leaves nothing; a rename
 * failing midway (the disk or a permission) leaves the shards renamed so far,
 * and says so. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "folder.h"
#include "gguf_split.h"

/* ---- the shard plan ---- */

typedef struct gs_plan {
    char **names; /* outputs, in the model's order */
    uint64_t *bytes;
    uint32_t *shard;
    size_t n, cap;
    uint32_t n_shards;
    bool oom;
} gs_plan;

static void collect(void *user, const amn_out_tensor *t) {
    gs_plan *p = user;
    if (p->oom) return;
    if (p->n == p->cap) {
        const size_t cap = p->cap ? p->cap * 2 : 256;
        char **nn = realloc(p->names, cap * sizeof *nn);
        if (nn) p->names = nn;
        uint64_t *nb = realloc(p->bytes, cap * sizeof *nb);
        if (nb) p->bytes = nb;
        uint32_t *ns = realloc(p->shard, cap * sizeof *ns);
        if (ns) p->shard = ns;
        if (!nn || !nb || !ns) {
            p->oom = true;
            return;
        }
        p->cap = cap;
    }
    p->bytes[p->n] = t->nbytes;
    p->shard[p->n] = 0;
    if (!(p->names[p->n] = strdup(t->name))) {
        p->oom = true;
        return;
    }
    p->n++;
}

static void free_plan(gs_plan *p) {
    for (size_t i = 0; i < p->n; i++) free(p->names[i]);
    free(p->names), free(p->bytes), free(p->shard);
}

/* --keep-split: each output in its input tensor's shard (llama-quantize's
 * weight.idx), the shard count the highest used + 1. */
static int by_input_shard(const amn_model *m, gs_plan *p, amn_error *err) {
    uint32_t top = 0;
    for (size_t i = 0; i < p->n; i++) {
        const int64_t at = amn_model_find(m, p->names[i]);
        if (at < 0)
            return amn_error_set(err, AMN_E_INVALID,
                                 "--keep-split: output %s is no input tensor (renamed by "
                                 "--prune-layers?); its shard is unknown",
                                 p->names[i]);
        const amn_tensor *t = amn_model_tensor(m, (size_t)at);
        p->shard[i] = AMN_HAS_FIELD(t, amn_tensor, shard) ? t->shard : 0;
        if (p->shard[i] > top) top = p->shard[i];
    }
    p->n_shards = top + 1;
    bool *used = calloc(p->n_shards, sizeof *used);
    if (!used) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < p->n; i++) used[p->shard[i]] = true;
    int rc = AMN_OK;
    for (uint32_t k = 0; k < p->n_shards && !rc; k++)
        if (!used[k])
            rc = amn_error_set(err, AMN_E_INVALID,
                               "--keep-split: output shard %u would hold no tensor", k + 1);
    free(used);
    return rc;
}

/* llama-gguf-split's split_strategy: a new shard every max_tensors tensors,
 * or when the shard's tensors (each padded to 32 bytes) would pass
 * max_bytes; an empty shard (the first tensor alone over the size) is its
 * error. */
static int by_limit(gs_plan *p, uint64_t max_tensors, uint64_t max_bytes, amn_error *err) {
    uint32_t k = 0;
    uint64_t size = 0;
    for (size_t i = 0; i < p->n; i++) {
        const uint64_t padded = (p->bytes[i] + 31) / 32 * 32;
        bool split;
        if (max_bytes) {
            split = size + padded > max_bytes;
            if (split && i == 0)
                return amn_error_set(err, AMN_E_INVALID,
                                     "--split-max-size: tensor %s alone is over the size, so the "
                                     "first shard would hold no tensor",
                                     p->names[i]);
        } else {
            split = i > 0 && i % max_tensors == 0;
        }
        if (split) {
            if (k == UINT16_MAX - 1)
                return amn_error_set(err, AMN_E_LIMIT, "more than 65535 shards");
            k++;
            size = padded;
        } else {
            size += padded;
        }
        p->shard[i] = k;
    }
    p->n_shards = k + 1;
    return AMN_OK;
}

typedef struct shard_sel {
    const gs_plan *p;
    uint32_t shard;
    size_t from; /* outputs come in order: the search starts where the last ended */
} shard_sel;

static bool in_shard(void *user, const char *name) {
    shard_sel *s = user;
    for (size_t k = 0; k < s->p->n; k++) {
        const size_t i = (s->from + k) % s->p->n;
        if (strcmp(s->p->names[i], name) == 0) {
            s->from = i + 1;
            return s->p->shard[i] == s->shard;
        }
    }
    return false;
}

/* ---- names ---- */

/* OUT's prefix: without -0000K-of-0000N.gguf, else without .gguf (as
 * llama-quantize --keep-split strips it). */
bool cli_gguf_split_prefix(const char *out, char *buf, size_t size) {
    size_t n = strlen(out);
    unsigned a, b;
    char tail[32];
    if (n > 20 && sscanf(out + n - 20, "-%5u-of-%5u.gguf", &a, &b) == 2) {
        snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", a, b);
        if (strcmp(out + n - 20, tail) == 0) n -= 20;
    } else if (n > 5 && strcmp(out + n - 5, ".gguf") == 0) {
        n -= 5;
    }
    if (n == 0 || n >= size) return false;
    memcpy(buf, out, n);
    buf[n] = '\0';
    return true;
}

static void shard_path(const char *prefix, uint32_t k, uint32_t n, char *buf, size_t size) {
    snprintf(buf, size, "%s-%05u-of-%05u.gguf", prefix, k + 1, n);
}

/* ---- the temporary folder, and what a signal removes ---- */

static char tmp_dir[PATH_MAX];
static char **tmp_names; /* full paths of the shards in tmp_dir */
static volatile size_t tmp_n;
static volatile sig_atomic_t tmp_active;

void cli_gguf_split_on_signal(void) {
    if (!tmp_active) return;
    for (size_t i = 0; i < tmp_n; i++)
        if (tmp_names[i]) unlink(tmp_names[i]);
    rmdir(tmp_dir);
}

static void remove_tmp(void) {
    tmp_active = 0;
    for (size_t i = 0; i < tmp_n; i++)
        if (tmp_names[i]) unlink(tmp_names[i]);
    rmdir(tmp_dir);
}

/* Every target free (or --force), and none of them an input file. */
static int check_targets(const amn_model *m, const char *prefix, uint32_t n, bool force,
                         amn_error *err) {
    char path[PATH_MAX + 32];
    for (uint32_t k = 0; k < n; k++) {
        shard_path(prefix, k, n, path, sizeof path);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (!force)
            return amn_error_set(err, AMN_E_INVALID,
                                 "output %s already exists; pass --force to overwrite it", path);
        /* An input shard has the name of one: the given file or its siblings. */
        const char *in = amn_model_path(m);
        struct stat si;
        char in_prefix[PATH_MAX];
        const amn_kv *kv = amn_model_find_kv(m, "split.count");
        uint16_t count = 1;
        if (kv && kv->type == AMN_KV_U16) memcpy(&count, kv->data, 2);
        for (uint32_t j = 0; in && j < count; j++) {
            char ip[PATH_MAX + 32];
            if (count > 1 && cli_gguf_split_prefix(in, in_prefix, sizeof in_prefix))
                shard_path(in_prefix, j, count, ip, sizeof ip);
            else
                snprintf(ip, sizeof ip, "%s", in);
            if (stat(ip, &si) == 0 && stat(path, &st) == 0 && si.st_dev == st.st_dev &&
                si.st_ino == st.st_ino)
                return amn_error_set(err, AMN_E_INVALID, "output %s would replace the input %s",
                                     path, ip);
        }
    }
    return AMN_OK;
}

static void add_stats(amn_convert_stats *sum, const amn_convert_stats *s) {
    sum->tensors_written += s->tensors_written;
    sum->dequantized += s->dequantized;
    sum->cast += s->cast;
    sum->dropped += s->dropped;
    sum->bytes_written += s->bytes_written;
    sum->encoded += s->encoded;
    sum->abs_err_sum += s->abs_err_sum;
    sum->abs_err_values += s->abs_err_values;
}

/* Shard k of p into tmp_names[k], with its split option added. */
static int write_shard(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                       const cli_gguf_split_req *rq, const gs_plan *p, uint32_t k,
                       amn_convert_stats *sum, amn_error *err) {
    const char **opts = malloc((rq->base.n_options + 1) * sizeof *opts);
    if (!opts) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < rq->base.n_options; i++) opts[i] = rq->base.options[i];
    char split[64];
    snprintf(split, sizeof split, "split=%u/%u/%zu", k, p->n_shards, p->n);
    opts[rq->base.n_options] = split;
    shard_sel sel = {.p = p, .shard = k};
    amn_convert_options o = rq->base;
    o.output = tmp_names[k];
    o.overwrite = false;
    o.options = opts;
    o.n_options = rq->base.n_options + 1;
    o.select = in_shard;
    o.select_user = &sel;
    amn_convert_stats st = {.struct_size = sizeof st};
    int rc = amn_convert(ctx, m, ap, &o, &st, err);
    free(opts);
    if (rc) return rc;
    add_stats(sum, &st);
    /* Every shard counts the sources it did not encode as passed through. */
    if (rq->base.encode) {
        const size_t sources = st.encode_passed + st.encoded;
        sum->encode_passed = sources > sum->encoded ? sources - sum->encoded : 0;
    }
    return AMN_OK;
}

/* The shards after the first, last to first, then the first. */
static int put_in_place(const char *prefix, uint32_t n, bool sync, amn_error *err) {
    char path[PATH_MAX + 32], parent[PATH_MAX];
    for (uint32_t k = n; k-- > 0;) {
        shard_path(prefix, k, n, path, sizeof path);
        if (rename(tmp_names[k], path) != 0) {
            const int e = errno;
            if (k + 1 == n)
                return amn_error_set(err, AMN_E_IO, "%s: rename: %s", path, strerror(e));
            return amn_error_set(err, AMN_E_IO,
                                 "%s: rename: %s (shards %u to %u are in place already, shard 1 "
                                 "is not: remove them or run again with --force)",
                                 path, strerror(e), k + 2, n);
        }
    }
    const char *base;
    cli_split_path(prefix, parent, sizeof parent, &base);
    return sync ? cli_sync_dir(parent, err) : AMN_OK;
}

int cli_gguf_split_run(const amn_ctx *ctx, const amn_model *m, const amn_plan *ap,
                       const cli_gguf_split_req *rq, cli_gguf_split_result *res, amn_error *err) {
    memset(res, 0, sizeof *res);
    res->st.struct_size = sizeof res->st;
    gs_plan p = {0};
    amn_convert_options probe = rq->base;
    probe.output = NULL;
    int rc = amn_convert_outputs(ctx, m, ap, &probe, collect, &p, err);
    if (!rc && p.oom) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc && p.n > INT32_MAX) rc = amn_error_set(err, AMN_E_LIMIT, "too many tensors to split");
    if (!rc)
        rc = rq->keep_split ? by_input_shard(m, &p, err)
                            : by_limit(&p, rq->max_tensors, rq->max_bytes, err);
    if (!rc && p.n_shards > 99999)
        rc = amn_error_set(err, AMN_E_LIMIT, "%u shards: more than names hold", p.n_shards);
    if (!rc) rc = check_targets(m, rq->prefix, p.n_shards, rq->base.overwrite, err);
    res->shards = p.n_shards;
    if (!rc && !(tmp_names = calloc(p.n_shards, sizeof *tmp_names)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc) rc = cli_make_tmp_dir(rq->prefix, tmp_dir, sizeof tmp_dir, err);
    if (!rc) {
        for (uint32_t k = 0; !rc && k < p.n_shards; k++) {
            char name[PATH_MAX + 32], path[2 * PATH_MAX + 40];
            char parent[PATH_MAX];
            const char *base;
            cli_split_path(rq->prefix, parent, sizeof parent, &base);
            shard_path(base, k, p.n_shards, name, sizeof name);
            snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
            if (!(tmp_names[k] = strdup(path)))
                rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        }
        tmp_n = p.n_shards;
        tmp_active = 1;
        for (uint32_t k = 0; !rc && k < p.n_shards; k++)
            rc = write_shard(ctx, m, ap, rq, &p, k, &res->st, err);
        if (!rc) rc = put_in_place(rq->prefix, p.n_shards, !rq->base.no_sync, err);
        remove_tmp();
    }
    for (size_t k = 0; tmp_names && k < tmp_n; k++) free(tmp_names[k]);
    tmp_n = 0;
    free(tmp_names);
    tmp_names = NULL;
    free_plan(&p);
    return rc;
}

bool cli_gguf_split_size(const char *s, uint64_t *out) {
    const size_t n = strlen(s);
    if (n < 2 || (s[n - 1] != 'M' && s[n - 1] != 'G') || s[0] < '1' || s[0] > '9') return false;
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (errno || end != s + n - 1 || v > INT32_MAX) return false;
    *out = (uint64_t)v * (s[n - 1] == 'M' ? 1000000ull : 1000000000ull);
    return true;
}
