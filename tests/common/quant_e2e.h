/* End-to-end helpers shared by the fp8, gptq and awq scheme suites: a
 * registry of the build tree's plugins, models built in memory over golden
 * buffers, remember through amn_convert or the `amn` CLI, and reading the
 * output back. Header-only; every file written lives in a fresh temporary
 * directory. */
#ifndef AMN_QUANT_E2E_H
#define AMN_QUANT_E2E_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "amn/amn.h"
#include "quant_golden.h"

static amn_ctx *qe_ctx;

static int qe_setup(void **state) {
    (void)state;
    const char *dirs[1] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    amn_error err = {0};
    if (amn_ctx_new(&o, &qe_ctx, &err) != AMN_OK) {
        fprintf(stderr, "amn_ctx_new: %s\n", err.msg);
        return -1;
    }
    return amn_test_scratch_make("quant");
}

static int qe_teardown(void **state) {
    (void)state;
    amn_ctx_free(qe_ctx);
    return amn_test_scratch_remove();
}

static inline const char *qe_path(char *buf, size_t size, const char *fmt, ...) {
    int n = snprintf(buf, size, "%s/", amn_test_scratch());
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, size - (size_t)n, fmt, ap);
    va_end(ap);
    return buf;
}

static inline bool qe_have_writer(void) {
    return amn_ctx_find_format(qe_ctx, "safetensors") != NULL;
}

typedef struct qe_tensor {
    const char *name;
    amn_dtype dtype;
    uint32_t ndim;
    uint64_t shape[4];
    const void *data;
    uint64_t nbytes;
} qe_tensor;

/* Path the next models claim to come from (their config files sit beside
 * it), or NULL. */
static const char *qe_model_path;

static inline amn_model *qe_model(const qe_tensor *ts, size_t n) {
    amn_model *m = amn_model_new("safetensors");
    assert_non_null(m);
    if (qe_model_path) assert_int_equal(amn_model_set_path(m, qe_model_path, NULL), AMN_OK);
    for (size_t i = 0; i < n; i++) {
        amn_tensor t = {.struct_size = sizeof(amn_tensor),
                        .name = ts[i].name,
                        .dtype = ts[i].dtype,
                        .ndim = ts[i].ndim,
                        .nbytes = ts[i].nbytes,
                        .data = ts[i].data,
                        .extent = ts[i].nbytes};
        memcpy(t.shape, ts[i].shape, sizeof ts[i].shape);
        amn_error err = {0};
        if (amn_model_add_tensor(m, &t, &err) != AMN_OK)
            fail_msg("add %s: %s", ts[i].name, err.msg);
    }
    return m;
}

/* Plan a model; returns the rc and leaves the message in *err. */
static inline int qe_plan(const qe_tensor *ts, size_t n, amn_error *err, char *label,
                          size_t label_size) {
    amn_model *m = qe_model(ts, n);
    amn_plan *p = NULL;
    int rc = amn_plan_new(qe_ctx, m, &p, err);
    if (!rc && label) {
        amn_plan_summary s = {.struct_size = sizeof(amn_plan_summary)};
        amn_plan_summarize(p, AMN_DTYPE_BF16, &s);
        snprintf(label, label_size, "%s", s.label ? s.label : "");
    }
    amn_plan_free(p);
    amn_model_free(m);
    return rc;
}

/* Remember the model to path as `out` with `threads` workers. */
static inline void qe_convert(const qe_tensor *ts, size_t n, amn_dtype out, unsigned threads,
                              const char *path) {
    amn_model *m = qe_model(ts, n);
    amn_plan *p = NULL;
    amn_error err = {0};
    if (amn_plan_new(qe_ctx, m, &p, &err) != AMN_OK) fail_msg("plan: %s", err.msg);
    amn_convert_options o = {.struct_size = sizeof(amn_convert_options),
                             .mode = AMN_MODE_REMEMBER,
                             .out_dtype = out,
                             .output = path,
                             .overwrite = true,
                             .threads = threads};
    amn_convert_stats st = {.struct_size = sizeof(amn_convert_stats)};
    if (amn_convert(qe_ctx, m, p, &o, &st, &err) != AMN_OK) fail_msg("convert: %s", err.msg);
    amn_plan_free(p);
    amn_model_free(m);
}

/* A copy of tensor `name` of the file at path; checks dtype and shape. */
static inline uint8_t *qe_read(const char *path, const char *name, amn_dtype dtype, uint32_t ndim,
                               const uint64_t *shape, size_t *nbytes) {
    amn_model *m = NULL;
    amn_error err = {0};
    if (amn_open(qe_ctx, path, NULL, NULL, &m, &err) != AMN_OK)
        fail_msg("open %s: %s", path, err.msg);
    const int64_t i = amn_model_find(m, name);
    if (i < 0) fail_msg("%s: no tensor %s", path, name);
    const amn_tensor *t = amn_model_tensor(m, (size_t)i);
    assert_int_equal(t->dtype, dtype);
    assert_int_equal(t->ndim, ndim);
    for (uint32_t d = 0; d < ndim; d++) assert_int_equal(t->shape[d], shape[d]);
    uint8_t *b = malloc(t->nbytes ? t->nbytes : 1);
    assert_non_null(b);
    memcpy(b, t->data, t->nbytes);
    *nbytes = t->nbytes;
    amn_model_free(m);
    return b;
}

static inline size_t qe_count(const char *path) {
    amn_model *m = NULL;
    amn_error err = {0};
    if (amn_open(qe_ctx, path, NULL, NULL, &m, &err) != AMN_OK)
        fail_msg("open %s: %s", path, err.msg);
    size_t n = amn_model_tensor_count(m);
    amn_model_free(m);
    return n;
}

/* Write a safetensors file by hand: u64 header length, JSON, data. */
static inline void qe_write_st(const char *path, const qe_tensor *ts, size_t n, const char *meta) {
    size_t cap = 4096 + n * 256, len = 0;
    char *h = malloc(cap);
    assert_non_null(h);
    len += (size_t)snprintf(h + len, cap - len, "{");
    if (meta) len += (size_t)snprintf(h + len, cap - len, "\"__metadata__\":%s,", meta);
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        len += (size_t)snprintf(h + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[",
                                i ? "," : "", ts[i].name, amn_dtype_name(ts[i].dtype));
        for (uint32_t d = 0; d < ts[i].ndim; d++)
            len += (size_t)snprintf(h + len, cap - len, "%s%llu", d ? "," : "",
                                    (unsigned long long)ts[i].shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}",
                                (unsigned long long)off, (unsigned long long)(off + ts[i].nbytes));
        off += ts[i].nbytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    while (len % 8) h[len++] = ' ';
    assert_true(len < cap);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint8_t le[8];
    for (int k = 0; k < 8; k++) le[k] = (uint8_t)((uint64_t)len >> (8 * k));
    assert_int_equal(fwrite(le, 1, 8, f), 8);
    assert_int_equal(fwrite(h, 1, len, f), len);
    for (size_t i = 0; i < n; i++)
        if (ts[i].nbytes) assert_int_equal(fwrite(ts[i].data, 1, ts[i].nbytes, f), ts[i].nbytes);
    assert_int_equal(fclose(f), 0);
    free(h);
}

static inline void qe_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* Run the CLI; returns its exit status. */
static inline int qe_cli(const char *args) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/bin/amn' %s >/dev/null 2>&1", AMN_BINARY_DIR, args);
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Lower the kernels' SIMD level for what follows (they read AMN_SIMD per call). */
static inline void qe_set_simd(amn_simd lv) {
    setenv("AMN_SIMD", amn_simd_name(lv), 1);
}

#endif
