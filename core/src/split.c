/* Rounds and slices of a stream of units: see split_internal.h. */
#include "split_internal.h"

uint64_t amni_round_units(uint64_t fit, uint64_t quantum, unsigned parts) {
    if (fit == 0) return 1;
    if (quantum <= 1) return fit;
    const uint64_t all = quantum * (parts ? parts : 1);
    if (fit >= all) return fit - fit % all;
    if (fit >= quantum) return fit - fit % quantum;
    return fit;
}

unsigned amni_split_units(uint64_t n, unsigned parts, uint64_t quantum, uint64_t *counts) {
    if (quantum < 1) quantum = 1;
    if (parts < 1) parts = 1;
    /* Whole quanta, the last one maybe short. */
    const uint64_t quanta = n / quantum + (n % quantum != 0);
    if (quanta < parts) parts = (unsigned)quanta;
    if (parts == 0) return 0;
    const uint64_t base = quanta / parts, extra = quanta % parts;
    uint64_t left = n;
    for (unsigned k = 0; k < parts; k++) {
        const uint64_t want = (base + (k < extra)) * quantum;
        counts[k] = want < left ? want : left;
        left -= counts[k];
    }
    return parts;
}
