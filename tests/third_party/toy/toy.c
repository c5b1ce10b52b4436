/* amn-toy: a third-party format plugin, built only against amn's installed
 * headers. Format: "AMNTOY01", u32 count, then per tensor: u8 name length,
 * name, u8 ndim, u32 dims[ndim], then product(dims) little-endian F32. */
#include <string.h>

#include <amn/checked.h>
#include <amn/plugin.h>

static int probe(const amn_probe_data *pd) {
    return pd->head_size >= 8 && memcmp(pd->head, "AMNTOY01", 8) == 0 ? AMN_PROBE_MAX : 0;
}

static int u32_at(const uint8_t *p, uint64_t size, uint64_t off, uint32_t *v) {
    if (!amn_range_ok(size, off, 4)) return -1;
    *v = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
         (uint32_t)p[off + 3] << 24;
    return 0;
}

static int parse(const uint8_t *p, uint64_t size, amn_model *m, amn_error *err) {
    uint32_t count;
    uint64_t off = 8;
    if (u32_at(p, size, off, &count)) return amn_error_set(err, AMN_E_PARSE, "toy: truncated");
    off += 4;
    for (uint32_t i = 0; i < count; i++) {
        char name[256];
        if (!amn_range_ok(size, off, 1)) return amn_error_set(err, AMN_E_PARSE, "toy: truncated");
        uint8_t nl = p[off++];
        if (!amn_range_ok(size, off, nl + 1u))
            return amn_error_set(err, AMN_E_PARSE, "toy: truncated name");
        memcpy(name, p + off, nl);
        name[nl] = '\0';
        off += nl;
        amn_tensor t = {.struct_size = sizeof(amn_tensor),
                        .name = name,
                        .dtype = AMN_DTYPE_F32,
                        .ndim = p[off++]};
        if (t.ndim > AMN_MAX_DIMS) return amn_error_set(err, AMN_E_PARSE, "toy: too many dims");
        uint64_t numel = 1;
        for (uint32_t d = 0; d < t.ndim; d++, off += 4) {
            uint32_t v;
            if (u32_at(p, size, off, &v)) return amn_error_set(err, AMN_E_PARSE, "toy: truncated");
            t.shape[d] = v;
            numel *= v;
        }
        if (!amn_mul_u64(numel, 4, &t.nbytes) || !amn_range_ok(size, off, t.nbytes))
            return amn_error_set(err, AMN_E_PARSE, "toy: tensor %s runs past the end", name);
        t.data = p + off;
        t.extent = t.nbytes;
        t.file_offset = off;
        off += t.nbytes;
        int rc = amn_model_add_tensor(m, &t, err);
        if (rc) return rc;
    }
    return AMN_OK;
}

static int open_toy(const amn_open_args *a, amn_model **out, amn_error *err) {
    if (!a->map) return amn_error_set(err, AMN_E_UNSUPPORTED, "toy: not a directory format");
    amn_model *m = amn_model_new("toy");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    int rc = parse(amn_map_data(a->map), amn_map_size(a->map), m, err);
    if (!rc) rc = amn_model_set_label(m, "Toy tensors", err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

static const amn_format toy = {
    .struct_size = sizeof(amn_format),
    .name = "toy",
    .description = "Toy tensors (third-party plugin test)",
    .extensions = "toy",
    .probe = probe,
    .open = open_toy,
};

static int init(amn_registrar *r) {
    return amn_register_format(r, &toy);
}

AMN_PLUGIN_DEFINE(toy, "0.1", "A third-party toy format", "MIT", init);
