/* Fuzz target for the pth plugin's pickle VM and what reads its result: the
 * input is the data.pkl of a checkpoint this harness wraps in a valid stored
 * ZIP (CRC-32 computed, so mutations reach the pickle rather than dying at
 * the CRC check), beside storages data/0 .. data/15 of 1 KiB each. The
 * archive then runs through the whole pipeline, forced to format "pth".
 *
 *   fuzz_pth [iterations] [data.pkl files or directories...] */
#include <zlib.h>

#include "fuzz_common.h"

#define N_STORAGES   16
#define STORAGE_SIZE 1024

typedef struct zip_out {
    uint8_t *p;
    size_t n, cap;
    uint8_t cd[64 * 1024];
    size_t cd_n;
    uint16_t count;
} zip_out;

static void put(uint8_t *d, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) d[i] = (uint8_t)(v >> (8 * i));
}

static int zip_add(zip_out *z, const char *name, const uint8_t *data, size_t n) {
    size_t nl = strlen(name);
    if (z->n + 30 + nl + n > z->cap || z->cd_n + 46 + nl > sizeof z->cd) return -1;
    uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), data, (uInt)n);
    uint8_t *h = z->p + z->n;
    memset(h, 0, 30);
    put(h, 0x04034b50, 4);
    put(h + 4, 20, 2);
    put(h + 14, crc, 4);
    put(h + 18, n, 4);
    put(h + 22, n, 4);
    put(h + 26, nl, 2);
    memcpy(h + 30, name, nl);
    if (n) memcpy(h + 30 + nl, data, n);
    uint8_t *c = z->cd + z->cd_n;
    memset(c, 0, 46);
    put(c, 0x02014b50, 4);
    put(c + 4, 20, 2);
    put(c + 6, 20, 2);
    put(c + 16, crc, 4);
    put(c + 20, n, 4);
    put(c + 24, n, 4);
    put(c + 28, nl, 2);
    put(c + 42, z->n, 4);
    memcpy(c + 46, name, nl);
    z->cd_n += 46 + nl;
    z->n += 30 + nl + n;
    z->count++;
    return 0;
}

static int zip_finish(zip_out *z) {
    if (z->n + z->cd_n + 22 > z->cap) return -1;
    size_t cd_off = z->n;
    memcpy(z->p + z->n, z->cd, z->cd_n);
    z->n += z->cd_n;
    uint8_t *e = z->p + z->n;
    memset(e, 0, 22);
    put(e, 0x06054b50, 4);
    put(e + 8, z->count, 2);
    put(e + 10, z->count, 2);
    put(e + 12, z->cd_n, 4);
    put(e + 16, cd_off, 4);
    z->n += 22;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0; /* a pickle; keep the archive small */
    static zip_out z;
    static uint8_t storage[STORAGE_SIZE];
    size_t cap = size + N_STORAGES * (STORAGE_SIZE + 128) + 4096;
    uint8_t *p = malloc(cap);
    if (!p) return 0;
    z.p = p;
    z.n = 0;
    z.cap = cap;
    z.cd_n = 0;
    z.count = 0;
    for (size_t i = 0; i < sizeof storage; i++) storage[i] = (uint8_t)(i * 37 + 11);
    int ok = zip_add(&z, "archive/data.pkl", data, size) == 0 &&
             zip_add(&z, "archive/byteorder", (const uint8_t *)"little", 6) == 0;
    for (int i = 0; ok && i < N_STORAGES; i++) {
        char name[32];
        snprintf(name, sizeof name, "archive/data/%d", i);
        ok = zip_add(&z, name, storage, sizeof storage) == 0;
    }
    if (ok && zip_finish(&z) == 0) fuzz_pipeline(z.p, z.n, "pth");
    free(p);
    return 0;
}

#ifndef AMN_LIBFUZZER
int main(int argc, char **argv) {
    int seeds = fuzz_driver_main(argc, argv, NULL);
    printf("fuzz pth: %d seeds: no crash\n", seeds > 0 ? seeds : 0);
    amn_ctx_free(fuzz_ctx());
    return seeds > 0 ? 0 : 1;
}
#endif
