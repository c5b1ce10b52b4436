"""Models: opening, inspecting, tensors as NumPy arrays, dequantizing."""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import threading
from dataclasses import dataclass, field
from typing import (
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    Union,
)

import numpy as np

from . import _lib
from ._errors import Error, InvalidError, from_code
from ._lib import lib

PathLike = Union[str, "os.PathLike[str]"]

# amn_dtype -> NumPy dtype of a zero-copy view. BF16 is its bit pattern
# (uint16) and FP8 its byte (uint8): NumPy has neither type.
_NP_VIEW = {
    _lib.DT_BOOL: np.dtype("?"),
    _lib.DT_U8: np.dtype("u1"),
    _lib.DT_I8: np.dtype("i1"),
    _lib.DT_U16: np.dtype("<u2"),
    _lib.DT_I16: np.dtype("<i2"),
    _lib.DT_U32: np.dtype("<u4"),
    _lib.DT_I32: np.dtype("<i4"),
    _lib.DT_U64: np.dtype("<u8"),
    _lib.DT_I64: np.dtype("<i8"),
    _lib.DT_F8_E4M3: np.dtype("u1"),
    _lib.DT_F8_E5M2: np.dtype("u1"),
    _lib.DT_F16: np.dtype("<f2"),
    _lib.DT_BF16: np.dtype("<u2"),
    _lib.DT_F32: np.dtype("<f4"),
    _lib.DT_F64: np.dtype("<f8"),
    _lib.DT_C64: np.dtype("<c8"),
    _lib.DT_C128: np.dtype("<c16"),
}
_FLOATS = {
    _lib.DT_F8_E4M3,
    _lib.DT_F8_E5M2,
    _lib.DT_F16,
    _lib.DT_BF16,
    _lib.DT_F32,
    _lib.DT_F64,
}
# Output dtypes a caller may ask for: name -> (amn_dtype, NumPy dtype).
_OUT = {
    "float32": (_lib.DT_F32, np.dtype("<f4")),
    "float16": (_lib.DT_F16, np.dtype("<f2")),
    "bfloat16": (_lib.DT_BF16, np.dtype("<u2")),
}
_OUT_ALIASES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}

ROLES = {1: "weight", 2: "scale", 3: "zero", 4: "group_index", 5: "aux", 6: "act_scale"}

_KV_SCALARS = {
    0: "<u1",
    1: "<i1",
    2: "<u2",
    3: "<i2",
    4: "<u4",
    5: "<i4",
    6: "<f4",
    10: "<u8",
    11: "<i8",
    12: "<f8",
}
_KV_BOOL, _KV_STRING, _KV_ARRAY = 7, 8, 9


def _aligned_empty(shape: Tuple[int, ...], dtype: np.dtype, align: int = 64) -> np.ndarray:
    """np.empty, but starting on an `align`-byte boundary (NumPy's large
    arrays start 16 bytes past one): kernels that write whole tensors with
    streaming stores need 32-byte aligned rows."""
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = np.empty(n + align, np.uint8)
    off = -buf.ctypes.data % align
    return buf[off:off + n].view(dtype).reshape(shape)


def _out_dtype(dtype: Optional[str]) -> Tuple[int, np.dtype]:
    key = _OUT_ALIASES.get(str(dtype), str(dtype))
    if key not in _OUT:
        raise InvalidError(f"dtype {dtype!r}: use 'float32', 'float16' or 'bfloat16'")
    return _OUT[key]


def check(rc: int, err: _lib.Error_) -> None:
    """Raise the exception for a failed libamn call."""
    if rc != 0:
        raise from_code(rc, _lib.s(err.msg) or "")


# ---- the plugin registry ----------------------------------------------------

_ctx_lock = threading.Lock()
_ctx_handle: Optional["_Ctx"] = None


class _Ctx:
    """One amn_ctx for the process: immutable once made, shared by threads."""

    def __init__(self) -> None:
        self.dll = lib.get()
        self.p = ctypes.c_void_p()
        err = _lib.Error_()
        check(self.dll.amn_ctx_new(None, ctypes.byref(self.p), ctypes.byref(err)), err)

    def __del__(self) -> None:
        if getattr(self, "p", None) and self.p.value:
            self.dll.amn_ctx_free(self.p)


def ctx() -> _Ctx:
    """The process's registry, loaded on first use (plugins as amn/context.h finds them)."""
    global _ctx_handle
    if _ctx_handle is None:
        with _ctx_lock:
            if _ctx_handle is None:
                _ctx_handle = _Ctx()
    return _ctx_handle


def resolve(path: PathLike) -> str:
    """A ``<scheme>:<spec>`` input (``ollama:llama3.2:1b``) as the path it names."""
    c = ctx()
    buf = ctypes.create_string_buffer(4096)
    resolved = ctypes.c_bool(False)
    err = _lib.Error_()
    raw = os.fsencode(path)
    check(
        c.dll.amn_ctx_resolve(c.p, raw, buf, len(buf), ctypes.byref(resolved), ctypes.byref(err)),
        err,
    )
    return os.fsdecode(buf.value) if resolved.value else os.fsdecode(raw)


# ---- limits -----------------------------------------------------------------


@dataclass
class Limits:
    """Safety caps for parsing (amn_limits); ``None`` keeps libamn's default.

    Defaults: 100 MiB header, 2**20 tensors, 16 MiB string, 2**26 array
    elements, nesting depth 64, 64 GiB per model and per allocation,
    DEFLATE ratio 1000 (0: off) for members expanding past
    ``ratio_min_size`` (256 MiB).
    """

    max_header_bytes: Optional[int] = None
    max_tensors: Optional[int] = None
    max_string: Optional[int] = None
    max_array: Optional[int] = None
    max_depth: Optional[int] = None
    max_alloc: Optional[int] = None
    max_alloc_one: Optional[int] = None
    max_ratio: Optional[int] = None
    ratio_min_size: Optional[int] = None

    def _c(self) -> _lib.Limits:
        lim = _lib.Limits()
        lib.get().amn_limits_default(ctypes.byref(lim))
        for f in self.__dataclass_fields__:
            v = getattr(self, f)
            if v is not None:
                if v < 0:
                    raise InvalidError(f"limit {f} must be >= 0")
                setattr(lim, f, v)
        return lim


def limits_arg(limits: Union[Limits, Mapping[str, int], None]) -> Optional[_lib.Limits]:
    if limits is None:
        return None
    if isinstance(limits, Mapping):
        limits = Limits(**limits)
    return limits._c()


# ---- what a model holds -----------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """One stored tensor: ``dtype`` as safetensors spells it ("F32", "BF16",
    "BLOCK" with ``encoding`` "Q4_K" for a GGUF block type), ``role`` in its
    quantized group ("weight", "scale", "zero", "group_index", "aux",
    "act_scale") or None when it passes through."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    nbytes: int
    role: Optional[str]
    file_offset: int
    encoding: Optional[str] = None
    big_endian: bool = False
    strided: bool = False


@dataclass(frozen=True)
class Group:
    """A quantized weight: the tensor ``remember`` writes (``name``, ``shape``)
    from its stored ``members`` (name -> role)."""

    name: Optional[str]
    label: Optional[str]
    scheme: Optional[str]
    shape: Tuple[int, ...]
    members: Dict[str, str] = field(default_factory=dict)


class _Handle:
    """Owns the amn_model and its plan. Model and every array viewing the
    mapping hold a reference, so the mapping lives until the last of them
    is gone, whenever Model.close() is called."""

    __slots__ = ("dll", "model", "plan", "ctx", "__weakref__")

    def __init__(self, dll: ctypes.CDLL, c: _Ctx) -> None:
        self.dll = dll
        self.ctx = c  # plugin code the model calls must stay loaded
        self.model = ctypes.c_void_p()
        self.plan = ctypes.c_void_p()

    def __del__(self) -> None:
        if self.plan.value:
            self.dll.amn_plan_free(self.plan)
            self.plan = ctypes.c_void_p()
        if self.model.value:
            self.dll.amn_model_free(self.model)
            self.model = ctypes.c_void_p()


class _View:
    """The object a zero-copy array's ``base`` points to: NumPy reads
    ``__array_interface__`` once, and the array keeps this (and so the
    model's mapping) alive."""

    __slots__ = ("__array_interface__", "_handle")

    def __init__(self, handle: _Handle, iface: Dict[str, Any]) -> None:
        self._handle = handle
        self.__array_interface__ = iface


def _kv_value(kv: _lib.KV) -> Any:
    """A typed GGUF-style key/value as a Python value."""
    t = kv.type
    if t in _KV_SCALARS:
        return np.frombuffer(ctypes.string_at(kv.data, np.dtype(_KV_SCALARS[t]).itemsize),
                             _KV_SCALARS[t])[0].item()
    if t == _KV_BOOL:
        return ctypes.string_at(kv.data, 1) != b"\0"
    if t == _KV_STRING:
        st = _lib.Str.from_address(kv.data)
        return ctypes.string_at(st.ptr, st.len).decode("utf-8", "surrogateescape") if st.len else ""
    if t == _KV_ARRAY:
        n, et = kv.count, kv.elem_type
        if et in _KV_SCALARS:
            size = n * np.dtype(_KV_SCALARS[et]).itemsize
            return np.frombuffer(ctypes.string_at(kv.data, size), _KV_SCALARS[et]).tolist() if n else []
        if et == _KV_BOOL:
            return [x != 0 for x in ctypes.string_at(kv.data, n)] if n else []
        if et == _KV_STRING:
            arr = (_lib.Str * n).from_address(kv.data) if n else []
            return [ctypes.string_at(x.ptr, x.len).decode("utf-8", "surrogateescape") if x.len else ""
                    for x in arr]
        if et == _KV_ARRAY:
            arr = (_lib.KV * n).from_address(kv.data) if n else []
            return [_kv_value(x) for x in arr]
    return None


class Model:
    """A tensor file (or sharded folder) opened by libamn.

    Use as a context manager or call :meth:`close`. Arrays returned by
    ``model[name]`` are read-only views of the file mapping; they keep the
    mapping alive, so they stay valid after the model is closed (the mapping
    is released with the last of them).
    """

    def __init__(self, path: PathLike, *, header_only: bool, from_: Optional[str],
                 limits: Union[Limits, Mapping[str, int], None]) -> None:
        c = ctx()
        self._dll = c.dll
        self._h: Optional[_Handle] = _Handle(c.dll, c)
        self._lock = threading.Lock()
        real = resolve(path)
        err = _lib.Error_()
        lim = limits_arg(limits)
        fn = c.dll.amn_inspect if header_only else c.dll.amn_open
        rc = fn(c.p, os.fsencode(real), _lib.b(from_), ctypes.byref(lim) if lim else None,
                ctypes.byref(self._h.model), ctypes.byref(err))
        check(rc, err)
        check(c.dll.amn_plan_new(c.p, self._h.model, ctypes.byref(self._h.plan), ctypes.byref(err)),
              err)
        self.header_only = header_only
        self._load_catalogue()

    # -- catalogue (built once; plain Python objects) --

    def _load_catalogue(self) -> None:
        d, m, p = self._dll, self._h.model, self._h.plan
        self.path: Optional[str] = _lib.s(d.amn_model_path(m))
        self.format: str = _lib.s(d.amn_model_format(m)) or ""
        self.label: str = _lib.s(d.amn_model_label(m)) or self.format
        n = d.amn_model_tensor_count(m)
        self._index: Dict[str, int] = {}
        tensors: Dict[str, TensorInfo] = {}
        for i in range(n):
            t = d.amn_model_tensor(m, i).contents
            name = _lib.s(t.name) or ""
            role = d.amn_plan_tensor_role(p, i)
            self._index[name] = i
            tensors[name] = TensorInfo(
                name=name,
                dtype=_lib.s(d.amn_dtype_name(t.dtype)) or "INVALID",
                shape=tuple(t.shape[k] for k in range(t.ndim)),
                nbytes=t.nbytes,
                role=ROLES.get(role) if role else None,
                file_offset=t.file_offset,
                encoding=_lib.s(t.encoding_name) if t.dtype == _lib.DT_BLOCK else None,
                big_endian=bool(t.flags & _lib.TENSOR_BIG_ENDIAN),
                strided=bool(t.flags & _lib.TENSOR_STRIDED),
            )
        self.tensors: Dict[str, TensorInfo] = tensors
        groups: Dict[str, Group] = {}
        self._group_index: Dict[str, int] = {}
        self._first_member: Dict[int, str] = {}  # tensor index -> group output it starts
        self.dropped: List[str] = []
        gi = _lib.GroupInfo()
        for g in range(d.amn_plan_group_count(p)):
            if d.amn_plan_group(p, g, ctypes.byref(gi)) != 0:
                continue
            members = {}
            names = []
            for k in range(gi.n_members):
                ti = gi.members[k]
                tn = _lib.s(d.amn_model_tensor(m, ti).contents.name) or ""
                members[tn] = ROLES.get(gi.roles[k], "aux")
                names.append(ti)
            out = _lib.s(gi.out_name)
            if out is None:
                self.dropped.extend(members)
                continue
            groups[out] = Group(out, _lib.s(gi.label), _lib.s(gi.scheme),
                                tuple(gi.shape[k] for k in range(gi.ndim)), members)
            self._group_index[out] = g
            self._first_member[min(names)] = out
        self.groups: Dict[str, Group] = groups
        summ = _lib.PlanSummary()
        d.amn_plan_summarize(p, _lib.DT_BF16, ctypes.byref(summ))
        self.scheme: Optional[str] = _lib.s(summ.scheme)
        self.unhandled: List[str] = [
            nm for nm, i in self._index.items()
            if d.amn_plan_tensor_unhandled(p, i, None, None)
        ]
        self.missing_plugin: Optional[str] = _lib.s(summ.missing_plugin)
        meta: Dict[str, Any] = {}
        for i in range(d.amn_model_meta_count(m)):
            meta[_lib.s(d.amn_model_meta_key(m, i)) or ""] = _lib.s(d.amn_model_meta_value(m, i))
        for i in range(d.amn_model_kv_count(m)):
            kv = d.amn_model_kv(m, i).contents
            meta[_lib.s(kv.key) or ""] = _kv_value(kv)
        self.metadata: Dict[str, Any] = meta
        self.notes: Dict[str, str] = {
            _lib.s(d.amn_model_note_name(m, i)) or "": _lib.s(d.amn_model_note_value(m, i)) or ""
            for i in range(d.amn_model_note_count(m))
        }

    # -- lifetime --

    def close(self) -> None:
        """Release the model. Arrays already returned stay valid (they hold
        the mapping); any further call on the model raises InvalidError."""
        with self._lock:
            self._h = None

    @property
    def closed(self) -> bool:
        return self._h is None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handle(self) -> _Handle:
        h = self._h
        if h is None:
            raise InvalidError("the model is closed")
        return h

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{len(self.tensors)} tensors"
        return f"<amn.Model {self.label} {self.path!r} {state}>"

    # -- mapping protocol over stored tensor names --

    def __len__(self) -> int:
        return len(self.tensors)

    def __iter__(self) -> Iterator[str]:
        return iter(self.tensors)

    def __contains__(self, name: object) -> bool:
        return name in self.tensors

    def keys(self) -> List[str]:
        return list(self.tensors)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.read(name)

    # -- reading --

    def _tensor(self, h: _Handle, name: str) -> _lib.Tensor:
        i = self._index.get(name)
        if i is None:
            hint = " (a quantized weight: use model.dequantize)" if name in self.groups else ""
            raise KeyError(f"{name!r}: no such tensor{hint}")
        t = self._dll.amn_model_tensor(h.model, i).contents
        if not t.data and t.nbytes:
            raise InvalidError(f"{name}: the model was inspected (header only); use amn.open")
        return t

    def read(self, name: str, dtype: Optional[str] = None) -> np.ndarray:
        """Tensor ``name`` as stored.

        With ``dtype=None``: a read-only zero-copy view of the mapping for
        little-endian data (strided views included); big-endian data is
        swapped into a copy. BF16 comes as its ``uint16`` bit pattern (view
        it as float32 with ``(a.astype(np.uint32) << 16).view(np.float32)``),
        FP8 as ``uint8`` bytes, a GGUF block tensor as its raw ``uint8``
        bytes. With ``dtype="float32"`` / ``"float16"`` / ``"bfloat16"``
        (bit pattern as uint16), a floating tensor is converted into a new
        array by libamn (round to nearest even); other dtypes raise.
        """
        h = self._handle()
        t = self._tensor(h, name)
        if dtype is not None:
            return self._converted(h, t, name, dtype)
        if t.dtype == _lib.DT_BLOCK:
            return self._raw(h, t, (t.nbytes,), np.dtype("u1"))
        npd = _NP_VIEW.get(t.dtype)
        if npd is None:
            raise InvalidError(f"{name}: dtype {t.dtype} has no NumPy equivalent")
        shape = tuple(t.shape[k] for k in range(t.ndim))
        if t.flags & _lib.TENSOR_BIG_ENDIAN:
            return self._copy_le(t, shape, npd)
        strides = None
        if t.flags & _lib.TENSOR_STRIDED:
            strides = tuple(int(t.strides[k]) * npd.itemsize for k in range(t.ndim))
        return self._raw(h, t, shape, npd, strides)

    def _raw(self, h: _Handle, t: _lib.Tensor, shape: Tuple[int, ...], npd: np.dtype,
             strides: Optional[Tuple[int, ...]] = None) -> np.ndarray:
        if t.nbytes == 0 or not t.data:
            a = np.empty(shape, npd)
        else:
            iface = {"version": 3, "shape": shape, "typestr": npd.str, "data": (t.data, True),
                     "strides": strides}
            a = np.asarray(_View(h, iface))
        a.flags.writeable = False
        return a

    def _copy_le(self, t: _lib.Tensor, shape: Tuple[int, ...], npd: np.dtype) -> np.ndarray:
        out = np.empty(shape, npd)
        if t.nbytes:
            err = _lib.Error_()
            check(self._dll.amn_tensor_read(ctypes.byref(t), 0, out.ctypes.data, t.nbytes,
                                            ctypes.byref(err)), err)
        return out

    def _converted(self, h: _Handle, t: _lib.Tensor, name: str, dtype: str) -> np.ndarray:
        to, npd = _out_dtype(dtype)
        if t.dtype not in _FLOATS:
            raise InvalidError(f"{name}: {_lib.s(self._dll.amn_dtype_name(t.dtype))} is not a "
                               f"floating type; read it without dtype")
        shape = tuple(t.shape[k] for k in range(t.ndim))
        src = self._copy_le(t, shape, _NP_VIEW[t.dtype])  # C order, little-endian
        out = np.empty(shape, npd)
        if out.size and self._dll.amn_convert_elems(t.dtype, src.ctypes.data, to,
                                                      out.ctypes.data, out.size) != 0:
            raise InvalidError(f"{name}: no conversion to {dtype}")
        return out

    def dequantize(self, name: str, dtype: str = "bfloat16", *,
                   threads: Optional[int] = None) -> np.ndarray:
        """The quantized weight ``name`` (a key of :attr:`groups`) decoded by
        its scheme's kernel, bit for bit as ``amn remember`` writes it, as a
        new array: ``float32``, ``float16``, or ``bfloat16`` (its uint16 bit
        pattern). The work is split by rows over ``threads`` (default
        min(cores, 4)) threads that run without the GIL."""
        h = self._handle()
        g = self._group_index.get(name)
        if g is None:
            hint = " (a stored tensor: use model[name])" if name in self.tensors else ""
            raise KeyError(f"{name!r}: no quantized weight of that name{hint}")
        to, npd = _out_dtype(dtype)
        rows, re = ctypes.c_uint64(), ctypes.c_uint64()
        err = _lib.Error_()
        check(self._dll.amn_plan_group_rows(h.plan, g, ctypes.byref(rows), ctypes.byref(re),
                                            ctypes.byref(err)), err)
        out = _aligned_empty(tuple(self.groups[name].shape), npd)
        nrows, row_bytes = rows.value, re.value * npd.itemsize
        base = out.ctypes.data
        if threads is None:
            threads = min(os.cpu_count() or 1, 4)
        # Chunks of at least ~1 MiB so small tensors stay on one call.
        n = max(1, min(threads, nrows, (nrows * row_bytes) >> 20))

        def run(k: int) -> None:
            r0, r1 = nrows * k // n, nrows * (k + 1) // n
            e = _lib.Error_()
            check(self._dll.amn_plan_dequantize(h.plan, g, r0, r1 - r0, to, base + r0 * row_bytes,
                                                ctypes.byref(e)), e)

        if n == 1:
            run(0)
        else:
            with concurrent.futures.ThreadPoolExecutor(n) as ex:
                for f in [ex.submit(run, k) for k in range(n)]:
                    f.result()
        return out

    def items(self, dtype: Optional[str] = None) -> Iterator[Tuple[str, np.ndarray]]:
        """The model's logical tensors, as ``amn remember`` would write them,
        one at a time in file order: each quantized weight dequantized to
        ``dtype`` (default bfloat16), every other tensor as :meth:`read`
        gives it (floating tensors converted when ``dtype`` is given);
        scales, zeros and other members of a quantized group and dropped
        activation scales are not yielded."""
        self._handle()
        for name, info in self.tensors.items():
            i = self._index[name]
            if info.role is None:
                conv = dtype if dtype is not None and info.dtype in {
                    "F8_E4M3", "F8_E5M2", "F16", "BF16", "F32", "F64"} else None
                yield name, self.read(name, conv)
            elif i in self._first_member:
                out = self._first_member[i]
                yield out, self.dequantize(out, dtype or "bfloat16")


def open(path: PathLike, *, from_: Optional[str] = None,
         limits: Union[Limits, Mapping[str, int], None] = None) -> Model:
    """Open a tensor file, a sharded model folder or an ``ollama:name:tag``
    input, with its tensor data mapped. ``from_`` forces the format
    ("safetensors", "gguf", "pth", "npz", ...); ``limits`` tightens or
    loosens the parsing caps (:class:`Limits` or a dict of its fields)."""
    return Model(path, header_only=False, from_=from_, limits=limits)


def inspect(path: PathLike, *, from_: Optional[str] = None,
            limits: Union[Limits, Mapping[str, int], None] = None) -> Model:
    """Read only the header: names, dtypes, shapes, groups and metadata,
    without mapping the data (reading a tensor raises InvalidError)."""
    return Model(path, header_only=True, from_=from_, limits=limits)


__all__ = ["Model", "TensorInfo", "Group", "Limits", "open", "inspect", "Error"]
