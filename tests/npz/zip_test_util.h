/* zip_test_util.h — helpers shared by the npz and pth suites: a context over
 * the build tree's plugins, expected.json runners (open, inspect, and the
 * CLI's `remember` to safetensors read back), and mutation runs over
 * malformed copies of a file. Header-only: each suite includes it once. */
#ifndef ZIP_TEST_UTIL_H
#define ZIP_TEST_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "amn_test.h"

#include "amn/amn.h"

static amn_ctx *zt_ctx;

static int zt_setup(void **state) {
    (void)state;
    const char *dirs[1] = {AMN_BINARY_DIR "/lib/amn/plugins"};
    amn_ctx_options o = {.struct_size = sizeof(amn_ctx_options),
                         .plugin_dirs = dirs,
                         .n_plugin_dirs = 1,
                         .no_env = true,
                         .no_default = true};
    amn_error err = {0};
    if (amn_ctx_new(&o, &zt_ctx, &err) != AMN_OK) {
        fprintf(stderr, "amn_ctx_new: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int zt_teardown(void **state) {
    (void)state;
    amn_ctx_free(zt_ctx);
    return 0;
}

static uint8_t *zt_unhex(const char *hex, size_t *n) {
    size_t len = strlen(hex);
    uint8_t *out = malloc(len / 2 + 1);
    assert_non_null(out);
    for (size_t i = 0; i < len / 2; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
    *n = len / 2;
    return out;
}

/* The logical C-order little-endian bytes of a tensor. */
static uint8_t *zt_tensor_bytes(const amn_tensor *t) {
    uint8_t *buf = malloc(t->nbytes ? t->nbytes : 1);
    assert_non_null(buf);
    amn_error err = {0};
    int rc = amn_tensor_read(t, 0, buf, t->nbytes, &err);
    if (rc != AMN_OK) fail_msg("%s: amn_tensor_read: %s", t->name, err.msg);
    return buf;
}

static void zt_check_shape(const char *name, json_object *shape, uint32_t ndim,
                           const uint64_t *dims) {
    if ((size_t)ndim != json_object_array_length(shape)) fail_msg("%s: rank %u", name, ndim);
    for (uint32_t d = 0; d < ndim; d++)
        if (dims[d] != (uint64_t)json_object_get_int64(json_object_array_get_idx(shape, d)))
            fail_msg("%s: dim %u is %llu", name, d, (unsigned long long)dims[d]);
}

/* Compare one opened (or inspected) model with its expected.json record.
 * Returns the number of bytes compared. */
static size_t zt_check_model(const char *file, const amn_model *m, json_object *rec,
                             bool inspected) {
    json_object *tensors = json_object_object_get(rec, "tensors");
    size_t n = json_object_array_length(tensors);
    if (amn_model_tensor_count(m) != n)
        fail_msg("%s: %zu tensors, expected %zu", file, amn_model_tensor_count(m), n);
    const char *label = json_object_get_string(json_object_object_get(rec, "label"));
    if (label && strcmp(label, amn_model_label(m)) != 0)
        fail_msg("%s: label '%s', expected '%s'", file, amn_model_label(m), label);
    size_t compared = 0;
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(tensors, i);
        const char *name = json_object_get_string(json_object_object_get(e, "name"));
        const amn_tensor *t = amn_model_tensor(m, i);
        if (strcmp(t->name, name) != 0)
            fail_msg("%s: tensor %zu is '%s', expected '%s'", file, i, t->name, name);
        const char *dt = json_object_get_string(json_object_object_get(e, "dtype"));
        if (strcmp(amn_dtype_name(t->dtype), dt) != 0)
            fail_msg("%s: %s dtype %s, expected %s", file, name, amn_dtype_name(t->dtype), dt);
        zt_check_shape(name, json_object_object_get(e, "shape"), t->ndim, t->shape);
        size_t len;
        uint8_t *want =
            zt_unhex(json_object_get_string(json_object_object_get(e, "data_hex")), &len);
        assert_int_equal(t->nbytes, len);
        if (inspected) {
            assert_null(t->data);
        } else {
            uint8_t *got = zt_tensor_bytes(t);
            if (memcmp(got, want, len) != 0) fail_msg("%s: %s: bytes differ", file, name);
            compared += len;
            free(got);
        }
        free(want);
    }
    /* Notes: every expected name present; scalar values as recorded. */
    json_object *notes = json_object_object_get(rec, "notes");
    if (notes && json_object_is_type(notes, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(notes); i++) {
            const char *want = json_object_get_string(json_object_array_get_idx(notes, i));
            bool found = false;
            for (size_t k = 0; k < amn_model_note_count(m) && !found; k++)
                found = strcmp(amn_model_note_name(m, k), want) == 0;
            if (!found) fail_msg("%s: note '%s' missing", file, want);
        }
    } else if (notes) {
        size_t expected_notes = 0;
        json_object_object_foreach(notes, key, val) {
            expected_notes++;
            bool found = false;
            for (size_t k = 0; k < amn_model_note_count(m) && !found; k++) {
                if (strcmp(amn_model_note_name(m, k), key) != 0) continue;
                found = true;
                if (val && strcmp(amn_model_note_value(m, k), json_object_get_string(val)) != 0)
                    fail_msg("%s: note %s = '%s', expected '%s'", file, key,
                             amn_model_note_value(m, k), json_object_get_string(val));
            }
            if (!found) fail_msg("%s: note '%s' missing", file, key);
        }
        assert_int_equal(amn_model_note_count(m), expected_notes);
    }
    return compared;
}

/* Read a safetensors file written by the CLI and compare it with rec. */
static size_t zt_check_safetensors(const char *file, const char *path, json_object *rec) {
    size_t size = 0;
    uint8_t *d = amn_test_read_file(path, &size);
    if (!d) fail_msg("%s: no output %s", file, path);
    assert_true(size >= 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | d[i];
    assert_true(hlen <= size - 8);
    char *hdr = strndup((const char *)d + 8, hlen);
    json_object *h = json_tokener_parse(hdr);
    free(hdr);
    assert_non_null(h);
    json_object *tensors = json_object_object_get(rec, "tensors");
    size_t n = json_object_array_length(tensors), compared = 0, seen = 0;
    json_object_object_foreach(h, key, val) {
        (void)val;
        if (strcmp(key, "__metadata__") != 0) seen++;
    }
    assert_int_equal(seen, n);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(tensors, i);
        const char *name = json_object_get_string(json_object_object_get(e, "name"));
        json_object *o = json_object_object_get(h, name);
        if (!o) fail_msg("%s: %s missing from the safetensors output", file, name);
        const char *dt = json_object_get_string(json_object_object_get(o, "dtype"));
        if (strcmp(dt, json_object_get_string(json_object_object_get(e, "dtype"))) != 0)
            fail_msg("%s: %s written as %s", file, name, dt);
        json_object *offs = json_object_object_get(o, "data_offsets");
        uint64_t b = (uint64_t)json_object_get_int64(json_object_array_get_idx(offs, 0));
        uint64_t en = (uint64_t)json_object_get_int64(json_object_array_get_idx(offs, 1));
        size_t len;
        uint8_t *want =
            zt_unhex(json_object_get_string(json_object_object_get(e, "data_hex")), &len);
        assert_true(b <= en && en <= size - 8 - hlen);
        assert_int_equal(en - b, len);
        if (memcmp(d + 8 + hlen + b, want, len) != 0)
            fail_msg("%s: %s: safetensors bytes differ", file, name);
        compared += len;
        free(want);
    }
    json_object_put(h);
    free(d);
    return compared;
}

/* expected.json's error names -> codes */
static int zt_code(const char *name) {
    static const struct {
        const char *name;
        int code;
    } t[] = {{"parse", AMN_E_PARSE},
             {"unsupported", AMN_E_UNSUPPORTED},
             {"limit", AMN_E_LIMIT},
             {"disallowed", AMN_E_DISALLOWED}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].name, name) == 0) return t[i].code;
    fail_msg("unknown error class %s", name);
    return 0;
}

static int zt_run(const char *cmd) {
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Every file of <dir>/expected.json through open, inspect and the CLI. */
static void zt_run_expected(const char *dir, const char *tmp_tag) {
    char path[4096];
    snprintf(path, sizeof path, "%s/expected.json", dir);
    json_object *all = json_object_from_file(path);
    if (!all) fail_msg("cannot read %s", path);
    size_t files = 0, bytes = 0, errors = 0;
    /* The CLI round trip writes safetensors: skipped (after everything
     * else) in a build without that plugin. */
    const int cli = amn_test_built("safetensors");
    json_object_object_foreach(all, file, rec) {
        snprintf(path, sizeof path, "%s/%s", dir, file);
        amn_error err = {0};
        amn_model *m = NULL;
        int rc = amn_open(zt_ctx, path, NULL, NULL, &m, &err);
        json_object *want_err = json_object_object_get(rec, "error");
        if (want_err) {
            if (rc == AMN_OK)
                fail_msg("%s: opened, expected a %s error", file, json_object_get_string(want_err));
            if (rc != zt_code(json_object_get_string(want_err)))
                fail_msg("%s: %s error (%s), expected %s", file, amn_error_class(rc), err.msg,
                         json_object_get_string(want_err));
            errors++;
            continue;
        }
        if (rc != AMN_OK) fail_msg("%s: %s", file, err.msg);
        bytes += zt_check_model(file, m, rec, false);
        amn_model_free(m);
        rc = amn_inspect(zt_ctx, path, NULL, NULL, &m, &err);
        if (rc != AMN_OK) fail_msg("%s: inspect: %s", file, err.msg);
        zt_check_model(file, m, rec, true);
        amn_model_free(m);
        files++;
        if (!cli) continue;
        /* End to end through the CLI: remember writes a lossless safetensors. */
        char out[4096], cmd[9000];
        snprintf(out, sizeof out, "%s/zt_%s_%d.safetensors", AMN_BINARY_DIR, tmp_tag,
                 (int)getpid());
        snprintf(cmd, sizeof cmd, "'%s/bin/amn' remember '%s' -o '%s' --force >/dev/null",
                 AMN_BINARY_DIR, path, out);
        rc = zt_run(cmd);
        if (rc != 0) fail_msg("%s: amn remember exited %d", file, rc);
        bytes += zt_check_safetensors(file, out, rec);
        unlink(out);
    }
    fprintf(stderr, "%s: %zu files, %zu bytes compared, %zu refused as expected\n", dir, files,
            bytes, errors);
    json_object_put(all);
    if (!cli) {
        fprintf(stderr, "SKIP %s: the CLI round trips need the safetensors plugin\n", dir);
        skip();
    }
}

/* Write buf to a temporary file, open and inspect it; never crashes. Returns
 * the open result code. */
static int zt_try_bytes(const uint8_t *buf, size_t n, const char *suffix, amn_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/zt_mut_%d%s", AMN_BINARY_DIR, (int)getpid(), suffix);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
    amn_model *m = NULL;
    int rc = amn_open(zt_ctx, path, NULL, NULL, &m, err);
    if (rc == AMN_OK) {
        /* Whatever opened must read back within bounds. */
        for (size_t i = 0; i < amn_model_tensor_count(m); i++)
            free(zt_tensor_bytes(amn_model_tensor(m, i)));
        amn_model_free(m);
    }
    amn_error e2 = {0};
    amn_model *m2 = NULL;
    if (amn_inspect(zt_ctx, path, NULL, NULL, &m2, &e2) == AMN_OK) amn_model_free(m2);
    unlink(path);
    return rc;
}

/* Deterministic mutations of a good file: truncations and byte flips. */
static void zt_fuzz(const char *path, const char *suffix, unsigned rounds) {
    size_t n = 0;
    uint8_t *orig = amn_test_read_file(path, &n);
    assert_non_null(orig);
    uint8_t *buf = malloc(n);
    assert_non_null(buf);
    amn_error err;
    size_t step = n / 64 ? n / 64 : 1;
    for (size_t len = 0; len < n; len += step) {
        memset(&err, 0, sizeof err);
        zt_try_bytes(orig, len, suffix, &err);
    }
    uint32_t seed = 12345;
    for (unsigned r = 0; r < rounds; r++) {
        memcpy(buf, orig, n);
        for (int k = 0; k < 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[pos] = (uint8_t)(seed >> 16);
        }
        memset(&err, 0, sizeof err);
        zt_try_bytes(buf, n, suffix, &err);
    }
    free(buf);
    free(orig);
}

#endif
