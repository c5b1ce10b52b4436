/* Rounds and slices of a stream of units: see split_internal.h. The quantum
 * comes from a plugin, so no product here may overflow whatever it is. */
#include "split_internal.h"

uint64_t amni_round_units(uint64_t fit, uint64_t quantum, unsigned parts) {
    if (fit == 0) return 1;
    if (quantum <= 1 || quantum > fit) return fit;
    if (parts > 1 && quantum <= fit / parts) return fit - fit % (quantum * parts);
    return fit - fit % quantum;
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
        const uint64_t nq = base + (k < extra); /* quanta of this slice */
        counts[k] = nq > left / quantum ? left : nq * quantum;
        left -= counts[k];
    }
    return parts;
}
