/* pickle_vm.h — a minimal, allowlisted pickle machine for PyTorch data.pkl.
 *
 * It runs protocols 0-5 opcodes over a byte buffer and builds a tree of
 * plain values. GLOBAL / STACK_GLOBAL resolve only names in a fixed table
 * (tensor rebuild functions, storage classes, dtypes, OrderedDict, ...);
 * anything else is AMN_E_DISALLOWED naming the global. Nothing is ever
 * imported or called: REDUCE on an allowlisted name runs a small C handler
 * that builds a value. The VM is iterative; nesting is bounded by
 * limits->max_depth marks and, for readers of the result, by pk_* walkers
 * that take a depth argument.
 */
#ifndef AMN_PICKLE_VM_H
#define AMN_PICKLE_VM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amn/dtype.h"
#include "amn/error.h"
#include "amn/format.h"
#include "amn/tensor.h"
#include "amn/kit/pickle_allow.h"

typedef enum pv_kind {
    PV_NONE,
    PV_BOOL,
    PV_INT,
    PV_BIGINT, /* LONG1/LONG4 wider than 64 bits: kept only as a marker */
    PV_FLOAT,
    PV_STR,
    PV_BYTES,
    PV_TUPLE,
    PV_LIST,
    PV_SET,
    PV_DICT,
    PV_GLOBAL,
    PV_STORAGE,
    PV_TENSOR,
    PV_COMPLEX, /* builtins.complex(re, im) */
    PV_OPAQUE,  /* an accepted value with no tensor data (sparse, meta): a text */
} pv_kind;

typedef struct pv pv;

typedef struct pv_storage {
    const char *key; /* NUL-terminated */
    amn_dtype dtype; /* INVALID for untyped (bytes) or unsupported storages */
    bool untyped;
    const char *type_name; /* "torch.FloatStorage" */
    uint64_t numel;
} pv_storage;

typedef struct pv_tensor {
    const pv *storage; /* a PV_STORAGE */
    amn_dtype dtype;   /* INVALID when the storage type is not supported */
    uint64_t offset;   /* in elements */
    uint32_t ndim;
    uint64_t shape[AMN_MAX_DIMS];
    int64_t stride[AMN_MAX_DIMS];
} pv_tensor;

struct pv {
    pv_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *s; /* NUL-terminated copy */
            size_t len;
        } str;
        uint64_t bytes_len; /* PV_BYTES: contents are not kept */
        struct {
            double re, im;
        } cplx;
        const char *text; /* PV_OPAQUE */
        struct {
            pv **items;
            size_t n, cap;
        } seq; /* TUPLE, LIST, SET */
        struct {
            pv **keys, **vals;
            size_t n, cap;
        } dict;
        struct {
            pk_global_id id;
            amn_dtype dtype;  /* PG_STORAGE, PG_DTYPE */
            bool untyped;     /* PG_STORAGE */
            const char *name; /* "module.name" */
        } global;
        pv_storage storage;
        pv_tensor tensor;
    } u;
};

typedef struct pk_vm pk_vm;

/* Run the pickle in p[0..n) and return the VM holding the result (its
 * root value stays valid until pk_free). The pickle must end the buffer:
 * bytes after its STOP (a second pickle) are AMN_E_DISALLOWED. */
int pk_run(const uint8_t *p, size_t n, const amn_limits *lim, pk_vm **out, amn_error *err);
const pv *pk_root(const pk_vm *vm);
/* The storage keys the pickle's persistent ids named, in order (repeats
 * included). */
size_t pk_storage_count(const pk_vm *vm);
const char *pk_storage_key(const pk_vm *vm, size_t i);
void pk_free(pk_vm *vm);

#endif
