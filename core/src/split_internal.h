/* Private to core: how a stream of output rows (or encode units) is cut into
 * rounds and each round into one slice per worker. Pure functions, so the
 * rules are tested on their own (tests/unit/test_split.c). */
#ifndef AMN_SPLIT_INTERNAL_H
#define AMN_SPLIT_INTERNAL_H

#include <stdint.h>

/* Units per round when a round's buffer holds `fit` units and `parts`
 * workers share it: `fit` rounded down to a multiple of quantum x parts
 * (a scheme's row_quantum; 0 and 1 mean any), so every worker gets as many
 * whole quanta; else of `quantum`; else `fit` (less than a quantum fits);
 * never 0. */
uint64_t amni_round_units(uint64_t fit, uint64_t quantum, unsigned parts);

/* Cut n units into at most `parts` consecutive slices, as even as whole
 * quanta allow: every slice but the last is a multiple of `quantum`, none
 * is empty. Writes the slice sizes to counts[] and returns how many. */
unsigned amni_split_units(uint64_t n, unsigned parts, uint64_t quantum, uint64_t *counts);

#endif
