/* The quantization a model's settings files declare (config.json's
 * quantization_config, ModelOpt's hf_quant_config.json), read so that a
 * model declared quantized is never copied through as a plain one when no
 * loaded scheme recognises its tensors. Only the method and format are
 * read: the schemes themselves read the rest through the plugin kit. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "amn/io.h"
#include "archive_internal.h"
#include "known_internal.h"

#define DECL_MAX_FILE (4u << 20) /* a settings file is a few kilobytes */

/* A JSON object from n bytes, or NULL. */
static json_object *parse_object(const char *buf, size_t n) {
    json_object *root = NULL;
    json_tokener *tok = n > 0 && n <= DECL_MAX_FILE ? json_tokener_new_ex(32) : NULL;
    if (tok) {
        root = json_tokener_parse_ex(tok, buf, (int)n);
        if (json_tokener_get_error(tok) != json_tokener_success) {
            json_object_put(root);
            root = NULL;
        }
        json_tokener_free(tok);
    }
    if (root && !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        root = NULL;
    }
    return root;
}

static json_object *read_object(const char *path) {
    amn_source src;
    if (amn_source_file_open(path, &src, NULL) != AMN_OK) return NULL;
    json_object *root = NULL;
    if (src.size > 0 && src.size <= DECL_MAX_FILE) {
        char *buf = malloc((size_t)src.size);
        if (buf && amn_source_read(&src, 0, buf, (size_t)src.size, NULL) == AMN_OK)
            root = parse_object(buf, (size_t)src.size);
        free(buf);
    }
    amn_source_file_close(&src);
    if (root && !json_object_is_type(root, json_type_object)) {
        json_object_put(root);
        root = NULL;
    }
    return root;
}

static bool get_lower(json_object *o, const char *key, char *dst, size_t size) {
    json_object *v;
    if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return false;
    const char *s = json_object_get_string(v);
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++) dst[i] = (char)tolower((unsigned char)s[i]);
    dst[i] = '\0';
    return i > 0;
}

static json_object *member(json_object *o, const char *key) {
    json_object *v;
    return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_object)
               ? v
               : NULL;
}

static void from_config(amni_quant_decl *d, json_object *root) {
    json_object *q = member(root, "quantization_config");
    if (!q) q = member(root, "compression_config");
    if (!q || !get_lower(q, "quant_method", d->method, sizeof d->method)) return;
    snprintf(d->file, sizeof d->file, "config.json");
    if (get_lower(q, "format", d->format, sizeof d->format)) return;
    if (get_lower(q, "quant_algo", d->format, sizeof d->format)) return;
    /* compressed-tensors may give the format per config group only. */
    json_object *groups = member(q, "config_groups");
    if (!groups) return;
    json_object_object_foreach(groups, key, g) {
        (void)key;
        if (json_object_is_type(g, json_type_object) &&
            get_lower(g, "format", d->format, sizeof d->format))
            return;
    }
}

static void from_modelopt(amni_quant_decl *d, json_object *root) {
    json_object *q = member(root, "quantization");
    char algo[48];
    if (!q || !get_lower(q, "quant_algo", algo, sizeof algo)) return;
    snprintf(d->method, sizeof d->method, "modelopt");
    snprintf(d->format, sizeof d->format, "%s", algo);
    snprintf(d->file, sizeof d->file, "hf_quant_config.json");
}

/* A settings file of m: from its archive when it came from one (never the
 * files beside the archive), else beside its path. */
static json_object *settings(const amn_model *m, const char *dir, const char *name) {
    if (amni_archive_path(m)) {
        size_t n = 0;
        const uint8_t *data = amni_archive_settings(m, name, &n);
        return data ? parse_object((const char *)data, n) : NULL;
    }
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    if (!path) return NULL;
    snprintf(path, n, "%s/%s", dir, name);
    json_object *root = read_object(path);
    free(path);
    return root;
}

void amni_quant_decl_load(const amn_model *m, amni_quant_decl *d) {
    memset(d, 0, sizeof *d);
    const char *p = amn_model_path(m);
    if (!p || !*p) return;
    char *dir;
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
        dir = strdup(p);
    } else {
        const char *slash = strrchr(p, '/');
        dir = slash ? strndup(p, (size_t)(slash - p) + (slash == p)) : strdup(".");
    }
    if (!dir) return;
    static const char *const files[] = {"config.json", "hf_quant_config.json"};
    for (size_t k = 0; k < 2 && !d->method[0]; k++) {
        json_object *root = settings(m, dir, files[k]);
        if (!root) continue;
        if (k == 0)
            from_config(d, root);
        else
            from_modelopt(d, root);
        json_object_put(root);
    }
    free(dir);
}
