/* amn/scan.h — auditing a file without loading it: `amn scan`.
 *
 * A scan never executes, resolves or imports anything and never stops at
 * the first problem: it reports every finding (each pickle global, allowed
 * or not; every opcode that could call code; nested pickles; container
 * anomalies) and a verdict. Formats that can carry code (PyTorch pickles,
 * NumPy object arrays) implement amn_format.scan; every other format is
 * scanned by its header-only inspection (a structural check) and, when
 * that succeeds, is safe.
 */
#ifndef AMN_SCAN_H
#define AMN_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "amn/context.h"
#include "amn/error.h"
#include "amn/format.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AMN_SCAN_NO_OFFSET UINT64_MAX

typedef struct amn_scan_finding {
    const char *kind;  /* "global", "call", "build", "object", "extension", "persid",
                          "nested-pickle", "container", "malformed", "structure",
                          "member" (a model file of an archive: the findings after it are
                          about that file) */
    const char *what;  /* "os.system", "REDUCE of os.system", ... */
    const char *where; /* the member or record ("archive/data.pkl"); "" for the file */
    uint64_t offset;   /* byte offset in where (AMN_SCAN_NO_OFFSET if none) */
    bool unsafe;       /* this finding alone makes the file unsafe */
} amn_scan_finding;

typedef struct amn_scan_report amn_scan_report;

/* Scan one file (format detected as amn_open does, or `from`). AMN_OK with a
 * report whenever the file could be read at all, however hostile; an error
 * (parse, I/O, ...) when it is unreadable. limits NULL: defaults. */
AMN_API int amn_scan(const amn_ctx *ctx, const char *path, const char *from,
                     const amn_limits *limits, amn_scan_report **out, amn_error *err);
AMN_API void amn_scan_free(amn_scan_report *r);

AMN_API const char *amn_scan_format(const amn_scan_report *r); /* "pth", "npz", ... */
AMN_API bool amn_scan_unsafe(const amn_scan_report *r);        /* any unsafe finding */
AMN_API size_t amn_scan_count(const amn_scan_report *r);
AMN_API const amn_scan_finding *amn_scan_get(const amn_scan_report *r, size_t i);

/* For format plugins: record a finding (texts are copied). At most
 * AMN_SCAN_MAX_FINDINGS are kept; later ones only count (the report says
 * how many were dropped, and an unsafe one still makes the file unsafe). */
#define AMN_SCAN_MAX_FINDINGS 10000
AMN_API int amn_scan_add(amn_scan_report *r, bool unsafe, const char *kind, const char *where,
                         uint64_t offset, amn_error *err, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));
AMN_API size_t amn_scan_dropped(const amn_scan_report *r);

/* What amn_format.scan receives: the file mapped, as for open. */
typedef struct amn_scan_args {
    const char *path;
    const amn_map *map;
    const amn_limits *limits; /* never NULL */
} amn_scan_args;

#ifdef __cplusplus
}
#endif
#endif
