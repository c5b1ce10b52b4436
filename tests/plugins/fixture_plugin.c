/* One source, many small plugins: each -D selects a way to be broken (or a
 * well-formed toy format), for the loader tests. */
#include <string.h>

#include "amn/plugin.h"

#ifndef FIXTURE_NAME
#error FIXTURE_NAME must be set
#endif

#ifndef FIXTURE_SCORE
#define FIXTURE_SCORE AMN_PROBE_LIKELY
#endif
#ifndef FIXTURE_EXT
#define FIXTURE_EXT "fixt"
#endif

__attribute__((unused)) static int probe(const amn_probe_data *pd) {
    return pd->head_size >= 8 && memcmp(pd->head, "AMNFIXT!", 8) == 0 ? FIXTURE_SCORE : 0;
}

static int open_model(const amn_open_args *a, amn_model **out, amn_error *err) {
    (void)a;
    *out = amn_model_new(FIXTURE_FORMAT);
    return *out ? AMN_OK : amn_error_set(err, AMN_E_NOMEM, "out of memory");
}

static const amn_format format = {
    .struct_size = sizeof(amn_format),
    .name = FIXTURE_FORMAT,
    .description = "loader test fixture",
    .extensions = FIXTURE_EXT,
#ifndef FIXTURE_NO_PROBE
    .probe = probe,
#endif
    .open = open_model,
};

#ifdef FIXTURE_UNRESOLVED
void amn_core_missing_symbol(void);
#endif

__attribute__((unused)) static int init(amn_registrar *r) {
#ifdef FIXTURE_UNRESOLVED
    amn_core_missing_symbol();
#endif
    int rc = amn_register_format(r, &format);
#ifdef FIXTURE_INIT_FAILS
    if (rc == AMN_OK) rc = AMN_E_INVALID; /* registered something, then failed */
#endif
    return rc;
}

#ifdef FIXTURE_NO_DESCRIPTOR
__attribute__((visibility("default"))) int amn_not_a_plugin = 1;
#else
#ifndef FIXTURE_SYMBOL
#define FIXTURE_SYMBOL amn_plugin_v2
#endif
__attribute__((visibility("default"))) extern const amn_plugin_desc FIXTURE_SYMBOL;
__attribute__((visibility("default"))) const amn_plugin_desc FIXTURE_SYMBOL = {
#ifdef FIXTURE_BAD_MAGIC
    0xdeadbeefu,
#else
    AMN_PLUGIN_MAGIC,
#endif
#ifdef FIXTURE_ABI_MAJOR
    FIXTURE_ABI_MAJOR,
#else
    AMN_PLUGIN_ABI_MAJOR,
#endif
#ifdef FIXTURE_ABI_MINOR
    FIXTURE_ABI_MINOR,
#else
    AMN_PLUGIN_ABI_MINOR,
#endif
    sizeof(amn_plugin_desc),
    0,
    FIXTURE_NAME,
    "1.0",
    "loader test fixture",
    "MIT",
    init,
};
#endif
