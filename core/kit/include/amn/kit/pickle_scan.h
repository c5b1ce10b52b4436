/* amn/kit/pickle_scan.h — plugin kit: audit a pickle without running it.
 *
 * The scanner reads every opcode and keeps a symbolic stack (strings,
 * globals by name, call results by their callable, tuples), never a value:
 * nothing is resolved, imported or called. It reports, through the scan
 * report (amn/scan.h), every global (allowed by torch's weights-only list or
 * not), every opcode that can call code (REDUCE, NEWOBJ, BUILD with state,
 * INST/OBJ, EXT*, persistent ids of unexpected shape), pickles nested in
 * strings or bytes (scanned in turn), bytes after STOP, and where it could
 * not go on (malformed). Findings about allowed names are aggregated (one
 * per name, with a count); unsafe ones are listed each with its offset.
 */
#ifndef AMN_KIT_PICKLE_SCAN_H
#define AMN_KIT_PICKLE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "amn/format.h"
#include "amn/scan.h"

typedef struct pk_scan_opts {
    const char *where; /* member name for the findings */
    /* called with the key of every well-formed ('storage', ...) persistent
     * id; may be NULL */
    void (*on_storage_key)(void *ctx, const char *key, size_t len);
    void *key_ctx;
    /* legacy checkpoints: more pickles and raw data follow; the scan stops
     * at STOP and *consumed says where */
    int stop_at_stop;
    size_t *consumed;
} pk_scan_opts;

/* Scan p[0..n). AMN_OK unless memory runs out: a malformed or hostile
 * pickle is findings, not an error. */
int pk_scan(const uint8_t *p, size_t n, const amn_limits *lim, const pk_scan_opts *o,
            amn_scan_report *r, amn_error *err);

/* True when the bytes look like the start of a pickle (PROTO 2-5). */
int pk_looks_like_pickle(const uint8_t *p, size_t n);

#endif
