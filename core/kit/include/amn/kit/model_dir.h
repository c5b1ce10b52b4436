/* amn/kit/model_dir.h — plugin kit: a model folder's companion files
 * (config.json, tokenizer files, README.md, ...) as a folder on disk, for
 * readers that open them by path, whether the model was opened from a
 * folder or from a packed one (an archive, doc/archives.md). */
#ifndef AMN_KIT_MODEL_DIR_H
#define AMN_KIT_MODEL_DIR_H

#include <stddef.h>

#include "amn/error.h"
#include "amn/model.h"

typedef struct amn_kit_model_dir {
    const char *path; /* the folder to read companion files from */
    char buf[4096];   /* a temporary folder's path */
    size_t top;       /* length in buf of the temporary parent to remove; 0: none */
    int lock;         /* an flock on that parent while it exists, else -1 */
} amn_kit_model_dir;

/* A model from an archive (amn_model_archive): its packed folder's files
 * other than model files, extracted into a new temporary folder named as
 * the packed folder (amn_model_archive_folder: readers that take a name
 * from the folder's name see the same one), in a new folder
 * $TMPDIR/amn-side-XXXXXX (else /tmp); d->path is that folder. Any other
 * model: d->path is amn_model_path(m) (NULL for a stream), and nothing is
 * made. The temporary folder is named (a reader opens files in it by
 * name): close it as soon as the files are read. One left by a process
 * that was killed (SIGKILL) is removed by the next open that makes one in
 * the same $TMPDIR (each is locked while its maker lives). */
int amn_kit_model_dir_open(const amn_model *m, amn_kit_model_dir *d, amn_error *err);
/* Remove the temporary folder, if any (best effort); d->path is then NULL. */
void amn_kit_model_dir_close(amn_kit_model_dir *d);

/* Remove a tree, following no symbolic link; best effort. */
void amn_kit_remove_tree(const char *path);

#endif
