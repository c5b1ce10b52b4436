/* SentencePiece's ModelProto (sentencepiece_model.proto), read with strict
 * bounds: only the repeated `pieces` field (1) is decoded, each piece's
 * `piece` (1, string), `score` (2, float) and `type` (3, enum, default
 * NORMAL); every other field is skipped by its wire type. The checks
 * sentencepiece's loader makes and the converter relies on are repeated:
 * non-empty UTF-8 pieces, known types, exactly one UNKNOWN piece. */
#include <string.h>

#include "hf_vocab_int.h"

typedef struct pb {
    const uint8_t *p, *end;
} pb;

static int varint(pb *b, uint64_t *v) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) return -1;
        uint8_t c = *b->p++;
        r |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *v = r;
            return 0;
        }
    }
    return -1; /* more than 10 bytes */
}

/* Skip one field's value of the given wire type; -1 on truncation or a
 * wire type a proto3/proto2 message of this schema cannot hold. */
static int skip(pb *b, unsigned wire, const uint8_t **val, uint64_t *len) {
    uint64_t v;
    switch (wire) {
    case 0:
        return varint(b, &v);
    case 1:
        if (b->end - b->p < 8) return -1;
        b->p += 8;
        return 0;
    case 5:
        if (b->end - b->p < 4) return -1;
        b->p += 4;
        return 0;
    case 2:
        if (varint(b, &v) || v > (uint64_t)(b->end - b->p)) return -1;
        if (val) *val = b->p, *len = v;
        b->p += v;
        return 0;
    default:
        return -1; /* groups (3, 4) and 6, 7 */
    }
}

static int parse_piece(const uint8_t *p, uint64_t n, hf_spm_piece *out) {
    pb b = {p, p + n};
    out->piece = NULL;
    out->len = 0;
    out->score = 0.0f;
    out->type = 1;
    bool have_piece = false;
    while (b.p < b.end) {
        uint64_t tag;
        if (varint(&b, &tag)) return -1;
        unsigned field = (unsigned)(tag >> 3), wire = tag & 7;
        if (field == 1 && wire == 2) {
            const uint8_t *v;
            uint64_t len;
            if (skip(&b, 2, &v, &len) || len > UINT32_MAX) return -1;
            out->piece = (const char *)v;
            out->len = (uint32_t)len;
            have_piece = true;
        } else if (field == 2 && wire == 5) {
            if (b.end - b.p < 4) return -1;
            uint32_t u = (uint32_t)b.p[0] | (uint32_t)b.p[1] << 8 | (uint32_t)b.p[2] << 16 |
                         (uint32_t)b.p[3] << 24;
            memcpy(&out->score, &u, 4);
            b.p += 4;
        } else if (field == 3 && wire == 0) {
            uint64_t t;
            if (varint(&b, &t)) return -1;
            out->type = t <= 6 ? (int)t : -1;
        } else if (field == 0 || skip(&b, wire, NULL, NULL)) {
            return -1;
        }
    }
    return have_piece ? 0 : -2;
}

int hf_spm_parse(const uint8_t *buf, size_t n, const amn_limits *lim, hf_arena *a,
                 hf_spm_piece **pieces, uint64_t *count, amn_error *err) {
    /* first pass: count the pieces to size the array before decoding them */
    pb b = {buf, buf + n};
    uint64_t np = 0;
    while (b.p < b.end) {
        uint64_t tag;
        if (varint(&b, &tag) || (tag >> 3) == 0 || skip(&b, tag & 7, NULL, NULL))
            return amn_error_set(err, AMN_E_PARSE,
                                 "tokenizer.model: malformed protobuf at byte %zu",
                                 (size_t)(b.p - buf));
        if (tag == (1 << 3 | 2)) np++;
    }
    if (np > lim->max_array)
        return amn_error_set(err, AMN_E_LIMIT, "tokenizer.model: %llu pieces exceed the cap %llu",
                             (unsigned long long)np, (unsigned long long)lim->max_array);
    if (np == 0) return amn_error_set(err, AMN_E_PARSE, "tokenizer.model: no pieces");
    hf_spm_piece *ps = hf_alloc(a, np, sizeof *ps, err);
    if (!ps) return err ? err->code : AMN_E_NOMEM;
    b.p = buf;
    uint64_t i = 0, n_unk = 0;
    while (b.p < b.end) {
        uint64_t tag = 0, len = 0;
        const uint8_t *v = NULL;
        varint(&b, &tag);
        skip(&b, tag & 7, &v, &len); /* validated by the first pass */
        if (tag != (1 << 3 | 2)) continue;
        int rc = parse_piece(v, len, &ps[i]);
        if (rc || ps[i].len == 0)
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.model: piece %llu is %s",
                                 (unsigned long long)i, rc == -1 ? "malformed" : "empty");
        if (ps[i].type < 1)
            return amn_error_set(err, AMN_E_PARSE,
                                 "tokenizer.model: piece %llu has an unknown type",
                                 (unsigned long long)i);
        if (!hf_utf8_valid(ps[i].piece, ps[i].len))
            return amn_error_set(err, AMN_E_PARSE, "tokenizer.model: piece %llu is not UTF-8",
                                 (unsigned long long)i);
        if (ps[i].type == HF_TT_UNKNOWN) n_unk++;
        i++;
    }
    if (n_unk != 1)
        return amn_error_set(
            err, AMN_E_PARSE,
            "tokenizer.model: %llu unknown pieces (sentencepiece needs exactly one)",
            (unsigned long long)n_unk);
    *pieces = ps;
    *count = np;
    return AMN_OK;
}
