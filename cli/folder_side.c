/* A GGUF made a Hugging Face folder: the folder's files other than the
 * shards, which amn-hf's hfdir encoder gives as one JSON object (file name
 * -> content: a string is the text, {"base64": ...} the bytes, anything
 * else JSON), written into the temporary folder before
 * it is put in place; and the `--to hf` route to that encoder. */
#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "folder.h"

#define CLI_B64 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

/* A plain file name: no separator, not hidden, not a shard's. */
static bool plain_name(const char *n) {
    return n[0] && n[0] != '.' && !strchr(n, '/') && strlen(n) < 128 && !strstr(n, ".safetensors");
}

/* {"base64": "..."}: the bytes into *out (malloc'd); false when v is not
 * that or the text is not base64. */
static bool base64_of(json_object *v, unsigned char **out, size_t *n) {
    json_object *b;
    if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 1 ||
        !json_object_object_get_ex(v, "base64", &b) || !json_object_is_type(b, json_type_string))
        return false;
    const char *s = json_object_get_string(b);
    const size_t len = strlen(s);
    if (len % 4) return false;
    unsigned char *d = malloc(len / 4 * 3 + 1);
    if (!d) return false;
    size_t at = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v4 = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char c = s[i + k];
            const char *p = c == '=' || !c ? NULL : strchr(CLI_B64, c);
            if (c == '=' && i + 4 == len && k >= 2) {
                pad++;
            } else if (!p || pad) {
                free(d);
                return false;
            }
            v4 = v4 << 6 | (uint32_t)(p ? p - CLI_B64 : 0);
        }
        d[at++] = (unsigned char)(v4 >> 16);
        if (pad < 2) d[at++] = (unsigned char)(v4 >> 8);
        if (pad < 1) d[at++] = (unsigned char)v4;
    }
    *out = d;
    *n = at;
    return true;
}

static int write_one(const char *dir, const char *name, json_object *v, bool sync, amn_error *err) {
    char path[PATH_MAX + 160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    /* A string is the file's text, {"base64": ...} its bytes; anything else
     * is written as JSON. */
    unsigned char *bin = NULL;
    size_t len = 0;
    const bool raw = json_object_is_type(v, json_type_string), is_bin = base64_of(v, &bin, &len);
    const char *text =
        is_bin ? (const char *)bin
        : raw
            ? json_object_get_string(v)
            : json_object_to_json_string_ext(v, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!is_bin) len = strlen(text);
    FILE *f = fopen(path, "wx");
    if (!f) {
        free(bin);
        return amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    }
    int rc = AMN_OK;
    if (fwrite(text, 1, len, f) != len || (!raw && !is_bin && fputc('\n', f) == EOF) ||
        fflush(f) != 0 || (sync && fsync(fileno(f)) != 0))
        rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    if (fclose(f) != 0 && !rc) rc = amn_error_set(err, AMN_E_IO, "%s: %s", path, strerror(errno));
    free(bin);
    return rc;
}

int cli_folder_side_files(const char *dir, const char *json, bool sync, cli_folder_result *res,
                          amn_error *err) {
    json_object *files = json ? json_tokener_parse(json) : NULL;
    if (!files || !json_object_is_type(files, json_type_object)) {
        json_object_put(files);
        return amn_error_set(err, AMN_E_INVALID, "the encoder gave no folder files");
    }
    int rc = AMN_OK;
    json_object_object_foreach(files, name, v) {
        if (rc) break;
        if (!plain_name(name)) {
            rc = amn_error_set(err, AMN_E_INVALID, "the encoder named a bad file '%s'", name);
            break;
        }
        rc = write_one(dir, name, v, sync, err);
        if (!rc && strcmp(name, "config.json") == 0) res->config = true;
    }
    json_object_put(files);
    return rc;
}

/* `amn convert MODEL.gguf --to hf [--out-dtype T] [-o DIR/]`: the hfdir
 * encoder into a model folder (default <input without .gguf>-hf). */
int cli_convert_to_hf(const amn_ctx *ctx, const cli_args *a) {
    if (strcasecmp(a->to, "hf") != 0 || !a->input) return -1;
    char target[32], out[PATH_MAX];
    const char *dt = a->out_dtype;
    if (dt && strlen(dt) > 8) dt = "?";
    snprintf(target, sizeof target, dt ? "hfdir-%s" : "hfdir", dt ? dt : "");
    for (char *c = target; *c; c++) *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    if (!cli_is_encode_target(ctx, "hfdir")) return -1; /* no amn-hf: as before */
    if (!cli_is_encode_target(ctx, target)) {
        fprintf(stderr,
                "amn %s: --out-dtype %s: a Hugging Face folder is written as f32, f16 or "
                "bf16\n",
                a->command, a->out_dtype);
        return EXIT_USAGE;
    }
    const char *o = a->output;
    size_t n = o ? strlen(o) : 0;
    if (o && n && o[n - 1] != '/') {
        if (snprintf(out, sizeof out, "%s/", o) >= (int)sizeof out) return EXIT_USAGE;
    } else if (!o) {
        n = strlen(a->input);
        if (n > 5 && strcasecmp(a->input + n - 5, ".gguf") == 0) n -= 5;
        if (snprintf(out, sizeof out, "%.*s-hf/", (int)n, a->input) >= (int)sizeof out)
            return EXIT_USAGE;
    } else {
        snprintf(out, sizeof out, "%s", o);
    }
    cli_args b = *a;
    b.to = target;
    b.out_dtype = NULL;
    b.output = out;
    return cmd_forget(ctx, &b);
}
