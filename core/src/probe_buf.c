#include "probe_buf.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* Below this a calloc touches few enough pages that a mapping costs more. */
#define PROBE_BUF_MAP_MIN (16u << 10)

int amni_probe_buf_alloc(amni_probe_buf *b, size_t size, amn_error *err) {
    *b = (amni_probe_buf){.size = size};
    if (size >= PROBE_BUF_MAP_MIN) {
        size_t page = (size_t)sysconf(_SC_PAGESIZE);
        size_t len = (size + page - 1) / page * page;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p != MAP_FAILED) {
            b->data = p;
            b->mapped = len;
            return AMN_OK;
        }
    }
    b->data = calloc(1, size ? size : 1);
    if (!b->data) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    return AMN_OK;
}

void amni_probe_buf_free(amni_probe_buf *b) {
    if (b->mapped)
        munmap(b->data, b->mapped);
    else
        free(b->data);
    *b = (amni_probe_buf){0};
}
