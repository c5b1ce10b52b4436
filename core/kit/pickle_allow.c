/* pickle_allow.c — torch's weights-only allowlist, by name. */
#include "amn/kit/pickle_allow.h"

#include <string.h>

#define STORAGE(mod, n, dt)                                                                        \
    { mod, n, PG_STORAGE, dt, false }
#define DTYPE(n, dt)                                                                               \
    { "torch", n, PG_DTYPE, dt, false }
#define TCLASS(mod, n)                                                                             \
    { mod, n, PG_TENSOR_CLASS, AMN_DTYPE_INVALID, false }
#define QSCHEME(n)                                                                                 \
    { "torch", n, PG_QSCHEME, AMN_DTYPE_INVALID, false }

/* torch.load(weights_only=True)'s allowlist (torch/_weights_only_unpickler.py,
 * _get_allowed_globals), and nothing else: dtypes by their str() names,
 * legacy storage and tensor classes, quantization schemes, the tensor
 * rebuild functions, and a few plain Python types. Entries with no amn
 * meaning (quantized storages, complex32, meta/nested tensors) resolve
 * and are refused as unsupported where they would become a tensor. */
static const pk_allowed allowlist[] = {
    {"collections", "OrderedDict", PG_ORDERED_DICT, AMN_DTYPE_INVALID, false},
    {"collections", "Counter", PG_COUNTER, AMN_DTYPE_INVALID, false},
    {"_codecs", "encode", PG_ENCODE, AMN_DTYPE_INVALID, false},
    {"builtins", "bytearray", PG_BYTEARRAY, AMN_DTYPE_INVALID, false},
    {"builtins", "set", PG_SET, AMN_DTYPE_INVALID, false},
    {"builtins", "complex", PG_COMPLEX, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_tensor", PG_REBUILD_TENSOR, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_tensor_v2", PG_REBUILD_TENSOR_V2, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_tensor_v3", PG_REBUILD_TENSOR_V3, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_parameter", PG_REBUILD_PARAMETER, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_parameter_with_state", PG_REBUILD_PARAMETER, AMN_DTYPE_INVALID,
     false},
    {"torch._utils", "_rebuild_sparse_tensor", PG_REBUILD_SPARSE, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_sparse_csr_tensor", PG_REBUILD_SPARSE_CSR, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_qtensor", PG_REBUILD_QTENSOR, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_meta_tensor_no_storage", PG_REBUILD_META, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_nested_tensor", PG_REBUILD_OTHER, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_wrapper_subclass", PG_REBUILD_OTHER, AMN_DTYPE_INVALID, false},
    {"torch._utils", "_rebuild_device_tensor_from_numpy", PG_REBUILD_OTHER, AMN_DTYPE_INVALID,
     false},
    {"torch._utils", "_rebuild_device_tensor_from_cpu_tensor", PG_REBUILD_FROM_CPU,
     AMN_DTYPE_INVALID, false},
    {"torch._tensor", "_rebuild_from_type_v2", PG_REBUILD_FROM_TYPE_V2, AMN_DTYPE_INVALID, false},
    {"torch.serialization", "_get_layout", PG_GET_LAYOUT, AMN_DTYPE_INVALID, false},
    {"torch.nn.parameter", "Parameter", PG_PARAMETER, AMN_DTYPE_INVALID, false},
    {"torch._tensor", "Tensor", PG_TENSOR_TYPE, AMN_DTYPE_INVALID, false},
    {"torch", "Tensor", PG_TENSOR_TYPE, AMN_DTYPE_INVALID, false},
    {"torch", "Size", PG_SIZE, AMN_DTYPE_INVALID, false},
    {"torch", "device", PG_DEVICE, AMN_DTYPE_INVALID, false},
    STORAGE("torch", "DoubleStorage", AMN_DTYPE_F64),
    STORAGE("torch", "FloatStorage", AMN_DTYPE_F32),
    STORAGE("torch", "HalfStorage", AMN_DTYPE_F16),
    STORAGE("torch", "BFloat16Storage", AMN_DTYPE_BF16),
    STORAGE("torch", "LongStorage", AMN_DTYPE_I64),
    STORAGE("torch", "IntStorage", AMN_DTYPE_I32),
    STORAGE("torch", "ShortStorage", AMN_DTYPE_I16),
    STORAGE("torch", "CharStorage", AMN_DTYPE_I8),
    STORAGE("torch", "ByteStorage", AMN_DTYPE_U8),
    STORAGE("torch", "BoolStorage", AMN_DTYPE_BOOL),
    STORAGE("torch", "ComplexFloatStorage", AMN_DTYPE_C64),
    STORAGE("torch", "ComplexDoubleStorage", AMN_DTYPE_C128),
    /* Known to torch but with no amn dtype: resolvable, refused on use. */
    STORAGE("torch", "QInt8Storage", AMN_DTYPE_INVALID),
    STORAGE("torch", "QUInt8Storage", AMN_DTYPE_INVALID),
    STORAGE("torch", "QInt32Storage", AMN_DTYPE_INVALID),
    STORAGE("torch", "QUInt4x2Storage", AMN_DTYPE_INVALID),
    STORAGE("torch", "QUInt2x4Storage", AMN_DTYPE_INVALID),
    STORAGE("torch.cuda", "DoubleStorage", AMN_DTYPE_F64),
    STORAGE("torch.cuda", "FloatStorage", AMN_DTYPE_F32),
    STORAGE("torch.cuda", "HalfStorage", AMN_DTYPE_F16),
    STORAGE("torch.cuda", "BFloat16Storage", AMN_DTYPE_BF16),
    STORAGE("torch.cuda", "LongStorage", AMN_DTYPE_I64),
    STORAGE("torch.cuda", "IntStorage", AMN_DTYPE_I32),
    STORAGE("torch.cuda", "ShortStorage", AMN_DTYPE_I16),
    STORAGE("torch.cuda", "CharStorage", AMN_DTYPE_I8),
    STORAGE("torch.cuda", "ByteStorage", AMN_DTYPE_U8),
    STORAGE("torch.cuda", "BoolStorage", AMN_DTYPE_BOOL),
    STORAGE("torch.cuda", "ComplexFloatStorage", AMN_DTYPE_C64),
    STORAGE("torch.cuda", "ComplexDoubleStorage", AMN_DTYPE_C128),
    {"torch", "UntypedStorage", PG_STORAGE, AMN_DTYPE_U8, true},
    {"torch.storage", "UntypedStorage", PG_STORAGE, AMN_DTYPE_U8, true},
    TCLASS("torch", "DoubleTensor"),
    TCLASS("torch", "FloatTensor"),
    TCLASS("torch", "HalfTensor"),
    TCLASS("torch", "BFloat16Tensor"),
    TCLASS("torch", "LongTensor"),
    TCLASS("torch", "IntTensor"),
    TCLASS("torch", "ShortTensor"),
    TCLASS("torch", "CharTensor"),
    TCLASS("torch", "ByteTensor"),
    TCLASS("torch", "BoolTensor"),
    TCLASS("torch.cuda", "DoubleTensor"),
    TCLASS("torch.cuda", "FloatTensor"),
    TCLASS("torch.cuda", "HalfTensor"),
    TCLASS("torch.cuda", "BFloat16Tensor"),
    TCLASS("torch.cuda", "LongTensor"),
    TCLASS("torch.cuda", "IntTensor"),
    TCLASS("torch.cuda", "ShortTensor"),
    TCLASS("torch.cuda", "CharTensor"),
    TCLASS("torch.cuda", "ByteTensor"),
    TCLASS("torch.cuda", "BoolTensor"),
    QSCHEME("per_tensor_affine"),
    QSCHEME("per_tensor_symmetric"),
    QSCHEME("per_channel_affine"),
    QSCHEME("per_channel_symmetric"),
    QSCHEME("per_channel_affine_float_qparams"),
    /* dtypes: str(dtype), the name torch pickles them under (aliases such
     * as torch.float are not in torch's list either) */
    DTYPE("float64", AMN_DTYPE_F64),
    DTYPE("float32", AMN_DTYPE_F32),
    DTYPE("float16", AMN_DTYPE_F16),
    DTYPE("bfloat16", AMN_DTYPE_BF16),
    DTYPE("int64", AMN_DTYPE_I64),
    DTYPE("int32", AMN_DTYPE_I32),
    DTYPE("int16", AMN_DTYPE_I16),
    DTYPE("int8", AMN_DTYPE_I8),
    DTYPE("uint8", AMN_DTYPE_U8),
    DTYPE("bool", AMN_DTYPE_BOOL),
    DTYPE("uint16", AMN_DTYPE_U16),
    DTYPE("uint32", AMN_DTYPE_U32),
    DTYPE("uint64", AMN_DTYPE_U64),
    DTYPE("float8_e4m3fn", AMN_DTYPE_F8_E4M3),
    DTYPE("float8_e5m2", AMN_DTYPE_F8_E5M2),
    DTYPE("complex32", AMN_DTYPE_INVALID),
    DTYPE("complex64", AMN_DTYPE_C64),
    DTYPE("complex128", AMN_DTYPE_C128),
    DTYPE("qint8", AMN_DTYPE_INVALID),
    DTYPE("quint8", AMN_DTYPE_INVALID),
    DTYPE("qint32", AMN_DTYPE_INVALID),
    DTYPE("quint4x2", AMN_DTYPE_INVALID),
    DTYPE("quint2x4", AMN_DTYPE_INVALID),
    DTYPE("float8_e5m2fnuz", AMN_DTYPE_INVALID),
    DTYPE("float8_e4m3fnuz", AMN_DTYPE_INVALID),
    DTYPE("float8_e8m0fnu", AMN_DTYPE_INVALID),
    DTYPE("float4_e2m1fn_x2", AMN_DTYPE_INVALID),
    DTYPE("bits8", AMN_DTYPE_INVALID),
    DTYPE("bits16", AMN_DTYPE_INVALID),
    DTYPE("bits1x8", AMN_DTYPE_INVALID),
    DTYPE("bits2x4", AMN_DTYPE_INVALID),
    DTYPE("bits4x2", AMN_DTYPE_INVALID),
    DTYPE("int1", AMN_DTYPE_INVALID),
    DTYPE("int2", AMN_DTYPE_INVALID),
    DTYPE("int3", AMN_DTYPE_INVALID),
    DTYPE("int4", AMN_DTYPE_INVALID),
    DTYPE("int5", AMN_DTYPE_INVALID),
    DTYPE("int6", AMN_DTYPE_INVALID),
    DTYPE("int7", AMN_DTYPE_INVALID),
    DTYPE("uint1", AMN_DTYPE_INVALID),
    DTYPE("uint2", AMN_DTYPE_INVALID),
    DTYPE("uint3", AMN_DTYPE_INVALID),
    DTYPE("uint4", AMN_DTYPE_INVALID),
    DTYPE("uint5", AMN_DTYPE_INVALID),
    DTYPE("uint6", AMN_DTYPE_INVALID),
    DTYPE("uint7", AMN_DTYPE_INVALID),
};

/* Python 2 module names pickles of protocol <= 2 carry; Python 3 (and
 * torch's weights-only unpickler) map them before looking up (IMPORT_MAPPING
 * of _compat_pickle; only the modules the allowlist names). */
static void pk_map_py2_module(const char **mod, size_t *mlen) {
    if (*mlen == 11 && memcmp(*mod, "__builtin__", 11) == 0) {
        *mod = "builtins";
        *mlen = 8;
    }
}

const pk_allowed *pk_allow_find(const char *mod, size_t mlen, const char *name, size_t nlen) {
    pk_map_py2_module(&mod, &mlen);
    for (size_t i = 0; i < sizeof allowlist / sizeof allowlist[0]; i++) {
        const pk_allowed *a = &allowlist[i];
        if (strlen(a->module) != mlen || memcmp(a->module, mod, mlen) != 0) continue;
        if (strlen(a->name) != nlen || memcmp(a->name, name, nlen) != 0) continue;
        return a;
    }
    return NULL;
}

size_t pk_allow_count(void) {
    return sizeof allowlist / sizeof allowlist[0];
}

const pk_allowed *pk_allow_get(size_t i) {
    return i < pk_allow_count() ? &allowlist[i] : NULL;
}
