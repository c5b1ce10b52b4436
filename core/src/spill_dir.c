/* Where a compressed archive's model files are decompressed (archive.c).
 * They are large (a model's size), and where /tmp is a tmpfs (systemd's
 * default on many distributions) files there take memory: a 15 GB model
 * would take 15 GB of it, or fail for want of room. Without TMPDIR they go
 * to /var/tmp then, which is on disk, as systemd advises for large
 * temporary files (file-hierarchy(7)); the files are unlinked, so none is
 * left there. */
#include "spill_dir.h"

#include <stdlib.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/magic.h>
#include <sys/statfs.h>
#endif

const char *amni_spill_dir_choose(const char *tmpdir, bool tmp_in_memory, bool var_tmp_on_disk) {
    if (tmpdir && *tmpdir == '/') return tmpdir;
    return tmp_in_memory && var_tmp_on_disk ? "/var/tmp" : "/tmp";
}

/* Whether dir's file system holds its files in memory; false when unknown. */
static bool in_memory(const char *dir) {
#ifdef __linux__
    struct statfs fs;
    return statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
#else
    (void)dir;
    return false;
#endif
}

const char *amni_spill_dir(void) {
    const char *env = getenv("TMPDIR");
    if (env && *env == '/') return env;
    const bool tmp_mem = in_memory("/tmp");
    const bool var_disk = tmp_mem && access("/var/tmp", W_OK | X_OK) == 0 && !in_memory("/var/tmp");
    return amni_spill_dir_choose(NULL, tmp_mem, var_disk);
}
