/* A model folder's companion files as a folder on disk (amn/kit/model_dir.h). */
#include "amn/kit/model_dir.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void amn_kit_model_dir_close(amn_kit_model_dir *d) {
    if (d->top) {
        d->buf[d->top] = '\0';
        nftw(d->buf, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        d->top = 0;
    }
    d->path = NULL;
}

int amn_kit_model_dir_open(const amn_model *m, amn_kit_model_dir *d, amn_error *err) {
    d->top = 0;
    d->buf[0] = '\0';
    d->path = m ? amn_model_path(m) : NULL;
    const char *name = m ? amn_model_archive_folder(m) : NULL;
    if (!name) return AMN_OK;
    d->path = NULL;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    int n = snprintf(d->buf, sizeof d->buf, "%s/amn-side-XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof d->buf)
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", tmp);
    if (!mkdtemp(d->buf)) return amn_error_set(err, AMN_E_IO, "%s: %s", d->buf, strerror(errno));
    d->top = (size_t)n;
    /* The packed folder's name, or a stand-in where it cannot be one. */
    const bool plain = *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    n = snprintf(d->buf + d->top, sizeof d->buf - d->top, "/%s", plain ? name : "model");
    int rc = AMN_OK;
    if (n < 0 || (size_t)n >= sizeof d->buf - d->top)
        rc = amn_error_set(err, AMN_E_INVALID, "%s: path too long", d->buf);
    else if (mkdir(d->buf, 0700) != 0)
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", d->buf, strerror(errno));
    size_t count;
    if (!rc) rc = amn_model_archive_extract(m, d->buf, &count, err);
    if (rc) {
        amn_kit_model_dir_close(d);
        return rc;
    }
    d->path = d->buf;
    return AMN_OK;
}
