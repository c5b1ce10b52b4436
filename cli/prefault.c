/* The heap and stack pages every command writes, faulted in up front with
 * one system call each instead of one trap per 4 KiB page. In a VM a trap
 * costs 10-13 us here, and madvise(MADV_POPULATE_WRITE) brings the pages in
 * for ~0.4 us each: glibc's first heap is ~132 KiB (33 pages, 13 us to
 * populate), of which `amn inspect` alone writes ten pages one by one, and
 * its deepest calls reach three fresh stack pages.
 * (Mapping the code of libc, libamn and json-c the same way, with
 * MADV_POPULATE_READ, saved ten more traps but cost as much as they did.) */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"

/* Above this the heap is not glibc's fresh one (a sanitizer's allocator, a
 * heap grown by a preloaded library): leave it alone. */
#define HEAP_MAX (256u << 10)
/* Stack below main's frame that the deepest calls of a command reach. */
#define STACK_AHEAD (64u << 10)

void cli_prefault(void) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    /* The first malloc sets the heap up; sbrk(0) is then its end. Errors
     * (EINVAL before Linux 5.14) only leave the pages to be faulted. */
    void *probe = malloc(1);
    const uintptr_t lo = (uintptr_t)probe & ~(page - 1), hi = (uintptr_t)sbrk(0);
    if (probe && hi > lo && hi - lo <= HEAP_MAX)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
    free(probe);
    char here;
    const uintptr_t sp = (uintptr_t)&here & ~(page - 1);
    (void)madvise((void *)(sp - STACK_AHEAD), STACK_AHEAD, MADV_POPULATE_WRITE);
}
