/* Fuzz target for `amn scan` (amn_scan): the input as a file, scanned with
 * its format probed and again forced to pth and to npz, so the pickle
 * scanner and the ZIP checks see arbitrary bytes. A scan must never crash,
 * and every finding it reports must be complete.
 *
 *   fuzz_scan [iterations] [seed files or directories...] */
#include "fuzz_common.h"

static void scan_one(const char *path, const char *from, const amn_limits *lim) {
    amn_scan_report *r = NULL;
    amn_error err;
    if (amn_scan(fuzz_ctx(), path, from, lim, &r, &err) != AMN_OK) return;
    size_t total = strlen(amn_scan_format(r));
    for (size_t i = 0; i < amn_scan_count(r); i++) {
        const amn_scan_finding *f = amn_scan_get(r, i);
        total += strlen(f->kind) + strlen(f->what) + strlen(f->where);
        if (f->unsafe && !amn_scan_unsafe(r)) abort();
    }
    (void)total;
    amn_scan_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)fuzz_pipeline; /* shared header; this target scans only */
    amn_limits lim;
    fuzz_limits(&lim);
    int fd = memfd_create("amn-fuzz-scan", MFD_CLOEXEC);
    if (fd < 0) return 0;
    if (write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        scan_one(path, NULL, &lim);
        if (amn_ctx_find_format(fuzz_ctx(), "pth")) scan_one(path, "pth", &lim);
        if (amn_ctx_find_format(fuzz_ctx(), "npz")) scan_one(path, "npz", &lim);
    }
    close(fd);
    return 0;
}

#ifndef AMN_LIBFUZZER
int main(int argc, char **argv) {
    int seeds = fuzz_driver_main(argc, argv, NULL);
    if (seeds < 0) return 1;
    printf("fuzz scan: %d seeds: no crash\n", seeds);
    amn_ctx_free(fuzz_ctx());
    return seeds ? 0 : 1;
}
#endif
