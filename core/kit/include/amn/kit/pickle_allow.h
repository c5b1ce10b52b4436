/* amn/kit/pickle_allow.h — plugin kit: the pickle globals torch.load
 * (weights_only=True) allows, shared by the pth plugin's pickle VM and the
 * pickle scanner (pth checkpoints, npz object arrays). A name here is only
 * ever compared, never imported. */
#ifndef AMN_KIT_PICKLE_ALLOW_H
#define AMN_KIT_PICKLE_ALLOW_H

#include <stdbool.h>
#include <stddef.h>

#include "amn/dtype.h"

typedef enum pk_global_id {
    PG_ORDERED_DICT,
    PG_REBUILD_TENSOR,    /* torch._utils._rebuild_tensor (storage, offset, size, stride) */
    PG_REBUILD_TENSOR_V2, /* ... requires_grad, hooks[, metadata] */
    PG_REBUILD_TENSOR_V3, /* ... requires_grad, hooks, dtype[, metadata]: untyped storage */
    PG_REBUILD_PARAMETER, /* _rebuild_parameter / _rebuild_parameter_with_state */
    PG_REBUILD_FROM_TYPE_V2,
    PG_PARAMETER,          /* torch.nn.parameter.Parameter */
    PG_TENSOR_TYPE,        /* torch.Tensor / torch._tensor.Tensor (a _rebuild_from_type_v2 type) */
    PG_STORAGE,            /* torch.FloatStorage ..., torch.UntypedStorage */
    PG_DTYPE,              /* torch.float32 ... */
    PG_SIZE,               /* torch.Size */
    PG_DEVICE,             /* torch.device */
    PG_COUNTER,            /* collections.Counter */
    PG_ENCODE,             /* _codecs.encode: bytes under protocol 2 */
    PG_BYTEARRAY,          /* builtins.bytearray */
    PG_SET,                /* builtins.set */
    PG_COMPLEX,            /* builtins.complex */
    PG_GET_LAYOUT,         /* torch.serialization._get_layout */
    PG_REBUILD_SPARSE,     /* _rebuild_sparse_tensor(layout, data) */
    PG_REBUILD_SPARSE_CSR, /* _rebuild_sparse_csr_tensor (torch < 2.0) */
    PG_REBUILD_QTENSOR,    /* quantized tensors: resolvable, refused on use */
    PG_REBUILD_META,       /* _rebuild_meta_tensor_no_storage: no data */
    PG_REBUILD_FROM_CPU,   /* _rebuild_device_tensor_from_cpu_tensor(t, dtype, device, rg) */
    PG_REBUILD_OTHER,      /* nested / wrapper-subclass / from-numpy: refused on use */
    PG_TENSOR_CLASS,       /* torch.FloatTensor ...: a value, never called */
    PG_QSCHEME,            /* torch.per_tensor_affine ...: a value */
} pk_global_id;

typedef struct pk_allowed {
    const char *module, *name;
    pk_global_id id;
    amn_dtype dtype; /* PG_STORAGE, PG_DTYPE */
    bool untyped;    /* PG_STORAGE */
} pk_allowed;

/* The entry for module.name, after Python 2 module names are mapped as
 * Python 3 and torch map them (__builtin__ -> builtins); NULL if torch's
 * weights-only unpickler would refuse it. */
const pk_allowed *pk_allow_find(const char *mod, size_t mlen, const char *name, size_t nlen);

/* Number of entries, and entry i (for listings). */
size_t pk_allow_count(void);
const pk_allowed *pk_allow_get(size_t i);

#endif
