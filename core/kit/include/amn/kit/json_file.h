/* amn/kit/json_file.h — plugin kit: one JSON object read from a file or a
 * buffer, capped before anything is allocated and parsed strictly.
 *
 * Every JSON text a plugin reads (a safetensors header or shard index, a
 * model's config.json, an Ollama manifest, a --gguf-metadata file) goes
 * through here, so all of them get the same rules: the size cap checked
 * before the file is read, json-c's depth cap, the strict tokenizer (no
 * comments, no single quotes, no trailing commas), nothing but white space
 * after the value, and a JSON object at the top. Each caller picks its caps
 * and the error class of a malformed text; every message starts with the
 * caller's label. */
#ifndef AMN_KIT_JSON_FILE_H
#define AMN_KIT_JSON_FILE_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "amn/error.h"

typedef struct amn_kit_json_caps {
    uint64_t max_bytes; /* a longer text: AMN_E_LIMIT, before it is read */
    int max_depth;      /* nesting allowed, at least 1 (deeper: AMN_E_LIMIT);
                           json-c keeps a stack of this many frames */
    int bad_code;       /* class of a malformed text: AMN_E_PARSE for a model's
                           own files, AMN_E_INVALID for a command-line argument */
} amn_kit_json_caps;

/* Parse text[0, n) as one JSON object into *out (the caller puts it with
 * json_object_put). Messages: "<label>: <n> bytes exceed the <cap>-byte cap"
 * (AMN_E_LIMIT), "<label>: JSON nests deeper than <d> levels" (AMN_E_LIMIT),
 * "<label>: not valid JSON: <json-c's reason>", "<label>: data after the JSON
 * value", "<label>: not a JSON object" (caps->bad_code). */
int amn_kit_json_parse_object(const char *label, const char *text, size_t n,
                              const amn_kit_json_caps *caps, json_object **out, amn_error *err);

/* Read the regular file at path and parse it as above; label defaults to
 * path. An unopenable or non-regular file is AMN_E_IO ("<path>: <reason>");
 * the size is checked against the cap before anything is allocated. */
int amn_kit_json_read_object(const char *path, const char *label, const amn_kit_json_caps *caps,
                             json_object **out, amn_error *err);

#endif
