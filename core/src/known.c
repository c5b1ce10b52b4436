/* What the project's own plugins recognise, kept in the core so that a file
 * whose plugin is not installed gets "install the amn-X plugin" rather than
 * "unrecognised" (GDAL's deferred drivers, ImageMagick's magic table). */
#include <string.h>

#include "registry_internal.h"

static bool has_ext(const char *path, const char *ext) {
    if (!path) return false;
    size_t n = strlen(path), e = strlen(ext);
    return n > e && strcmp(path + n - e, ext) == 0;
}

const char *amni_known_plugin_for_file(const char *path, const uint8_t *head, size_t head_size,
                                       uint64_t file_size) {
    if (head_size >= 4 && memcmp(head, "GGUF", 4) == 0) return "gguf";
    if (head_size >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) return "npz";
    if (head_size >= 4 && memcmp(head, "PK\x03\x04", 4) == 0) {
        if (has_ext(path, ".npz")) return "npz";
        return "pth";
    }
    if (head_size >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) return "pth";
    if (head_size >= 9 && head[8] == '{') {
        uint64_t n = 0;
        for (int i = 7; i >= 0; i--) n = n << 8 | head[i];
        if (n <= file_size - 8) return "safetensors";
    }
    if (has_ext(path, ".safetensors") || has_ext(path, ".safetensors.index.json"))
        return "safetensors";
    if (has_ext(path, ".gguf")) return "gguf";
    if (has_ext(path, ".npz") || has_ext(path, ".npy")) return "npz";
    if (has_ext(path, ".pth") || has_ext(path, ".pt")) return "pth";
    return NULL;
}
