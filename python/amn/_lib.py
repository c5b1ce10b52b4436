"""Loading libamn and declaring the C API through ctypes.

ctypes (not cffi or a C extension) because it is in the standard library, so
``pip install`` needs no compiler and no dependency, and every foreign call
through a ``ctypes.CDLL`` releases the GIL for its duration, which is what
long calls (dequantize, convert) need. The calls are coarse (one per tensor
or per row range), so ctypes' per-call overhead (~1 us) does not show.

The structs below mirror ``core/include/amn/*.h`` (x86-64 / aarch64 LP64
layout). Structs that carry ``struct_size`` are filled with it set to the
size declared here, as the ABI rules of those headers ask.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from ctypes import (
    POINTER,
    Structure,
    c_bool,
    c_char,
    c_char_p,
    c_double,
    c_int,
    c_int64,
    c_size_t,
    c_uint,
    c_uint8,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import List, Optional

MAX_DIMS = 8
ERROR_MSG_MAX = 512

# amn_dtype
DT_INVALID, DT_BOOL, DT_U8, DT_I8, DT_U16, DT_I16, DT_U32, DT_I32 = range(8)
DT_U64, DT_I64, DT_F8_E4M3, DT_F8_E5M2, DT_F16, DT_BF16, DT_F32, DT_F64 = range(8, 16)
DT_BLOCK = 16
DT_C64, DT_C128 = 17, 18

TENSOR_BIG_ENDIAN = 1
TENSOR_STRIDED = 2
FORMAT_LOSSLESS = 1


class Error_(Structure):
    _fields_ = [("code", c_int), ("msg", c_char * ERROR_MSG_MAX)]


class Limits(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_header_bytes", c_uint64),
        ("max_tensors", c_uint64),
        ("max_string", c_uint64),
        ("max_array", c_uint64),
        ("max_depth", c_uint32),
        ("max_alloc", c_uint64),
        ("max_alloc_one", c_uint64),
        ("max_ratio", c_uint32),
        ("ratio_min_size", c_uint64),
    ]


class Tensor(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("dtype", c_int),
        ("ndim", c_uint32),
        ("shape", c_uint64 * MAX_DIMS),
        ("nbytes", c_uint64),
        ("data", c_void_p),
        ("extent", c_uint64),
        ("file_offset", c_uint64),
        ("strides", c_int64 * MAX_DIMS),
        ("flags", c_uint32),
        ("encoding", c_uint32),
        ("encoding_name", c_char_p),
    ]


class Str(Structure):
    _fields_ = [("ptr", c_void_p), ("len", c_uint64)]


class KV(Structure):
    _fields_ = [
        ("key", c_char_p),
        ("type", c_int),
        ("elem_type", c_int),
        ("count", c_uint64),
        ("data", c_void_p),
    ]


class _Sized(Structure):
    """A struct of libamn's application ABI: struct_size first, set here to
    the size this mirror declares (amn/context.h, "Application ABI")."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(self)


class CtxOptions(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("plugin_dirs", POINTER(c_char_p)),
        ("n_plugin_dirs", c_size_t),
        ("no_env", c_bool),
        ("no_default", c_bool),
        ("no_builtin", c_bool),
    ]


class Format(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("description", c_char_p),
        ("extensions", c_char_p),
        ("probe", c_void_p),
        ("open", c_void_p),
        ("inspect", c_void_p),
        ("writer", c_void_p),
        ("flags", c_uint32),
        ("scan", c_void_p),
    ]


class Encoder(Structure):
    _fields_ = [("struct_size", c_uint32), ("targets", POINTER(c_char_p))]


class Scheme(Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("description", c_char_p),
        ("detect", c_void_p),
        ("dequantize", c_void_p),
        ("encoder", POINTER(Encoder)),
    ]


class PluginInfo(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("name", c_char_p),
        ("version", c_char_p),
        ("description", c_char_p),
        ("license", c_char_p),
        ("file", c_char_p),
        ("status", c_char_p),
        ("reason", c_char_p),
        ("abi_major", c_uint),
        ("abi_minor", c_uint),
        ("n_formats", c_size_t),
        ("n_schemes", c_size_t),
        ("formats", POINTER(POINTER(Format))),
        ("schemes", POINTER(POINTER(Scheme))),
        ("n_resolvers", c_size_t),
        ("resolvers", c_void_p),
    ]


class PlanSummary(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("groups", c_size_t),
        ("quantized", c_size_t),
        ("scales", c_size_t),
        ("zeros", c_size_t),
        ("group_indices", c_size_t),
        ("aux", c_size_t),
        ("dropped", c_size_t),
        ("passthrough", c_size_t),
        ("current_bytes", c_uint64),
        ("after_bytes", c_uint64),
        ("scheme", c_char_p),
        ("label", c_char_p),
        ("labels_differ", c_bool),
        ("unhandled", c_size_t),
        ("missing_plugin", c_char_p),
    ]


class GroupInfo(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("out_name", c_char_p),
        ("label", c_char_p),
        ("scheme", c_char_p),
        ("ndim", c_uint32),
        ("shape", POINTER(c_uint64)),
        ("n_members", c_size_t),
        ("members", POINTER(c_size_t)),
        ("roles", POINTER(c_uint8)),
    ]


class Progress(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("bytes_done", c_uint64),
        ("bytes_total", c_uint64),
        ("tensor_index", c_size_t),
        ("tensor_count", c_size_t),
        ("tensor_name", c_char_p),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(None, c_void_p, POINTER(Progress))


class EncodeOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("target", c_char_p), ("block_size", c_uint64)]


class ConvertOptions(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("mode", c_int),
        ("target", c_char_p),
        ("out_dtype", c_int),
        ("output", c_char_p),
        ("overwrite", c_bool),
        ("threads", c_uint),
        ("options", POINTER(c_char_p)),
        ("n_options", c_size_t),
        ("progress", PROGRESS_FN),
        ("progress_user", c_void_p),
        ("no_sync", c_bool),
        ("encode", POINTER(EncodeOptions)),
        ("keep", POINTER(c_char_p)),
        ("n_keep", c_size_t),
        ("quant_config", POINTER(c_void_p)),
        ("select", c_void_p),  # bool (*)(void *, const char *): one shard of a folder
        ("select_user", c_void_p),
    ]


class ConvertStats(_Sized):
    _fields_ = [
        ("struct_size", c_uint32),
        ("tensors_written", c_size_t),
        ("dequantized", c_size_t),
        ("cast", c_size_t),
        ("dropped", c_size_t),
        ("bytes_written", c_uint64),
        ("encoded", c_size_t),
        ("encode_passed", c_size_t),
        ("abs_err_sum", c_double),
        ("abs_err_values", c_uint64),
    ]


class ScanFinding(Structure):
    _fields_ = [
        ("kind", c_char_p),
        ("what", c_char_p),
        ("where", c_char_p),
        ("offset", c_uint64),
        ("unsafe", c_bool),
    ]


P = c_void_p  # opaque handles: amn_ctx*, amn_model*, amn_plan*, amn_scan_report*
PERR = POINTER(Error_)

# name: (restype, argtypes)
_PROTOTYPES = {
    "amn_error_class": (c_char_p, [c_int]),
    "amn_limits_default": (None, [POINTER(Limits)]),
    "amn_ctx_new": (c_int, [POINTER(CtxOptions), POINTER(P), PERR]),
    "amn_ctx_free": (None, [P]),
    "amn_ctx_plugin_count": (c_size_t, [P]),
    "amn_ctx_plugin": (c_int, [P, c_size_t, POINTER(PluginInfo)]),
    "amn_ctx_format_count": (c_size_t, [P]),
    "amn_ctx_format": (POINTER(Format), [P, c_size_t]),
    "amn_ctx_find_format": (POINTER(Format), [P, c_char_p]),
    "amn_ctx_find_encoder": (POINTER(Scheme), [P, c_char_p]),
    "amn_ctx_scheme_count": (c_size_t, [P]),
    "amn_ctx_scheme": (POINTER(Scheme), [P, c_size_t]),
    "amn_ctx_resolve": (c_int, [P, c_char_p, c_char_p, c_size_t, POINTER(c_bool), PERR]),
    "amn_open": (c_int, [P, c_char_p, c_char_p, POINTER(Limits), POINTER(P), PERR]),
    "amn_inspect": (c_int, [P, c_char_p, c_char_p, POINTER(Limits), POINTER(P), PERR]),
    "amn_model_free": (None, [P]),
    "amn_model_format": (c_char_p, [P]),
    "amn_model_label": (c_char_p, [P]),
    "amn_model_path": (c_char_p, [P]),
    "amn_model_tensor_count": (c_size_t, [P]),
    "amn_model_tensor": (POINTER(Tensor), [P, c_size_t]),
    "amn_model_find": (c_int64, [P, c_char_p]),
    "amn_model_meta_count": (c_size_t, [P]),
    "amn_model_meta_key": (c_char_p, [P, c_size_t]),
    "amn_model_meta_value": (c_char_p, [P, c_size_t]),
    "amn_model_kv_count": (c_size_t, [P]),
    "amn_model_kv": (POINTER(KV), [P, c_size_t]),
    "amn_model_note_count": (c_size_t, [P]),
    "amn_model_note_name": (c_char_p, [P, c_size_t]),
    "amn_model_note_value": (c_char_p, [P, c_size_t]),
    "amn_tensor_read": (c_int, [POINTER(Tensor), c_uint64, c_void_p, c_uint64, PERR]),
    "amn_dtype_name": (c_char_p, [c_int]),
    "amn_dtype_size": (c_size_t, [c_int]),
    "amn_convert_elems": (c_int, [c_int, c_void_p, c_int, c_void_p, c_size_t]),
    "amn_plan_new": (c_int, [P, P, POINTER(P), PERR]),
    "amn_plan_free": (None, [P]),
    "amn_plan_summarize": (c_int, [P, c_int, POINTER(PlanSummary)]),
    "amn_plan_group_count": (c_size_t, [P]),
    "amn_plan_group": (c_int, [P, c_size_t, POINTER(GroupInfo)]),
    "amn_plan_tensor_role": (c_int, [P, c_size_t]),
    "amn_plan_tensor_unhandled": (c_bool, [P, c_size_t, POINTER(c_char_p), POINTER(c_char_p)]),
    "amn_plan_group_rows": (c_int, [P, c_size_t, POINTER(c_uint64), POINTER(c_uint64), PERR]),
    "amn_plan_dequantize": (c_int, [P, c_size_t, c_uint64, c_uint64, c_int, c_void_p, PERR]),
    "amn_convert": (
        c_int,
        [P, P, P, POINTER(ConvertOptions), POINTER(ConvertStats), PERR],
    ),
    "amn_matrix_inputs": (c_size_t, [P]),
    "amn_matrix_targets": (c_size_t, [P]),
    "amn_matrix_input": (c_char_p, [P, c_size_t]),
    "amn_matrix_target": (c_char_p, [P, c_size_t]),
    "amn_scan": (c_int, [P, c_char_p, c_char_p, POINTER(Limits), POINTER(P), PERR]),
    "amn_scan_free": (None, [P]),
    "amn_scan_format": (c_char_p, [P]),
    "amn_scan_unsafe": (c_bool, [P]),
    "amn_scan_count": (c_size_t, [P]),
    "amn_scan_get": (POINTER(ScanFinding), [P, c_size_t]),
    "amn_scan_dropped": (c_size_t, [P]),
    "amn_simd_level": (c_int, []),
    "amn_simd_name": (c_char_p, [c_int]),
}


def _candidates() -> List[str]:
    """Where libamn may be, in the order tried."""
    out = []
    env = os.environ.get("AMN_LIBRARY")
    if env:
        return [env]  # an explicit choice is never second-guessed
    # Used from a source checkout: <src>/python/amn/_lib.py -> <src>/build/lib.
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out.append(os.path.join(src, "build", "lib", "libamn.so"))
    # The system's loader: LD_LIBRARY_PATH, ld.so.cache, the default dirs;
    # by its development name, then by the SONAME these prototypes are
    # written for (all a system without libamn-dev has: python3-amn).
    out.append("libamn.so")
    out.append("libamn.so.0")
    found = ctypes.util.find_library("amn")
    if found:
        out.append(found)
    return out


class _Lib:
    """libamn, loaded on first use, with its prototypes declared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dll: Optional[ctypes.CDLL] = None
        self.path: Optional[str] = None

    def get(self) -> ctypes.CDLL:
        if self._dll is not None:
            return self._dll
        with self._lock:
            if self._dll is None:
                self._dll = self._load()
        return self._dll

    def _load(self) -> ctypes.CDLL:
        tried = []
        for c in _candidates():
            if os.sep in c and not os.path.exists(c):
                tried.append(f"{c} (missing)")
                continue
            try:
                dll = ctypes.CDLL(c)
            except OSError as e:
                tried.append(f"{c} ({e})")
                continue
            missing = [n for n in _PROTOTYPES if not hasattr(dll, n)]
            if missing:
                tried.append(f"{c} (too old: lacks {', '.join(missing[:3])})")
                continue
            for name, (res, args) in _PROTOTYPES.items():
                fn = getattr(dll, name)
                fn.restype = res
                fn.argtypes = args
            self.path = c
            return dll
        raise ImportError(
            "amn: cannot load libamn; set AMN_LIBRARY to the path of libamn.so, or put its "
            "directory on LD_LIBRARY_PATH. Tried: " + "; ".join(tried)
        )


lib = _Lib()


def s(b: Optional[bytes]) -> Optional[str]:
    """C string to str (None stays None); undecodable bytes are escaped."""
    return None if b is None else b.decode("utf-8", "surrogateescape")


def b(x: "str | os.PathLike[str] | None") -> Optional[bytes]:
    """str or path to a C string (None stays None)."""
    if x is None:
        return None
    return os.fsencode(x)


def strings(items: List[str]) -> "ctypes.Array[c_char_p]":
    arr = (c_char_p * max(len(items), 1))()
    for i, it in enumerate(items):
        arr[i] = os.fsencode(it)
    return arr


def libc_free() -> "ctypes._NamedFuncPointer":
    f = ctypes.CDLL(None).free
    f.argtypes = [c_void_p]
    f.restype = None
    return f
