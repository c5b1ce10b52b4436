/* A model folder's companion files as a folder on disk (amn/kit/model_dir.h).
 *
 * The temporary folder is named (its readers open files in it by name), so
 * a process killed by SIGKILL cannot remove it. Its maker holds an flock on
 * it for as long as it exists; the lock goes with the process, however it
 * ends. Whoever makes the next one removes every amn-side-* folder of its
 * user in that $TMPDIR whose lock it can take: their makers are gone. A
 * folder is made hidden (.amn-side-*), locked, and only then given its
 * visible name, so that no sweep takes one whose maker has yet to lock it. */
#include "amn/kit/model_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIDE_PREFIX "amn-side-"

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void amn_kit_remove_tree(const char *path) {
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The folders of killed runs in tmp: ours, and no one holds their lock. */
static void sweep(const char *tmp) {
    DIR *dir = opendir(tmp);
    if (!dir) return;
    char path[4096];
    for (struct dirent *e; (e = readdir(dir));) {
        if (strncmp(e->d_name, SIDE_PREFIX, strlen(SIDE_PREFIX)) != 0) continue;
        const int n = snprintf(path, sizeof path, "%s/%s", tmp, e->d_name);
        if (n < 0 || (size_t)n >= sizeof path) continue;
        const int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_uid == geteuid() && flock(fd, LOCK_EX | LOCK_NB) == 0)
            amn_kit_remove_tree(path);
        close(fd);
    }
    closedir(dir);
}

void amn_kit_model_dir_close(amn_kit_model_dir *d) {
    if (d->top) {
        d->buf[d->top] = '\0';
        amn_kit_remove_tree(d->buf);
        d->top = 0;
    }
    if (d->lock >= 0) close(d->lock);
    d->lock = -1;
    d->path = NULL;
}

/* d->buf = tmp/amn-side-XXXXXX, made, locked (d->lock); d->top its length. */
static int make_locked(const char *tmp, amn_kit_model_dir *d, amn_error *err) {
    char hidden[sizeof d->buf];
    int n = snprintf(hidden, sizeof hidden, "%s/." SIDE_PREFIX "XXXXXX", tmp);
    if (n < 0 || (size_t)n >= sizeof hidden)
        return amn_error_set(err, AMN_E_INVALID, "%s: path too long", tmp);
    if (!mkdtemp(hidden))
        return amn_error_set(err, AMN_E_IO,
                             "no temporary folder in %s for the packed folder's other files: %s "
                             "(set TMPDIR)",
                             tmp, strerror(errno));
    d->lock = open(hidden, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->lock < 0 || flock(d->lock, LOCK_EX) != 0) {
        const int rc = amn_error_set(err, AMN_E_IO, "%s: %s", hidden, strerror(errno));
        if (d->lock >= 0) close(d->lock);
        d->lock = -1;
        rmdir(hidden);
        return rc;
    }
    /* tmp/.amn-side-X -> tmp/amn-side-X: the same length less the dot */
    const size_t at = strlen(tmp) + 1;
    memcpy(d->buf, hidden, at);
    memcpy(d->buf + at, hidden + at + 1, (size_t)n - at);
    if (rename(hidden, d->buf) != 0) memcpy(d->buf, hidden, (size_t)n + 1); /* stays hidden */
    d->top = strlen(d->buf);
    return AMN_OK;
}

int amn_kit_model_dir_open(const amn_model *m, amn_kit_model_dir *d, amn_error *err) {
    d->top = 0;
    d->lock = -1;
    d->buf[0] = '\0';
    d->path = m ? amn_model_path(m) : NULL;
    const char *name = m ? amn_model_archive_folder(m) : NULL;
    if (!name) return AMN_OK;
    d->path = NULL;
    const char *tmp = getenv("TMPDIR");
    if (!tmp || tmp[0] != '/') tmp = "/tmp";
    sweep(tmp);
    int rc = make_locked(tmp, d, err);
    if (rc) return rc;
    /* The packed folder's name, or a stand-in where it cannot be one. */
    const bool plain = *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    const int n = snprintf(d->buf + d->top, sizeof d->buf - d->top, "/%s", plain ? name : "model");
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
