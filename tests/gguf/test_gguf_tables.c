/* The IQ grids and codebooks carried over from ggml: SHA-256 of each table
 * serialised as little-endian words, as listed in the fixtures README
 * section 7.3, plus the facts that README states about them. */
#include <stdint.h>
#include <string.h>

#include "amn_test.h"
#include "sha256.h"

#include "gguf_tables.h"

/* Hash n words of `size` bytes each, little-endian whatever the host order. */
static void hash_le(const void *table, size_t n, size_t size, char hex[65]) {
    sha256_ctx c;
    sha256_init(&c);
    for (size_t i = 0; i < n; i++) {
        const uint64_t v = size == 8   ? ((const uint64_t *)table)[i]
                           : size == 4 ? ((const uint32_t *)table)[i]
                                       : ((const uint8_t *)table)[i];
        uint8_t le[8];
        for (size_t k = 0; k < size; k++) le[k] = (uint8_t)(v >> (8 * k));
        sha256_update(&c, le, size);
    }
    sha256_hex(&c, hex);
}

static void test_sha256_self(void **state) {
    (void)state;
    char hex[65];
    sha256_of("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    sha256_of("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_of(two, strlen(two), hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void test_table_hashes(void **state) {
    (void)state;
    static const struct {
        const char *name;
        const void *table;
        size_t n, size;
        const char *sha;
    } t[] = {
        {"ksigns_iq2xs", gguf_ksigns_iq2xs, 128, 1,
         "a76742a603f8beca5212ecce0f1f02f11a4887fd2f7c8b15aca0ea3eb3380c31"},
        {"iq2xxs_grid", gguf_iq2xxs_grid, 256, 8,
         "05826b5d3e472a3a78f196be62ac78acf81df0f909626e12ab9fa2a5d490dd54"},
        {"iq2xs_grid", gguf_iq2xs_grid, 512, 8,
         "06e47aaca60b4dc1d9b5a3f34540437058a6b142b4d7a59d5ded769b4d1bf1de"},
        {"iq2s_grid", gguf_iq2s_grid, 1024, 8,
         "e1aa1473412b0552c2174c30ef22ab4073f6a181b85a17056e8249bd2932fd88"},
        {"iq3xxs_grid", gguf_iq3xxs_grid, 256, 4,
         "46e35f5a997efdee6c99ce57854c8a0d4f0ff8ca57e5e8a60c0793ea580acf5d"},
        {"iq3s_grid", gguf_iq3s_grid, 512, 4,
         "bd1af4945a1717c65610b0284e4628b9a1ba3b306fae3a06f6e5f597356e349f"},
        {"iq1s_grid", gguf_iq1s_grid, 2048, 8,
         "07540ffc1aeaf6ad4d97e96b0fcc765aae39671d4ae4a27bbd0e796fde167c6a"},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        char hex[65];
        hash_le(t[i].table, t[i].n, t[i].size, hex);
        if (strcmp(hex, t[i].sha) != 0)
            fail_msg("%s: sha256 %s, want %s", t[i].name, hex, t[i].sha);
    }
}

static void test_table_facts(void **state) {
    (void)state;
    /* KSIGNS[i] = i | parity(i) << 7. */
    for (unsigned i = 0; i < 128; i++)
        assert_int_equal(gguf_ksigns_iq2xs[i], i | (unsigned)(__builtin_popcount(i) & 1) << 7);
    assert_int_equal(gguf_iq2xxs_grid[0], 0x0808080808080808ull);
    assert_int_equal(gguf_iq3xxs_grid[0], 0x04040404u);
    assert_int_equal(gguf_iq3s_grid[0], 0x01010101u);
    assert_int_equal(gguf_iq1s_grid[0], 0xffffffffffffffffull);
    static const int8_t kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};
    static const int8_t km[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    assert_memory_equal(gguf_kvalues_iq4nl, kv, 16);
    assert_memory_equal(gguf_kvalues_mxfp4, km, 16);
    /* Grid bytes are the magnitudes README 7.3 lists. */
    for (size_t i = 0; i < 1024 * 8; i++) {
        const uint8_t b = (uint8_t)(gguf_iq2s_grid[i / 8] >> (8 * (i % 8)));
        assert_true(b == 8 || b == 25 || b == 43);
    }
    for (size_t i = 0; i < 512 * 4; i++) {
        const uint8_t b = (uint8_t)(gguf_iq3s_grid[i / 4] >> (8 * (i % 4)));
        assert_true(b % 2 == 1 && b <= 15);
    }
    for (size_t i = 0; i < 2048 * 8; i++) {
        const int8_t b = (int8_t)(uint8_t)(gguf_iq1s_grid[i / 8] >> (8 * (i % 8)));
        assert_true(b >= -1 && b <= 1);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256_self),
        cmocka_unit_test(test_table_hashes),
        cmocka_unit_test(test_table_facts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
