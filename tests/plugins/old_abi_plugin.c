/* A plugin built against the frozen ABI 2.0 headers (tests/plugins/abi_2_0),
 * not against core/include: test_old_abi loads it into the current core and
 * uses everything it provides.
 *
 * Format "oldabi" (read, header-only inspect, write). Input files:
 * "AMNOLD20", u32 rows, u32 cols, rows*cols int8 codes, rows F32 scales;
 * they hold two tensors, w.q (I8 [rows, cols]) and w.scale (F32 [rows]).
 * Scheme "oldq" claims such a pair and dequantizes w = q * scale[row].
 * Written files: "AMNOLDW1", u32 count, per tensor (u8 name length, name, u8
 * dtype, u8 ndim, u64 dims), the F32 data in order, then "END!". */
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "amn/plugin.h"

_Static_assert(AMN_PLUGIN_ABI_MAJOR == 2 && AMN_PLUGIN_ABI_MINOR == 0,
               "old_abi_plugin must be built against the frozen 2.0 headers");

#define HEAD 16

static int probe(const amn_probe_data *pd) {
    return pd->head_size >= 8 && memcmp(pd->head, "AMNOLD20", 8) == 0 ? AMN_PROBE_MAX : 0;
}

static uint32_t u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Both tensors from the 16-byte head; data when the whole file is mapped. */
static int add_tensors(const uint8_t *head, const uint8_t *file, uint64_t size, amn_model *m,
                       amn_error *err) {
    const uint64_t rows = u32le(head + 8), cols = u32le(head + 12);
    if (rows == 0 || cols == 0 || rows > (1u << 16) || cols > (1u << 16) ||
        size != HEAD + rows * cols + rows * 4)
        return amn_error_set(err, AMN_E_PARSE, "oldabi: sizes do not match the file");
    amn_tensor q = {.struct_size = sizeof q,
                    .name = "w.q",
                    .dtype = AMN_DTYPE_I8,
                    .ndim = 2,
                    .shape = {rows, cols},
                    .nbytes = rows * cols,
                    .file_offset = HEAD};
    amn_tensor s = {.struct_size = sizeof s,
                    .name = "w.scale",
                    .dtype = AMN_DTYPE_F32,
                    .ndim = 1,
                    .shape = {rows},
                    .nbytes = rows * 4,
                    .file_offset = HEAD + rows * cols};
    if (file) {
        q.data = file + q.file_offset, q.extent = q.nbytes;
        s.data = file + s.file_offset, s.extent = s.nbytes;
    }
    int rc = amn_model_add_tensor(m, &q, err);
    return rc ? rc : amn_model_add_tensor(m, &s, err);
}

static int open_old(const amn_open_args *a, amn_model **out, amn_error *err) {
    if (!a->map || amn_map_size(a->map) < HEAD)
        return amn_error_set(err, AMN_E_PARSE, "oldabi: truncated");
    amn_model *m = amn_model_new("oldabi");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    const uint8_t *p = amn_map_data(a->map);
    int rc = add_tensors(p, p, amn_map_size(a->map), m, err);
    if (rc) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

static int inspect_old(const amn_inspect_args *a, amn_model **out, amn_error *err) {
    uint8_t head[HEAD];
    if (!a->src) return amn_error_set(err, AMN_E_UNSUPPORTED, "oldabi: not a directory format");
    int rc = amn_source_read(a->src, 0, head, HEAD, err);
    if (rc) return rc;
    amn_model *m = amn_model_new("oldabi");
    if (!m) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if ((rc = add_tensors(head, NULL, a->src->size, m, err))) {
        amn_model_free(m);
        return rc;
    }
    *out = m;
    return AMN_OK;
}

/* ---- writer --------------------------------------------------------------- */

typedef struct wstate {
    amn_sink *sink;
} wstate;

static int w_begin(const amn_write_args *a, void **state, size_t *order, amn_error *err) {
    uint8_t rec[8 + 1 + 255 + 2 + 8 * AMN_MAX_DIMS];
    uint8_t count[4] = {(uint8_t)a->n_tensors, (uint8_t)(a->n_tensors >> 8),
                        (uint8_t)(a->n_tensors >> 16), (uint8_t)(a->n_tensors >> 24)};
    int rc = amn_sink_write(a->sink, "AMNOLDW1", 8, err);
    if (!rc) rc = amn_sink_write(a->sink, count, 4, err);
    for (size_t i = 0; !rc && i < a->n_tensors; i++) {
        const amn_out_tensor *t = a->tensors[i];
        const size_t nl = strlen(t->name);
        if (nl > 255) return amn_error_set(err, AMN_E_UNSUPPORTED, "oldabi: name too long");
        size_t n = 0;
        rec[n++] = (uint8_t)nl;
        memcpy(rec + n, t->name, nl);
        n += nl;
        rec[n++] = (uint8_t)t->dtype;
        rec[n++] = (uint8_t)t->ndim;
        for (uint32_t d = 0; d < t->ndim; d++)
            for (int b = 0; b < 8; b++) rec[n++] = (uint8_t)(t->shape[d] >> (8 * b));
        rc = amn_sink_write(a->sink, rec, n, err);
        order[i] = i;
    }
    if (rc) return rc;
    wstate *s = malloc(sizeof *s);
    if (!s) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    s->sink = a->sink;
    *state = s;
    return AMN_OK;
}

static int w_finish(void *state, amn_error *err) {
    wstate *s = state;
    int rc = amn_sink_write(s->sink, "END!", 4, err);
    free(s); /* finish() releases the state, success or not */
    return rc;
}

static void w_abort(void *state) {
    free(state);
}

static const amn_writer writer = {
    .struct_size = sizeof(amn_writer),
    .dtypes = 1ull << AMN_DTYPE_F32,
    .begin = w_begin,
    .finish = w_finish,
    .abort = w_abort,
};

static const amn_format format = {
    .struct_size = sizeof(amn_format),
    .name = "oldabi",
    .description = "a format plugin built against the ABI 2.0 headers",
    .extensions = "old",
    .probe = probe,
    .open = open_old,
    .inspect = inspect_old,
    .writer = &writer,
};

/* ---- scheme --------------------------------------------------------------- */

typedef struct plan {
    size_t q, s;
    uint64_t cols;
} plan;

static int detect(const amn_model *m, amn_claimset *cs, amn_error *err) {
    const int64_t q = amn_model_find(m, "w.q"), s = amn_model_find(m, "w.scale");
    if (q < 0 || s < 0 || amn_claimset_is_claimed(cs, (size_t)q)) return AMN_OK;
    const amn_tensor *tq = amn_model_tensor(m, (size_t)q);
    plan *p = malloc(sizeof *p);
    if (!p) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    *p = (plan){(size_t)q, (size_t)s, tq->shape[1]};
    amn_group_spec g = {.struct_size = sizeof g,
                        .out_name = "w",
                        .ndim = 2,
                        .shape = {tq->shape[0], tq->shape[1]},
                        .row_elems = tq->shape[1],
                        .n_members = 2,
                        .members = {(size_t)q, (size_t)s},
                        .roles = {AMN_ROLE_WEIGHT, AMN_ROLE_SCALE},
                        .label = "old-ABI int8 rows",
                        .plan = p,
                        .plan_free = free};
    return amn_claimset_add(cs, &g, err);
}

static int dequantize(const amn_model *m, const void *vp, uint64_t row0, uint64_t nrows,
                      amn_dtype out, void *dst, amn_error *err) {
    const plan *p = vp;
    const amn_tensor *tq = amn_model_tensor(m, p->q), *ts = amn_model_tensor(m, p->s);
    const int8_t *q = tq->data;
    float row[64];
    if (p->cols > 64) return amn_error_set(err, AMN_E_UNSUPPORTED, "oldabi: rows over 64");
    for (uint64_t r = row0; r < row0 + nrows; r++) {
        const float scale = amn_load_le_f32((const uint8_t *)ts->data + 4 * r);
        for (uint64_t c = 0; c < p->cols; c++) row[c] = (float)q[r * p->cols + c] * scale;
        uint8_t *d = (uint8_t *)dst + (r - row0) * p->cols * amn_dtype_size(out);
        amn_le_to_host_n(row, 4, (size_t)p->cols); /* host floats to element bytes */
        if (amn_convert_elems(AMN_DTYPE_F32, row, out, d, (size_t)p->cols))
            return amn_error_set(err, AMN_E_INVALID, "oldabi: bad output dtype");
    }
    return AMN_OK;
}

static const amn_scheme scheme = {
    .struct_size = sizeof(amn_scheme),
    .name = "oldq",
    .description = "int8 rows with one F32 scale each (old-ABI test scheme)",
    .detect = detect,
    .dequantize = dequantize,
};

static int init(amn_registrar *r) {
    int rc = amn_register_format(r, &format);
    return rc ? rc : amn_register_scheme(r, &scheme);
}

AMN_PLUGIN_DEFINE(oldabi, "2.0", "built against the frozen ABI 2.0 headers", "MIT", init);
