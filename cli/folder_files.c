/* The files of a model folder besides its weights: config.json edited for
 * the result (shared with `forget`'s single-file output), the others copied
 * byte for byte, and removal of a replaced folder. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amn/kit/json_file.h"
#include "folder.h"

#define CONFIG_MAX (4u << 20) /* a config.json is a few KB; refuse anything huge */

int cli_config_rewrite(const char *src, const char *dst, const char *quant_config,
                       const char *torch_dtype, bool drop_quant, bool sync, amn_error *err) {
    /* The input's config.json is as hostile as its weights: the kit's
     * reader caps its size before reading and its nesting while parsing. */
    static const amn_kit_json_caps caps = {
        .max_bytes = CONFIG_MAX, .max_depth = 32, .bad_code = AMN_E_PARSE};
    json_object *root = NULL;
    int rc = amn_kit_json_read_object(src, NULL, &caps, &root, err);
    if (rc) return rc;
    if (drop_quant) json_object_object_del(root, "quantization_config");
    if (quant_config) {
        json_object *q = json_tokener_parse(quant_config);
        if (!q) rc = amn_error_set(err, AMN_E_INVALID, "quantization_config is not JSON");
        /* An existing key keeps its place: json-c replaces the value in place. */
        else
            json_object_object_add(root, "quantization_config", q);
    }
    if (!rc && torch_dtype) {
        json_object *have = NULL;
        const bool has_dtype = json_object_object_get_ex(root, "dtype", &have);
        if (json_object_object_get_ex(root, "torch_dtype", &have) || !has_dtype)
            json_object_object_add(root, "torch_dtype", json_object_new_string(torch_dtype));
        if (has_dtype) json_object_object_add(root, "dtype", json_object_new_string(torch_dtype));
    }
    const char *text = NULL;
    if (!rc) {
        text =
            json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text) rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    if (!rc) {
        FILE *f = fopen(dst, "w");
        if (!f || fputs(text, f) == EOF || fputc('\n', f) == EOF || fflush(f) != 0 ||
            (sync && fsync(fileno(f)) != 0))
            rc = amn_error_set(err, AMN_E_IO, "%s: %s", dst, strerror(errno));
        if (f && fclose(f) != 0 && !rc)
            rc = amn_error_set(err, AMN_E_IO, "%s: %s", dst, strerror(errno));
    }
    json_object_put(root);
    return rc;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Weight files and their indexes: the output has its own. */
static bool is_weight_file(const char *name) {
    static const char *const exts[] = {".safetensors", ".index.json", ".pt", ".pth",     ".ckpt",
                                       ".gguf",        ".npz",        ".h5", ".msgpack", ".onnx"};
    for (size_t i = 0; i < sizeof exts / sizeof *exts; i++)
        if (ends_with(name, exts[i])) return true;
    return ends_with(name, ".bin") &&
           (strncmp(name, "pytorch_model", 13) == 0 || strncmp(name, "model", 5) == 0);
}

static bool is_skipped(const char *name, bool drop_quant) {
    if (name[0] == '.') return true; /* hidden files, our own temporaries */
    if (strcmp(name, "config.json") == 0 || is_weight_file(name)) return true;
    return drop_quant &&
           (strcmp(name, "quantize_config.json") == 0 || strcmp(name, "hf_quant_config.json") == 0);
}

static int copy_fd(int in, int out, const char *what, amn_error *err) {
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n == 0) return AMN_OK;
        if (n > 0) continue;
        if (errno == EINTR) continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP &&
            errno != EPERM)
            return amn_error_set(err, AMN_E_IO, "%s: copy: %s", what, strerror(errno));
        break; /* not offered here: plain reads and writes */
    }
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return amn_error_set(err, AMN_E_IO, "%s: read: %s", what, strerror(errno));
        if (n == 0) return AMN_OK;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR) continue;
            if (w < 0) return amn_error_set(err, AMN_E_IO, "%s: write: %s", what, strerror(errno));
            done += w;
        }
    }
}

static int copy_file(const char *src, const char *dst, bool sync, amn_error *err) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return amn_error_set(err, AMN_E_IO, "%s: %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (out < 0) {
        close(in);
        return amn_error_set(err, AMN_E_IO, "%s: %s", dst, strerror(errno));
    }
    int rc = copy_fd(in, out, src, err);
    if (!rc && sync && fsync(out) != 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: fsync: %s", dst, strerror(errno));
    if (close(out) != 0 && !rc) rc = amn_error_set(err, AMN_E_IO, "%s: %s", dst, strerror(errno));
    close(in);
    return rc;
}

int cli_folder_copy_files(const char *in_dir, const char *out_dir, bool drop_quant, bool sync,
                          size_t *copied, amn_error *err) {
    *copied = 0;
    DIR *d = opendir(in_dir);
    if (!d) return amn_error_set(err, AMN_E_IO, "%s: %s", in_dir, strerror(errno));
    int rc = AMN_OK;
    struct dirent *e;
    while (!rc && (e = readdir(d))) {
        if (is_skipped(e->d_name, drop_quant)) continue;
        char src[PATH_MAX], dst[PATH_MAX];
        if ((size_t)snprintf(src, sizeof src, "%s/%s", in_dir, e->d_name) >= sizeof src ||
            (size_t)snprintf(dst, sizeof dst, "%s/%s", out_dir, e->d_name) >= sizeof dst) {
            rc = amn_error_set(err, AMN_E_INVALID, "%s/%s: path too long", in_dir, e->d_name);
            break;
        }
        struct stat st;
        /* Followed: a Hugging Face cache snapshot links every file to a blob. */
        if (stat(src, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        rc = copy_file(src, dst, sync, err);
        if (!rc) (*copied)++;
    }
    closedir(d);
    return rc;
}

/* ---- a packed folder's other files, and what a signal removes ----------
 * The folder is named (the folder writer reads its files by name), so a
 * handled signal removes it: the handler lists it with getdents64 and
 * removes with unlinkat and rmdir, which are async-signal-safe. SIGKILL
 * cannot be caught: a run killed by it leaves the folder behind. */

static char side_dir[PATH_MAX], side_top[PATH_MAX];
static volatile sig_atomic_t side_active;

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

void cli_side_on_signal(void) {
    if (!side_active) return;
    side_active = 0;
    const int fd = open(side_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[4096] __attribute__((aligned(8)));
        long n;
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
            for (long at = 0; at < n;) {
                const struct linux_dirent64 *e = (const void *)(buf + at);
                if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                    unlinkat(fd, e->d_name, 0);
                at += e->d_reclen;
            }
        close(fd);
    }
    rmdir(side_dir);
    rmdir(side_top);
}

int cli_archive_side_dir(const amn_model *m, amn_kit_model_dir *d, const char **in_dir,
                         amn_error *err) {
    *in_dir = NULL;
    d->path = NULL;
    d->top = 0;
    d->lock = -1;
    if (!amn_model_archive(m)) return AMN_OK;
    int rc = amn_kit_model_dir_open(m, d, err);
    if (rc) return rc;
    if (strlen(d->path) >= sizeof side_dir) { /* no handler then; cannot be: buf is as long */
        amn_kit_model_dir_close(d);
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", d->buf);
    }
    memcpy(side_dir, d->path, strlen(d->path) + 1);
    memcpy(side_top, d->buf, d->top);
    side_top[d->top] = '\0';
    side_active = 1;
    *in_dir = d->path;
    return AMN_OK;
}

void cli_archive_side_done(amn_kit_model_dir *d) {
    side_active = 0;
    amn_kit_model_dir_close(d);
}
