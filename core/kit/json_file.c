/* One JSON object from a buffer or a file, capped and strict (json_file.h). */
#include <limits.h>
#include <stdlib.h>

#include "amn/io.h"
#include "amn/kit/json_file.h"

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int check_size(const char *label, uint64_t n, const amn_kit_json_caps *caps,
                      amn_error *err) {
    if (n > caps->max_bytes || n > INT_MAX) /* json-c takes an int length */
        return amn_error_set(
            err, AMN_E_LIMIT, "%s: %llu bytes exceed the %llu-byte cap", label,
            (unsigned long long)n,
            (unsigned long long)(caps->max_bytes < INT_MAX ? caps->max_bytes : INT_MAX));
    return AMN_OK;
}

int amn_kit_json_parse_object(const char *label, const char *text, size_t n,
                              const amn_kit_json_caps *caps, json_object **out, amn_error *err) {
    *out = NULL;
    int rc = check_size(label, n, caps, err);
    if (rc) return rc;
    const int depth = caps->max_depth < 1 ? 1 : caps->max_depth;
    json_tokener *tok = json_tokener_new_ex(depth);
    if (!tok) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, text, (int)n);
    enum json_tokener_error je = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    json_tokener_free(tok);
    if (je == json_tokener_error_depth) {
        json_object_put(o);
        return amn_error_set(err, AMN_E_LIMIT, "%s: JSON nests deeper than %d levels", label,
                             depth);
    }
    if (!o || je != json_tokener_success) {
        json_object_put(o);
        return amn_error_set(err, caps->bad_code, "%s: not valid JSON: %s", label,
                             je == json_tokener_continue ? "the text ends inside a value"
                                                         : json_tokener_error_desc(je));
    }
    while (used < n && is_space(text[used])) used++;
    if (used != n) {
        json_object_put(o);
        return amn_error_set(err, caps->bad_code, "%s: data after the JSON value", label);
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return amn_error_set(err, caps->bad_code, "%s: not a JSON object", label);
    }
    *out = o;
    return AMN_OK;
}

int amn_kit_json_read_object(const char *path, const char *label, const amn_kit_json_caps *caps,
                             json_object **out, amn_error *err) {
    *out = NULL;
    if (!label) label = path;
    amn_source src;
    int rc = amn_source_file_open(path, &src, err);
    if (rc) return rc;
    if ((rc = check_size(label, src.size, caps, err))) {
        amn_source_file_close(&src);
        return rc;
    }
    const size_t n = (size_t)src.size;
    char *text = malloc(n + 1);
    if (!text) {
        amn_source_file_close(&src);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    rc = amn_source_read(&src, 0, text, n, err);
    amn_source_file_close(&src);
    if (!rc) {
        text[n] = '\0';
        rc = amn_kit_json_parse_object(label, text, n, caps, out, err);
    }
    free(text);
    return rc;
}
