/* The Ollama model store, read-only: name -> manifest -> model blob.
 *
 * Everything taken from the name or the manifest becomes a path component,
 * so each is checked against a strict character set first: no "/", no "..",
 * no leading dot, digests hex only. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "amn/kit/json_file.h"
#include "ollama.h"

#define DEFAULT_HOST      "registry.ollama.ai"
#define DEFAULT_NAMESPACE "library"
#define DEFAULT_TAG       "latest"
#define MODEL_MEDIA_TYPE  "application/vnd.ollama.image.model"
#define MAX_COMPONENT     255
#define MAX_MANIFEST      (1u << 20) /* real manifests are about 1 KiB */

/* A path component: [A-Za-z0-9._-], not starting with '.' (so never "." or
 * ".."), at most MAX_COMPONENT bytes. */
static bool valid_component(const char *s, size_t n) {
    if (n == 0 || n > MAX_COMPONENT || s[0] == '.') return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return false;
    }
    return true;
}

typedef struct name {
    char host[MAX_COMPONENT + 1], ns[MAX_COMPONENT + 1], model[MAX_COMPONENT + 1],
        tag[MAX_COMPONENT + 1];
} name;

static void copy_part(char *dst, const char *s, size_t n) {
    memcpy(dst, s, n);
    dst[n] = '\0';
}

static int parse_name(const char *spec, name *out, amn_error *err) {
    const char *slash = strrchr(spec, '/');
    const char *colon = strrchr(slash ? slash : spec, ':');
    const size_t path_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *tag = colon ? colon + 1 : DEFAULT_TAG;
    if (!valid_component(tag, strlen(tag)))
        return amn_error_set(err, AMN_E_INVALID, "ollama:%s: invalid tag", spec);
    copy_part(out->tag, tag, strlen(tag));
    const char *parts[3];
    size_t lens[3], n = 0;
    for (const char *p = spec, *end = spec + path_len;;) {
        const char *s = memchr(p, '/', (size_t)(end - p));
        const char *stop = s ? s : end;
        if (n == 3) return amn_error_set(err, AMN_E_INVALID, "ollama:%s: too many '/'", spec);
        parts[n] = p;
        lens[n] = (size_t)(stop - p);
        if (!valid_component(parts[n], lens[n]))
            return amn_error_set(err, AMN_E_INVALID,
                                 "ollama:%s: invalid model name (letters, digits, '.', '_' "
                                 "and '-' only)",
                                 spec);
        n++;
        if (!s) break;
        p = s + 1;
    }
    copy_part(out->host, n == 3 ? parts[0] : DEFAULT_HOST, n == 3 ? lens[0] : strlen(DEFAULT_HOST));
    copy_part(out->ns, n >= 2 ? parts[n - 2] : DEFAULT_NAMESPACE,
              n >= 2 ? lens[n - 2] : strlen(DEFAULT_NAMESPACE));
    copy_part(out->model, parts[n - 1], lens[n - 1]);
    return AMN_OK;
}

static int store_root(char *buf, size_t size, amn_error *err) {
    const char *env = getenv("OLLAMA_MODELS");
    int n;
    if (env && *env) {
        n = snprintf(buf, size, "%s", env);
    } else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            const struct passwd *pw = getpwuid(getuid());
            home = pw ? pw->pw_dir : NULL;
        }
        if (!home || !*home)
            return amn_error_set(err, AMN_E_INVALID,
                                 "ollama: neither OLLAMA_MODELS nor a home directory is set");
        n = snprintf(buf, size, "%s/.ollama/models", home);
    }
    if (n < 0 || (size_t)n >= size)
        return amn_error_set(err, AMN_E_LIMIT, "ollama: store path too long");
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    return AMN_OK;
}

/* The manifest as a JSON object: a missing one means no such model. */
static int read_manifest(const char *path, const char *spec, json_object **out, amn_error *err) {
    static const amn_kit_json_caps caps = {
        .max_bytes = MAX_MANIFEST, .max_depth = 16, .bad_code = AMN_E_PARSE};
    char label[AMN_ERROR_MSG_MAX];
    snprintf(label, sizeof label, "ollama:%s: manifest %s", spec, path);
    int rc = amn_kit_json_read_object(path, label, &caps, out, err);
    if (rc == AMN_E_IO) {
        char why[sizeof label];
        snprintf(why, sizeof why, "%s", err ? err->msg : "");
        return amn_error_set(err, AMN_E_IO, "ollama:%s: no such model in the Ollama store (%s)",
                             spec, why);
    }
    return rc;
}

/* The hex digest of the manifest's model layer into hex[65]. */
static int model_digest(json_object *root, const char *spec, const char *mpath, char *hex,
                        amn_error *err) {
    json_object *layers;
    if (!json_object_object_get_ex(root, "layers", &layers) ||
        !json_object_is_type(layers, json_type_array)) {
        return amn_error_set(err, AMN_E_PARSE, "ollama:%s: manifest %s has no layers", spec, mpath);
    }
    for (size_t i = 0; i < json_object_array_length(layers); i++) {
        json_object *l = json_object_array_get_idx(layers, i), *mt, *dg;
        if (!json_object_is_type(l, json_type_object) ||
            !json_object_object_get_ex(l, "mediaType", &mt) ||
            !json_object_is_type(mt, json_type_string) ||
            strcmp(json_object_get_string(mt), MODEL_MEDIA_TYPE) != 0)
            continue;
        const char *d =
            json_object_object_get_ex(l, "digest", &dg) && json_object_is_type(dg, json_type_string)
                ? json_object_get_string(dg)
                : "";
        bool ok = strncmp(d, "sha256:", 7) == 0 && strlen(d + 7) == 64;
        for (size_t k = 0; ok && k < 64; k++) {
            char c = d[7 + k];
            ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        }
        if (!ok)
            return amn_error_set(
                err, AMN_E_PARSE,
                "ollama:%s: manifest %s: model layer digest is not sha256:<64 hex>", spec, mpath);
        memcpy(hex, d + 7, 64);
        hex[64] = '\0';
        return AMN_OK;
    }
    return amn_error_set(err, AMN_E_PARSE, "ollama:%s: manifest %s has no model layer (%s)", spec,
                         mpath, MODEL_MEDIA_TYPE);
}

int amn_ollama_resolve(const char *spec, char *path, size_t path_size, amn_error *err) {
    name nm;
    char root[4096], mpath[4096 + 4 * (MAX_COMPONENT + 1) + 32], hex[65];
    int rc = parse_name(spec, &nm, err);
    if (!rc) rc = store_root(root, sizeof root, err);
    if (rc) return rc;
    int n = snprintf(mpath, sizeof mpath, "%s/manifests/%s/%s/%s/%s", root, nm.host, nm.ns,
                     nm.model, nm.tag);
    if (n < 0 || (size_t)n >= sizeof mpath)
        return amn_error_set(err, AMN_E_LIMIT, "ollama:%s: manifest path too long", spec);
    json_object *manifest = NULL;
    if ((rc = read_manifest(mpath, spec, &manifest, err))) return rc;
    rc = model_digest(manifest, spec, mpath, hex, err);
    json_object_put(manifest);
    if (rc) return rc;
    n = snprintf(path, path_size, "%s/blobs/sha256-%s", root, hex);
    if (n < 0 || (size_t)n >= path_size)
        return amn_error_set(err, AMN_E_LIMIT, "ollama:%s: blob path too long", spec);
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return amn_error_set(err, AMN_E_IO,
                             "ollama:%s: the model blob %s is missing (an interrupted pull?)", spec,
                             path);
    return AMN_OK;
}

const amn_resolver amn_ollama_resolver = {
    .struct_size = sizeof(amn_resolver),
    .scheme = "ollama",
    .description = "models in the local Ollama store (ollama:<model>[:<tag>])",
    .resolve = amn_ollama_resolve,
};
