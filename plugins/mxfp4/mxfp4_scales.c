/* The scales of an expert transposed, shared by the threads that decode it.
 *
 * The output is the input transposed, so a call for output rows k0..k1
 * (a group or two: the converter's 1 MiB chunks are 32-64 rows of a
 * gpt-oss expert, one slice per worker) needs one scale byte from each of
 * the R input rows, 90 bytes apart in the row-major scales: R distinct
 * cache lines per call, as many as the code bytes themselves, and fetched
 * again by every call of the expert (the expert's 518 KB of scales do not
 * stay in L2 beside a chunk of output). Transposed once to [G][R], a
 * call's scales are R contiguous bytes. Slots are filled outside the lock;
 * a call that finds no free slot, or its expert still being filled, reads
 * the scales in place: the bytes written never depend on which. */
#include <pthread.h>
#include <stdlib.h>

#include "mxfp4_kernels.h"

#define SLOTS 4

/* Per-expert scales above this are read in place rather than copied. */
#define MAX_SLOT_BYTES (64u << 20)

typedef enum { SLOT_EMPTY, SLOT_FILLING, SLOT_READY } slot_state;

typedef struct slot {
    slot_state state;
    uint64_t expert;
    unsigned refs;  /* calls reading it */
    uint64_t stamp; /* last acquisition, for eviction */
    uint8_t *t;     /* [groups][rows], allocated on first use */
} slot;

struct mxfp4_scale_cache {
    pthread_mutex_t mu;
    uint64_t rows, groups;
    uint64_t total, done; /* output rows of the tensor, and rows decoded so far */
    uint64_t clock;
    slot s[SLOTS];
};

mxfp4_scale_cache *mxfp4_scale_cache_new(uint64_t experts, uint64_t rows, uint64_t groups) {
    if (rows < 16 || rows > MAX_SLOT_BYTES / groups) return NULL;
    mxfp4_scale_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (pthread_mutex_init(&c->mu, NULL)) {
        free(c);
        return NULL;
    }
    c->rows = rows;
    c->groups = groups;
    c->total = experts * groups * 32;
    return c;
}

static void free_buffers(mxfp4_scale_cache *c) {
    for (int i = 0; i < SLOTS; i++) {
        free(c->s[i].t);
        c->s[i] = (slot){.state = SLOT_EMPTY};
    }
}

void mxfp4_scale_cache_free(mxfp4_scale_cache *c) {
    if (!c) return;
    free_buffers(c);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* The slot for expert e: one ready for it, else a free one to fill; NULL
 * when every slot is in use (or being filled for e). Under c->mu. */
static slot *pick(mxfp4_scale_cache *c, uint64_t e, bool *fill) {
    slot *victim = NULL;
    *fill = false;
    for (int i = 0; i < SLOTS; i++) {
        slot *s = &c->s[i];
        if (s->state != SLOT_EMPTY && s->expert == e) return s->state == SLOT_READY ? s : NULL;
        if (s->refs == 0 && (!victim || s->stamp < victim->stamp)) victim = s;
    }
    if (victim) *fill = true;
    return victim;
}

const uint8_t *mxfp4_scales_acquire(mxfp4_scale_cache *c, const mxfp4_layout *l, uint64_t e) {
    /* Only the x86 kernels read transposed scales (mxfp4_expert_rows_avx2). */
    if (!AMN_SIMD_X86) return NULL;
    bool fill;
    pthread_mutex_lock(&c->mu);
    slot *s = pick(c, e, &fill);
    if (s) {
        s->refs++;
        s->stamp = ++c->clock;
        if (fill) {
            s->state = SLOT_FILLING;
            s->expert = e;
        }
    }
    pthread_mutex_unlock(&c->mu);
    if (!s || !fill) return s ? s->t : NULL;
    const size_t n = (size_t)(c->rows * c->groups);
    if (!s->t) s->t = malloc(n);
    if (AMN_SIMD_X86 && s->t)
        mxfp4_transpose_scales_avx2(l->scales + e * n, c->rows, c->groups, s->t);
    pthread_mutex_lock(&c->mu);
    s->state = s->t ? SLOT_READY : SLOT_EMPTY;
    if (!s->t) s->refs--;
    pthread_mutex_unlock(&c->mu);
    return s->t;
}

void mxfp4_scales_release(mxfp4_scale_cache *c, const uint8_t *t, uint64_t rows) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; t && i < SLOTS; i++)
        if (c->s[i].t == t) c->s[i].refs--;
    /* A whole pass over the tensor (what the converter makes) is over: its
     * buffers go now rather than when the model closes. */
    c->done += rows;
    if (c->done >= c->total) {
        bool busy = false;
        for (int i = 0; i < SLOTS; i++) busy |= c->s[i].refs != 0;
        if (!busy) {
            free_buffers(c);
            c->done = 0;
        }
    }
    pthread_mutex_unlock(&c->mu);
}
