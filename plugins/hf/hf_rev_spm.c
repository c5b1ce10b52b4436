/* A SentencePiece ("llama") vocabulary of a GGUF as the tokenizer.model
 * sentencepiece loads (sentencepiece_model.proto's ModelProto): every
 * piece of the model with its score and type (GGUF numbers token types as
 * sentencepiece does), a BPE trainer_spec naming the special ids, and the
 * normalizer llama.cpp's tokenizer applies (identity, a dummy prefix,
 * spaces escaped, extra whitespace kept). Tokens appended after the model's
 * pieces (control / user-defined tokens past the last normal one) are
 * added tokens: they go to added_tokens.json instead; the converter's
 * [PAD<i>] filler goes nowhere. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amn/byteorder.h"
#include "hf_rev.h"

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void varint(buf *b, uint64_t v) {
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7F) | (v > 0x7F ? 0x80 : 0));
        v >>= 7;
    } while (v);
    put(b, t, n);
}

static void field_varint(buf *b, unsigned field, int64_t v) {
    varint(b, (uint64_t)field << 3);
    varint(b, (uint64_t)v); /* int32 negatives as 10 bytes, as protobuf writes them */
}

static void field_bytes(buf *b, unsigned field, const void *d, size_t n) {
    varint(b, (uint64_t)field << 3 | 2);
    varint(b, n);
    put(b, d, n);
}

static void field_f32(buf *b, unsigned field, float f) {
    varint(b, (uint64_t)field << 3 | 5);
    uint8_t le[4]; /* protobuf's fixed32 is little-endian */
    amn_store_le_f32(le, f);
    put(b, le, 4);
}

/* The converter's "[PAD<i>]" filler (UNUSED tokens up to config.json's
 * vocab_size) is not part of the tokenizer: it is made again from there. */
static bool filler(const amn_str *s, int32_t type) {
    return type == 5 && s->len > 5 && memcmp(s->ptr, "[PAD", 4) == 0 && s->ptr[s->len - 1] == ']';
}

uint64_t hf_rev_spm_tokens(const amn_kv *toks, const amn_kv *types) {
    uint64_t n = toks->count;
    const amn_str *s = toks->data;
    while (n > 0 && types && n <= types->count &&
           filler(&s[n - 1], ((const int32_t *)types->data)[n - 1]))
        n--;
    return n;
}

uint64_t hf_rev_spm_pieces(const amn_kv *toks, const amn_kv *types) {
    uint64_t n = hf_rev_spm_tokens(toks, types);
    while (n > 0 && types && n <= types->count) {
        const int32_t t = ((const int32_t *)types->data)[n - 1];
        if (t != 3 && t != 4) break;
        n--;
    }
    return n;
}

static int64_t special(const amn_model *m, const char *which, int64_t dflt) {
    char key[96];
    double v;
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    return hf_rev_num(amn_model_find_kv(m, key), &v) ? (int64_t)v : dflt;
}

/* The id of byte piece <0x00> when the byte pieces sit in one run of 256
 * ids (ggml's llama vocabularies), else UINT64_MAX. A piece of that run the
 * converter replaced by an added token (scored -1000) is its byte again. */
static uint64_t byte_base(const amn_kv *toks, const amn_kv *types, uint64_t n) {
    const amn_str *s = toks->data;
    for (uint64_t i = 0; types && i < n && i < types->count; i++) {
        if (((const int32_t *)types->data)[i] != 6) continue;
        unsigned v;
        char tail;
        if (s[i].len != 6 || memcmp(s[i].ptr, "<0x", 3) != 0) return UINT64_MAX;
        char t[7];
        memcpy(t, s[i].ptr, 6);
        t[6] = '\0';
        if (sscanf(t, "<0x%2X%c", &v, &tail) != 2 || tail != '>' || v > i) return UINT64_MAX;
        return i - v + 256 <= n ? i - v : UINT64_MAX;
    }
    return UINT64_MAX;
}

int hf_rev_spm(const amn_model *m, const amn_kv *toks, const amn_kv *types, const amn_kv *scores,
               uint8_t **out, size_t *out_len, amn_error *err) {
    const uint64_t n = hf_rev_spm_pieces(toks, types);
    const int64_t unk = special(m, "unknown", 0), bos = special(m, "bos", 1),
                  eos = special(m, "eos", 2), pad = special(m, "padding", -1);
    if (n == 0 || unk < 0 || (uint64_t)unk >= n)
        return amn_error_set(err, AMN_E_PARSE, "GGUF: the vocabulary has no unknown token");
    buf b = {0}, piece = {0}, spec = {0};
    const uint64_t base = byte_base(toks, types, n);
    uint64_t bytes = 0;
    const amn_str *s = toks->data;
    for (uint64_t i = 0; i < n && !b.oom && !piece.oom; i++) {
        int32_t t = types && i < types->count ? ((const int32_t *)types->data)[i] : 1;
        if (t < 1 || t > 6) t = 1;
        if ((int64_t)i == unk)
            t = 2;
        else if (t == 2)
            t = 3; /* sentencepiece takes exactly one UNKNOWN piece */
        float sc = scores && i < scores->count ? ((const float *)scores->data)[i] : 0.0f;
        char hex[8];
        amn_str text = s[i];
        if (base != UINT64_MAX && i >= base && i - base < 256 && t != 6 && (t == 3 || t == 4) &&
            sc == -1000.0f) { /* a byte piece the converter replaced: back */
            snprintf(hex, sizeof hex, "<0x%02X>", (unsigned)(i - base));
            text = (amn_str){hex, 6};
            t = 6, sc = 0.0f;
        }
        bytes += t == 6;
        piece.n = 0;
        field_bytes(&piece, 1, text.ptr, (size_t)text.len);
        field_f32(&piece, 2, sc);
        field_varint(&piece, 3, t);
        field_bytes(&b, 1, piece.p, piece.n);
    }
    field_varint(&spec, 3, 2); /* model_type BPE */
    field_varint(&spec, 4, (int64_t)n);
    /* byte_fallback: sentencepiece takes it with all 256 byte pieces only */
    if (bytes == 256) field_varint(&spec, 35, 1);
    field_varint(&spec, 40, unk);
    field_varint(&spec, 41, bos < (int64_t)n ? bos : -1);
    field_varint(&spec, 42, eos < (int64_t)n ? eos : -1);
    field_varint(&spec, 43, pad < (int64_t)n ? pad : -1);
    field_bytes(&b, 2, spec.p, spec.n);
    spec.n = 0;
    field_bytes(&spec, 1, "identity", 8);
    field_varint(&spec, 3, 1); /* add_dummy_prefix */
    field_varint(&spec, 4, 0); /* remove_extra_whitespaces */
    field_varint(&spec, 5, 1); /* escape_whitespaces */
    field_bytes(&b, 3, spec.p, spec.n);
    const bool oom = b.oom || piece.oom || spec.oom;
    free(piece.p);
    free(spec.p);
    if (oom) {
        free(b.p);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    *out = b.p;
    *out_len = b.n;
    return AMN_OK;
}

char *hf_rev_base64(const uint8_t *d, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n > (SIZE_MAX / 4) * 3 - 3) return NULL;
    char *o = malloc((n + 2) / 3 * 4 + 1), *p = o;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0) |
                           (i + 2 < n ? d[i + 2] : 0);
        *p++ = a[v >> 18 & 63];
        *p++ = a[v >> 12 & 63];
        *p++ = i + 1 < n ? a[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? a[v & 63] : '=';
    }
    *p = '\0';
    return o;
}
