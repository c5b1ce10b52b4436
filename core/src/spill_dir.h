/* Private to core: the folder a compressed archive's model files are
 * decompressed into (see spill_dir.c). */
#ifndef AMN_SPILL_DIR_H
#define AMN_SPILL_DIR_H

#include <stdbool.h>

/* $TMPDIR when it is an absolute path; else /var/tmp where /tmp is held in
 * memory and /var/tmp, writable, is not; else /tmp. */
const char *amni_spill_dir(void);
/* The choice itself, from what amni_spill_dir finds (tested on its own). */
const char *amni_spill_dir_choose(const char *tmpdir, bool tmp_in_memory, bool var_tmp_on_disk);

#endif
