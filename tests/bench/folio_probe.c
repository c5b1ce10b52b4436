/* How the page cache holds a file, as a mapping sees it: the file is mapped
 * and populated 2 MiB at a time (MADV_POPULATE_READ), the thread's page
 * faults counted. Prints the KiB mapped per fault: 64 or less where the
 * file sits in 4 KiB folios (the kernel's fault-around maps 64 KiB of them
 * per fault), up to 2048 where it sits in 2 MiB folios. The same measure
 * core/src/input.c takes on its samples; input_states_bench.sh prints it
 * per warm cell, so "large folios" is checked, not assumed (a file system
 * or kernel without large folios for it gives 64).
 *
 *   folio_probe FILE [-v]     -v: also one letter per 2 MiB, L (at most
 *                             2 faults), m (up to 8), s (up to 16), S
 *
 * Populating reads a file that is not cached: run it on warm files only.
 * Not a test: it measures the machine's page cache. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static long thread_faults(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_THREAD, &ru) != 0) return 0;
    return ru.ru_minflt + ru.ru_majflt;
}

static char letter(long faults) {
    return faults <= 2 ? 'L' : faults <= 8 ? 'm' : faults <= 16 ? 's' : 'S';
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: folio_probe FILE [-v]\n");
        return 2;
    }
    const int verbose = argc > 2 && strcmp(argv[2], "-v") == 0;
    const int fd = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
        perror(argv[1]);
        return 1;
    }
    const size_t size = (size_t)st.st_size, piece = 2u << 20;
    uint8_t *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    long faults = 0;
    for (size_t off = 0; off < size; off += piece) {
        const size_t n = size - off < piece ? size - off : piece;
        const long f0 = thread_faults();
        if (madvise(p + off, n, MADV_POPULATE_READ) != 0) {
            perror("madvise(MADV_POPULATE_READ)");
            return 1;
        }
        const long f = thread_faults() - f0;
        faults += f;
        if (verbose) putchar(letter(f));
    }
    if (verbose) putchar('\n');
    printf("%.0f\n", (double)size / 1024 / (double)(faults ? faults : 1));
    munmap(p, size);
    close(fd);
    return 0;
}
