/* Private to core: reading structs a plugin built with its own struct_size. */
#ifndef AMN_ABI_INTERNAL_H
#define AMN_ABI_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "amn/context.h"
#include "amn/convert.h"
#include "amn/error.h"
#include "amn/format.h"
#include "amn/scheme.h"
#include "amn/tensor.h"

/* Bytes of `type` up to and including `field`. */
#define AMNI_SIZE_TO(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/* The size each struct had in plugin ABI 2.0, the smallest the core accepts. */
#define AMNI_TENSOR_SIZE_2_0     AMNI_SIZE_TO(amn_tensor, encoding_name)
#define AMNI_GROUP_SPEC_SIZE_2_0 AMNI_SIZE_TO(amn_group_spec, plan_free)
#define AMNI_LIMITS_SIZE_2_0     AMNI_SIZE_TO(amn_limits, max_alloc)

/* Copy the part of *src its struct_size covers into *dst (dst_size bytes),
 * zero the rest, and stamp dst with the core's size. */
static inline void amni_copy_sized(void *dst, size_t dst_size, const void *src) {
    uint32_t n;
    memcpy(&n, src, sizeof n); /* every such struct starts with struct_size */
    memset(dst, 0, dst_size);
    memcpy(dst, src, n < dst_size ? n : dst_size);
    const uint32_t full = (uint32_t)dst_size;
    memcpy(dst, &full, sizeof full);
}

/* Application ABI (amn/context.h): the sizes of the first release, the
 * smallest libamn accepts. */
#define AMNI_CTX_OPTIONS_SIZE_1     AMNI_SIZE_TO(amn_ctx_options, no_builtin)
#define AMNI_PLUGIN_INFO_SIZE_1     AMNI_SIZE_TO(amn_plugin_info, resolvers)
#define AMNI_PLAN_SUMMARY_SIZE_1    AMNI_SIZE_TO(amn_plan_summary, missing_plugin)
#define AMNI_GROUP_INFO_SIZE_1      AMNI_SIZE_TO(amn_group_info, roles)
#define AMNI_CONVERT_OPTIONS_SIZE_1 AMNI_SIZE_TO(amn_convert_options, select_user)
#define AMNI_CONVERT_STATS_SIZE_1   AMNI_SIZE_TO(amn_convert_stats, abs_err_values)

/* Read an application's options struct into *dst (dst_size: libamn's
 * sizeof): the part its struct_size covers, the rest zero. A caller built
 * with a newer header may pass a larger struct only when the fields this
 * libamn does not know are zero: a set option must never be ignored. */
int amni_struct_in(void *dst, size_t dst_size, size_t min_size, const void *src, const char *what,
                   amn_error *err);
/* AMN_E_INVALID unless *p's struct_size is at least min_size. */
int amni_struct_check(const void *p, size_t min_size, const char *what, amn_error *err);
/* Give an application the first bytes of *full (full_size: libamn's sizeof)
 * that its struct_size covers; dst's struct_size becomes the bytes given. */
int amni_struct_out(void *dst, const void *full, size_t full_size, size_t min_size,
                    const char *what, amn_error *err);

/* The option keys a writer declares; NULL for none or a writer too old to
 * have the slot. */
static inline const char *const *amni_writer_options(const amn_writer *w) {
    return w && AMN_HAS_FIELD(w, amn_writer, options) ? w->options : NULL;
}

/* The writer's option check, or NULL (none, or a 2.0 writer). */
static inline int (*amni_writer_check(const amn_writer *w))(const char *, const char *,
                                                            amn_error *) {
    return AMN_HAS_FIELD(w, amn_writer, check_option) ? w->check_option : NULL;
}

/* Whether the writer takes tensor `index`'s bytes itself (write_data);
 * false for a writer older than ABI 2.5 or one that sets neither slot. */
static inline bool amni_writer_filters(const amn_writer *w, void *state, size_t index) {
    return AMN_HAS_FIELD(w, amn_writer, write_data) && w->filters && w->write_data &&
           w->filters(state, index);
}

#endif
