/* Private to core: how conversions read the bytes of a mapped input (input.c). */
#ifndef AMN_INPUT_INTERNAL_H
#define AMN_INPUT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "amn/io.h"
#include "amn/model.h"

/* The ways of getting a mapped input's bytes. 0 = choose (auto). */
typedef enum amni_input_path {
    AMNI_INPUT_AUTO = 0,
    AMNI_INPUT_MAP = 1,    /* through the mapping (page faults / MADV_POPULATE_READ) */
    AMNI_INPUT_PREAD = 2,  /* pread into a reusable buffer of the calling thread */
    AMNI_INPUT_SPLICE = 3, /* pass-through only: file -> pipe -> output in the kernel */
    AMNI_INPUT_COPY = 4,   /* pass-through only: copy_file_range, file -> output in the kernel */
} amni_input_path;
#define AMNI_INPUT_PATHS 5

/* The path AMN_INPUT=map|pread|splice|copy|auto forces (tests, benchmarks),
 * else AMNI_INPUT_AUTO. */
amni_input_path amni_input_forced(void);

/* Write bytes [p, p + n) of m's input to the sink the fastest way this
 * input allows (see input.c), or from memory when p is not in a mapping. */
int amni_input_pass(const amn_model *m, const uint8_t *p, size_t n, amn_sink *sink, amn_error *err);

/* AMN_E_IO naming the file when a file behind one of m's mappings is now
 * shorter than when it was mapped (truncated or replaced in place), where
 * reading the mapping would raise SIGBUS: one fstat per mapped file. Checked
 * before every chunk a conversion reads through a mapping (a truncation
 * racing with the read itself can still raise the signal; the CLI catches
 * that). */
int amni_model_check_inputs(const amn_model *m, amn_error *err);
/* The same for a read of tensor t only: the file its bytes are in (the
 * whole extent a view reaches), or every file when no one map holds them:
 * one fstat per read rather than one per shard of a sharded model. */
int amni_model_check_tensor(const amn_model *m, const amn_tensor *t, amn_error *err);
int amni_map_check(const amn_map *map, amn_error *err);

/* Free the calling thread's read buffers (they are freed at thread exit
 * anyway; the thread that ran a conversion calls this at its end). */
void amni_input_thread_release(void);

#endif
