/* Private to core: model folders packed as archives (archive.c). A .tar,
 * .tar.gz, .tar.zst, .tar.xz, .tar.bz2 or .zip that holds a model folder
 * opens as that folder: its weight files are found the way a folder's are,
 * opened by their formats' plugins, and joined into one model. */
#ifndef AMN_ARCHIVE_INTERNAL_H
#define AMN_ARCHIVE_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/context.h"
#include "amn/format.h"
#include "amn/model.h"
#include "amn/scan.h"

/* Returned (positive) when path is not a model archive: the caller goes on
 * as for any file. A ZIP is one only when it holds model files and none of
 * the members that make it an npz (*.npy) or a torch file (data.pkl). */
#define AMNI_NOT_ARCHIVE 1

/* The weight files of the model folder an archive holds, each readable in
 * memory: a range of the archive's mapping where the member is stored
 * whole (uncompressed tar, stored ZIP member), else a buffer it was
 * decompressed into. With header_only, a compressed member keeps only its
 * first bytes (enough for a header): formats that read further (a .pth
 * reads its end first) fail with AMN_E_UNSUPPORTED naming the member. */
typedef struct amni_archive amni_archive;

int amni_archive_load(const char *path, const amn_limits *lim, bool header_only, amni_archive **out,
                      amn_error *err);
void amni_archive_free(amni_archive *a);
size_t amni_archive_count(const amni_archive *a);
/* Member i of the chosen ones: "<archive>/<member name>" for messages and
 * probing, and its bytes. */
const char *amni_archive_label(const amni_archive *a, size_t i);
const uint8_t *amni_archive_data(const amni_archive *a, size_t i);
uint64_t amni_archive_size(const amni_archive *a, size_t i);
/* The format of member i (from, when given, else probed). */
int amni_archive_detect(const amn_ctx *ctx, const amni_archive *a, size_t i, const char *from,
                        const amn_format **out, amn_error *err);

/* Returned (positive) by amni_archive_inspect when a member of an archive
 * loaded header_only must be read further than its kept prefix (a .pth's
 * or npz's ZIP directory at its end): load it whole to read it. */
#define AMNI_NEEDS_WHOLE 2

/* Whether member i is held whole (else a header's prefix). */
bool amni_archive_whole(const amni_archive *a, size_t i);

/* Member i's header read by format f (as amn_inspect reads a file), the
 * files beside it (a split GGUF's other shards) among the archive's;
 * AMNI_NEEDS_WHOLE when it reads past what is kept. */
int amni_archive_inspect(amni_archive *a, size_t i, const amn_format *f, amn_model **out,
                         amn_error *err);

/* amn_open / amn_inspect of an archive: AMNI_NOT_ARCHIVE, or an AMN_* code
 * with *out the joined model. */
int amni_archive_open(const amn_ctx *ctx, const char *path, const char *from, const amn_limits *lim,
                      bool header_only, amn_model **out, amn_error *err);

/* Of a model amni_archive_open made (else NULL): the archive's path, and
 * a settings file of its model folder ("config.json",
 * "hf_quant_config.json"; at most 4 MiB) with its size. */
const char *amni_archive_path(const amn_model *m);
const uint8_t *amni_archive_settings(const amn_model *m, const char *name, size_t *size);

#endif
