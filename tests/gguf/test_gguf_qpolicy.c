/* llama-quantize's per-tensor type rule on llama-shaped models (8, 32, 80
 * layers; GQA 1/4/8; tied embeddings; rows that do not divide 256;
 * experts; the options), table-driven. Every expectation is derived by hand
 * from src/llama-quant.cpp of EAddario/llama.cpp 3af988fab and cites its
 * lines as "lq:N"; the model-level check against llama-quantize's own
 * output is test_gguf_quant_model. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amn_test.h"

#include "amn/error.h"
#include "gguf_qpolicy.h"
#include "gguf_types.h"

enum { MAXT = 1024 };

typedef struct llama_shape {
    int n_layer, n_head, n_head_kv, n_expert;
    int64_t n_embd, n_ff;
    bool tied;
    const char *arch;
} llama_shape;

typedef struct built {
    gguf_qpolicy_model pm;
    gguf_qpolicy_tensor t[MAXT];
    char names[MAXT][64];
    size_t n;
    size_t order[MAXT];
    uint32_t types[MAXT];
    amn_error err;
} built;

static void add(built *b, const char *name, int64_t ne0, int64_t ne1, int64_t ne2, uint32_t type) {
    assert_true(b->n < MAXT);
    snprintf(b->names[b->n], sizeof b->names[0], "%s", name);
    b->t[b->n] = (gguf_qpolicy_tensor){b->names[b->n], type, {ne0, ne1, ne2, 1}};
    b->n++;
}

/* A llama GGUF's tensors in convert_hf_to_gguf's file order (F16 weights,
 * F32 norms): the walk order is llama-quantize's own, not this one. */
static built *build(const llama_shape *s) {
    built *b = calloc(1, sizeof *b);
    assert_non_null(b);
    b->pm = (gguf_qpolicy_model){.arch = s->arch ? s->arch : "llama",
                                 .n_layer = (uint32_t)s->n_layer,
                                 .n_head = (uint32_t)s->n_head,
                                 .n_head_kv = (uint32_t)s->n_head_kv,
                                 .n_expert = (uint32_t)s->n_expert};
    const int64_t e = s->n_embd, kv = s->n_embd * s->n_head_kv / s->n_head, vocab = 32000;
    add(b, "token_embd.weight", e, vocab, 1, GGUF_TYPE_F16);
    char n[64];
    for (int i = 0; i < s->n_layer; i++) {
#define L(suffix) (snprintf(n, sizeof n, "blk.%d.%s", i, suffix), n)
        add(b, L("attn_norm.weight"), e, 1, 1, GGUF_TYPE_F32);
        add(b, L("attn_q.weight"), e, e, 1, GGUF_TYPE_F16);
        add(b, L("attn_k.weight"), e, kv, 1, GGUF_TYPE_F16);
        add(b, L("attn_v.weight"), e, kv, 1, GGUF_TYPE_F16);
        add(b, L("attn_output.weight"), e, e, 1, GGUF_TYPE_F16);
        add(b, L("ffn_norm.weight"), e, 1, 1, GGUF_TYPE_F32);
        if (s->n_expert > 1) {
            add(b, L("ffn_gate_inp.weight"), e, s->n_expert, 1, GGUF_TYPE_F32);
            add(b, L("ffn_gate_exps.weight"), e, s->n_ff, s->n_expert, GGUF_TYPE_F16);
            add(b, L("ffn_up_exps.weight"), e, s->n_ff, s->n_expert, GGUF_TYPE_F16);
            add(b, L("ffn_down_exps.weight"), s->n_ff, e, s->n_expert, GGUF_TYPE_F16);
        } else {
            add(b, L("ffn_gate.weight"), e, s->n_ff, 1, GGUF_TYPE_F16);
            add(b, L("ffn_up.weight"), e, s->n_ff, 1, GGUF_TYPE_F16);
            add(b, L("ffn_down.weight"), s->n_ff, e, 1, GGUF_TYPE_F16);
        }
#undef L
    }
    add(b, "output_norm.weight", e, 1, 1, GGUF_TYPE_F32);
    if (!s->tied) add(b, "output.weight", e, vocab, 1, GGUF_TYPE_F16);
    return b;
}

static int run(built *b, const gguf_qpolicy_options *o) {
    return gguf_qpolicy_choose(&b->pm, b->t, b->n, o, b->order, b->types, &b->err);
}

static void run_ok(built *b, const gguf_qpolicy_options *o) {
    if (run(b, o) != AMN_OK) fail_msg("policy failed: %s", b->err.msg);
}

static uint32_t type_of(const built *b, const char *name) {
    for (size_t i = 0; i < b->n; i++)
        if (strcmp(b->t[i].name, name) == 0) return b->types[i];
    fail_msg("no tensor %s", name);
    return GGUF_TYPE_COUNT;
}

static uint32_t layer_type(const built *b, int layer, const char *suffix) {
    char n[64];
    snprintf(n, sizeof n, "blk.%d.%s", layer, suffix);
    return type_of(b, n);
}

#define EXPECT(b, tname, want)                                                                     \
    do {                                                                                           \
        const uint32_t got_ = type_of(b, tname);                                                   \
        if (got_ != (want))                                                                        \
            fail_msg("%s: %s, expected %s", tname, gguf_type_traits_get(got_)->name,               \
                     gguf_type_traits_get(want)->name);                                            \
    } while (0)

#define EXPECT_L(b, layer, suffix, want)                                                           \
    do {                                                                                           \
        const uint32_t got_ = layer_type(b, layer, suffix);                                        \
        if (got_ != (want))                                                                        \
            fail_msg("blk.%d.%s: %s, expected %s", layer, suffix,                                  \
                     gguf_type_traits_get(got_)->name, gguf_type_traits_get(want)->name);          \
    } while (0)

/* lq:430-432 */
static bool more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static const llama_shape L8_GQA1 = {8, 32, 32, 0, 4096, 11008, false, NULL};
static const llama_shape L32_GQA4 = {32, 32, 8, 0, 4096, 14336, false, NULL};
static const llama_shape L80_GQA8 = {80, 64, 8, 0, 8192, 28672, false, NULL};
static const llama_shape L80_GQA1 = {80, 64, 64, 0, 8192, 22016, false, NULL};

/* ---- mixes by layer -------------------------------------------------------- */

static void test_q4_k_m_8_layers(void **state) {
    (void)state;
    built *b = build(&L8_GQA1);
    const gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    /* lq:452,470-471: output -> Q6_K; lq:487-504: token_embd keeps Q4_K. */
    EXPECT(b, "output.weight", GGUF_TYPE_Q6_K);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q4_K);
    EXPECT(b, "output_norm.weight", GGUF_TYPE_F32); /* lq:294: 1-D stays */
    for (int i = 0; i < 8; i++) {
        /* lq:552-553 and lq:608-614: Q6_K where use_more_bits, i.e. 0, 3, 6, 7. */
        const uint32_t hi = more_bits(i, 8) ? GGUF_TYPE_Q6_K : GGUF_TYPE_Q4_K;
        assert_int_equal(more_bits(i, 8), i == 0 || i == 3 || i == 6 || i == 7);
        EXPECT_L(b, i, "attn_v.weight", hi);
        EXPECT_L(b, i, "ffn_down.weight", hi);
        EXPECT_L(b, i, "attn_q.weight", GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "attn_k.weight", GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "attn_output.weight", GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "ffn_gate.weight", GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "ffn_up.weight", GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "attn_norm.weight", GGUF_TYPE_F32);
    }
    free(b);
}

static void test_q3_k_m_32_layers_gqa4(void **state) {
    (void)state;
    built *b = build(&L32_GQA4);
    const gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q3_K_M);
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_Q6_K);     /* lq:470-471 */
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q3_K); /* lq:487-504: no Q3_K_M case */
    for (int i = 0; i < 32; i++) {
        /* lq:545-546: the first two attn_v Q5_K, then Q4_K (not 70B: lq:555). */
        EXPECT_L(b, i, "attn_v.weight", i < 2 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K);
        /* lq:596-600: i < 32/16 -> Q5_K, else (not falcon) Q4_K. */
        EXPECT_L(b, i, "ffn_down.weight", i < 2 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "attn_output.weight", GGUF_TYPE_Q4_K); /* lq:643 */
        EXPECT_L(b, i, "attn_q.weight", GGUF_TYPE_Q3_K);
        EXPECT_L(b, i, "attn_k.weight", GGUF_TYPE_Q3_K);
        EXPECT_L(b, i, "ffn_gate.weight", GGUF_TYPE_Q3_K);
    }
    free(b);
}

static void test_iq4_xs_32_layers_gqa4(void **state) {
    (void)state;
    built *b = build(&L32_GQA4);
    const gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_IQ4_XS);
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_Q6_K);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_IQ4_XS);
    for (int i = 0; i < 32; i++) {
        EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q5_K); /* lq:549-550: GQA >= 4 */
        /* lq:616-618: i < 32/8 without an imatrix. */
        EXPECT_L(b, i, "ffn_down.weight", i < 4 ? GGUF_TYPE_Q5_K : GGUF_TYPE_IQ4_XS);
        EXPECT_L(b, i, "attn_output.weight", GGUF_TYPE_IQ4_XS);
    }
    free(b);
}

static void test_q4_k_m_32_layers_gqa4(void **state) {
    (void)state;
    built *b = build(&L32_GQA4);
    const gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    for (int i = 0; i < 32; i++) {
        /* lq:430-432 with n = 32: i < 4, i >= 28, or (i - 4) % 3 == 2. */
        const bool more = i < 4 || i >= 28 || (i - 4) % 3 == 2;
        EXPECT_L(b, i, "attn_v.weight", more ? GGUF_TYPE_Q6_K : GGUF_TYPE_Q4_K);
        EXPECT_L(b, i, "ffn_down.weight", more ? GGUF_TYPE_Q6_K : GGUF_TYPE_Q4_K);
    }
    free(b);
}

/* 80 layers: GQA makes the llama model "70B" (src/models/llama.cpp: 80
 * layers, n_head != n_head_kv), whose attn_v Q3_K / Q4_K become Q5_K
 * (lq:555-560); without GQA it is "65B" and keeps them. */
static void test_80_layers(void **state) {
    (void)state;
    built *b = build(&L80_GQA8);
    gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q2_K);
    run_ok(b, &o);
    for (int i = 0; i < 80; i++) {
        EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q5_K);      /* lq:531 Q4_K, lq:559 -> Q5_K */
        EXPECT_L(b, i, "ffn_down.weight", GGUF_TYPE_Q3_K);    /* lq:589 */
        EXPECT_L(b, i, "attn_output.weight", GGUF_TYPE_Q3_K); /* lq:641 */
        EXPECT_L(b, i, "attn_q.weight", GGUF_TYPE_Q2_K);
    }
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q2_K);
    EXPECT(b, "output.weight", GGUF_TYPE_Q6_K);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_S);
    run_ok(b, &o);
    for (int i = 0; i < 80; i++) {
        /* lq:554: i < 4 -> Q5_K; the rest Q4_K -> Q5_K (lq:559). */
        EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q5_K);
        /* lq:620-621: i < 80/8 -> Q5_K. */
        EXPECT_L(b, i, "ffn_down.weight", i < 10 ? GGUF_TYPE_Q5_K : GGUF_TYPE_Q4_K);
    }
    free(b);
    b = build(&L80_GQA1);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q2_K);
    run_ok(b, &o);
    for (int i = 0; i < 80; i++) EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q3_K); /* lq:531 */
    free(b);
}

/* ---- tied embeddings, shapes, fallbacks ----------------------------------- */

static void test_tied_embeddings(void **state) {
    (void)state;
    llama_shape s = L8_GQA1;
    s.tied = true;
    built *b = build(&s);
    gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    /* lq:182, 865-867: no output.weight, so token_embd takes the output's
     * rule (lq:452, 470-471). */
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q6_K);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q8_0);
    run_ok(b, &o);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q8_0); /* lq:470: already Q8_0 */
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_0);
    run_ok(b, &o);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q6_K);
    free(b);
}

static void test_rows_not_divisible(void **state) {
    (void)state;
    /* n_ff 11040 = 43 * 256 + 32: ffn_down rows divide 32, not 256. */
    llama_shape s = L8_GQA1;
    s.n_ff = 11040;
    built *b = build(&s);
    gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    for (int i = 0; i < 8; i++) /* lq:608-614 Q6_K -> lq:402 Q8_0; Q4_K -> lq:400 Q5_0 */
        EXPECT_L(b, i, "ffn_down.weight", more_bits(i, 8) ? GGUF_TYPE_Q8_0 : GGUF_TYPE_Q5_0);
    EXPECT_L(b, 0, "ffn_up.weight", GGUF_TYPE_Q4_K); /* rows of n_embd: unaffected */
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q5_K_S);
    run_ok(b, &o);
    EXPECT_L(b, 3, "ffn_down.weight", GGUF_TYPE_Q5_1); /* lq:401 */
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q3_K_S);
    run_ok(b, &o);
    EXPECT_L(b, 3, "ffn_down.weight", GGUF_TYPE_Q4_0); /* lq:397-399 */
    o = gguf_qpolicy_defaults(GGUF_FTYPE_IQ4_XS);
    run_ok(b, &o);
    EXPECT_L(b, 0, "ffn_down.weight", GGUF_TYPE_Q5_1);   /* lq:616-618 Q5_K, lq:401 */
    EXPECT_L(b, 5, "ffn_down.weight", GGUF_TYPE_IQ4_NL); /* lq:393-394 */
    free(b);

    /* Rows of 1000 (not a multiple of 32): F16 (lq:407-417), or no fallback
     * at all for a 32-element type (lq:403-405). */
    s.n_ff = 1000;
    b = build(&s);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    EXPECT_L(b, 2, "ffn_down.weight", GGUF_TYPE_F16);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q8_0);
    assert_int_equal(run(b, &o), AMN_E_UNSUPPORTED);
    assert_non_null(strstr(b->err.msg, "no tensor type fallback is defined for type Q8_0"));
    free(b);

    /* n_embd 4000: the output's rows do not divide 256 -> Q8_0 (lq:462-463). */
    s = L8_GQA1;
    s.n_embd = 4000;
    b = build(&s);
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_Q8_0);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q5_0); /* Q4_K, lq:400 */
    EXPECT_L(b, 1, "attn_q.weight", GGUF_TYPE_Q5_0);
    free(b);
}

/* ---- options ----------------------------------------------------------------- */

static void test_options(void **state) {
    (void)state;
    built *b = build(&L8_GQA1);
    gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    o.pure = true; /* lq:712: no mix; output too */
    run_ok(b, &o);
    for (size_t i = 0; i < b->n; i++)
        assert_int_equal(b->types[i],
                         strstr(b->t[i].name, "norm") ? GGUF_TYPE_F32 : GGUF_TYPE_Q4_K);

    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    o.output_tensor_type = GGUF_TYPE_Q8_0;   /* lq:686-688 */
    o.token_embedding_type = GGUF_TYPE_Q5_0; /* lq:683-685 */
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_Q8_0);
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q5_0);

    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    o.leave_output_tensor = true; /* lq:304: output keeps its F16 */
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_F16);

    /* --tensor-type: patterns lowered, searched in the name, first match
     * wins (lq:696-709); a matched tensor skips the mix, so its counter does
     * not advance: with layers 0-3 of ffn_down overridden, layer 4 is the
     * rule's first ffn_down (lq:587, 630): use_more_bits(0, 8) -> Q6_K. */
    const gguf_qpolicy_override ov[] = {
        {"ATTN_V", GGUF_TYPE_Q8_0},
        {"blk\\.[0-3]\\.ffn_down", GGUF_TYPE_Q5_1},
        {"ffn_up", GGUF_TYPE_Q4_0},
    };
    o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    o.overrides = ov;
    o.n_overrides = 3;
    run_ok(b, &o);
    for (int i = 0; i < 8; i++) {
        EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q8_0);
        EXPECT_L(b, i, "ffn_up.weight", GGUF_TYPE_Q4_0);
    }
    for (int i = 0; i < 4; i++) EXPECT_L(b, i, "ffn_down.weight", GGUF_TYPE_Q5_1);
    /* counters 0..3 for layers 4..7: more_bits(c, 8) is c == 0 or 3 */
    EXPECT_L(b, 4, "ffn_down.weight", GGUF_TYPE_Q6_K);
    EXPECT_L(b, 5, "ffn_down.weight", GGUF_TYPE_Q4_K);
    EXPECT_L(b, 6, "ffn_down.weight", GGUF_TYPE_Q4_K);
    EXPECT_L(b, 7, "ffn_down.weight", GGUF_TYPE_Q6_K);

    const gguf_qpolicy_override bad[] = {{"attn_(v", GGUF_TYPE_Q8_0}};
    o.overrides = bad;
    o.n_overrides = 1;
    assert_int_equal(run(b, &o), AMN_E_INVALID);
    assert_non_null(strstr(b->err.msg, "bad pattern"));

    /* Non-quantized file types: 2-D weights to the type, no mix (lq:693). */
    o = gguf_qpolicy_defaults(GGUF_FTYPE_BF16);
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_BF16);
    EXPECT_L(b, 0, "attn_v.weight", GGUF_TYPE_BF16);
    EXPECT_L(b, 0, "ffn_norm.weight", GGUF_TYPE_F32);
    o = gguf_qpolicy_defaults(99);
    assert_int_equal(run(b, &o), AMN_E_INVALID);
    assert_non_null(strstr(b->err.msg, "invalid output file type 99"));
    free(b);
}

/* ---- refused without an importance matrix ---------------------------------- */

static void test_refused_without_imatrix(void **state) {
    (void)state;
    built *b = build(&L8_GQA1);
    /* The walk reaches output.weight, output_norm, token_embd (all exempt or
     * not quantized: lq:786) and then blk.0.attn_k, the first tensor whose
     * type needs an imatrix (lq:785-804, 1062-1073). */
    const struct {
        int ftype;
        uint32_t target;
        const char *cite;
    } cases[] = {
        {GGUF_FTYPE_IQ2_XXS, GGUF_TYPE_IQ2_XXS, "lq:839"},
        {GGUF_FTYPE_IQ2_XS, GGUF_TYPE_IQ2_XS, "lq:840"},
        {GGUF_FTYPE_IQ2_S, GGUF_TYPE_IQ2_XS, "lq:841"},
        {GGUF_FTYPE_IQ2_M, GGUF_TYPE_IQ2_S, "lq:842"},
        {GGUF_FTYPE_IQ1_S, GGUF_TYPE_IQ1_S, "lq:844"},
        {GGUF_FTYPE_IQ1_M, GGUF_TYPE_IQ1_M, "lq:845"},
        {GGUF_FTYPE_IQ3_XXS, GGUF_TYPE_IQ2_S, "lq:576-577"},
        {GGUF_FTYPE_IQ3_XS, GGUF_TYPE_IQ3_XXS, "lq:573-574"},
        {GGUF_FTYPE_Q2_K_S, GGUF_TYPE_Q2_K, "lq:797-800"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const gguf_qpolicy_options o = gguf_qpolicy_defaults(cases[i].ftype);
        assert_int_equal(run(b, &o), AMN_E_UNSUPPORTED);
        char want[160];
        snprintf(want, sizeof want, "offending tensor: blk.0.attn_k.weight, target type: %s",
                 gguf_type_traits_get(cases[i].target)->name);
        if (!strstr(b->err.msg, "requires an importance matrix") || !strstr(b->err.msg, want))
            fail_msg("%s (%s): %s", gguf_ftype_name(cases[i].ftype), cases[i].cite, b->err.msg);
    }
    free(b);
}

/* ---- experts ------------------------------------------------------------------ */

static void test_experts(void **state) {
    (void)state;
    const llama_shape s = {32, 32, 8, 8, 4096, 14336, false, NULL}; /* 8x7B-like */
    built *b = build(&s);
    gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q4_K_M);
    run_ok(b, &o);
    for (int i = 0; i < 32; i++) {
        EXPECT_L(b, i, "attn_v.weight", GGUF_TYPE_Q8_0);      /* lq:561-565 */
        EXPECT_L(b, i, "attn_k.weight", GGUF_TYPE_Q8_0);      /* lq:568-572 */
        EXPECT_L(b, i, "attn_output.weight", GGUF_TYPE_Q5_K); /* lq:633-639 */
        EXPECT_L(b, i, "ffn_gate_inp.weight", GGUF_TYPE_F32); /* lq:308 */
        /* lq:434-446: the layer from the name; lq:613 */
        EXPECT_L(b, i, "ffn_down_exps.weight", more_bits(i, 32) ? GGUF_TYPE_Q6_K : GGUF_TYPE_Q4_K);
    }
    o = gguf_qpolicy_defaults(GGUF_FTYPE_MXFP4_MOE);
    run_ok(b, &o);
    EXPECT(b, "output.weight", GGUF_TYPE_Q8_0);            /* lq:459-460 */
    EXPECT(b, "token_embd.weight", GGUF_TYPE_Q8_0);        /* lq:474-486, before lq:487 */
    EXPECT_L(b, 5, "ffn_up_exps.weight", GGUF_TYPE_MXFP4); /* lq:482-483: ne[2] > 1 */
    EXPECT_L(b, 5, "attn_q.weight", GGUF_TYPE_Q8_0);       /* lq:485 */
    free(b);
}

/* ---- the walk order ------------------------------------------------------------ */

static void test_walk_order(void **state) {
    (void)state;
    built *b = build(&L32_GQA4);
    const gguf_qpolicy_options o = gguf_qpolicy_defaults(GGUF_FTYPE_Q8_0);
    run_ok(b, &o);
    /* weight_name_comparer (src/llama-model-loader.h): the layer number from
     * "blk.%d." first (-1 for the others), then the name. */
    const char *head[] = {
        "output.weight",         "output_norm.weight",     "token_embd.weight",
        "blk.0.attn_k.weight",   "blk.0.attn_norm.weight", "blk.0.attn_output.weight",
        "blk.0.attn_q.weight",   "blk.0.attn_v.weight",    "blk.0.ffn_down.weight",
        "blk.0.ffn_gate.weight", "blk.0.ffn_norm.weight",  "blk.0.ffn_up.weight",
        "blk.1.attn_k.weight"};
    for (size_t k = 0; k < sizeof head / sizeof head[0]; k++)
        assert_string_equal(b->t[b->order[k]].name, head[k]);
    /* blk.9 before blk.10 (numbers, not strings). */
    size_t at9 = 0, at10 = 0;
    for (size_t k = 0; k < b->n; k++) {
        if (strcmp(b->t[b->order[k]].name, "blk.9.ffn_up.weight") == 0) at9 = k;
        if (strcmp(b->t[b->order[k]].name, "blk.10.attn_k.weight") == 0) at10 = k;
    }
    assert_int_equal(at10, at9 + 1);
    assert_string_equal(b->t[b->order[b->n - 1]].name, "blk.31.ffn_up.weight");
    free(b);
}

static void test_ftype_names(void **state) {
    (void)state;
    int f;
    assert_true(gguf_ftype_parse("q4_k_m", &f));
    assert_int_equal(f, GGUF_FTYPE_Q4_K_M);
    assert_true(gguf_ftype_parse("Q4_K", &f)); /* alias */
    assert_int_equal(f, GGUF_FTYPE_Q4_K_M);
    assert_string_equal(gguf_ftype_name(GGUF_FTYPE_Q4_K_M), "Q4_K_M");
    assert_true(gguf_ftype_parse("mxfp4_moe", &f));
    assert_int_equal(f, 38);
    assert_true(gguf_ftype_parse("Q1_0", &f));
    assert_int_equal(f, 40);
    assert_int_equal(gguf_ftype_default_type(f), GGUF_TYPE_Q1_0);
    assert_false(gguf_ftype_parse("Q4_K_XL", &f));
    /* COPY is LLAMA_FTYPE_ALL_F32 with only_copy; file type 0 is still "F32" */
    assert_true(gguf_ftype_parse("copy", &f));
    assert_int_equal(f, GGUF_FTYPE_ALL_F32);
    assert_string_equal(gguf_ftype_name(GGUF_FTYPE_ALL_F32), "F32");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_k_m_8_layers),
        cmocka_unit_test(test_q3_k_m_32_layers_gqa4),
        cmocka_unit_test(test_iq4_xs_32_layers_gqa4),
        cmocka_unit_test(test_q4_k_m_32_layers_gqa4),
        cmocka_unit_test(test_80_layers),
        cmocka_unit_test(test_tied_embeddings),
        cmocka_unit_test(test_rows_not_divisible),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_refused_without_imatrix),
        cmocka_unit_test(test_experts),
        cmocka_unit_test(test_walk_order),
        cmocka_unit_test(test_ftype_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
