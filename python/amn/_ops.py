"""Whole-file operations: remember, convert, forget, scan; the plugin list."""

from __future__ import annotations

import ctypes
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _lib
from ._errors import InvalidError, UnsupportedError
from ._model import Limits, Model, PathLike, check, ctx, limits_arg
from ._model import open as _open


@dataclass(frozen=True)
class Progress:
    """Where a conversion stands (passed to a ``progress`` callback)."""

    bytes_done: int
    bytes_total: int
    tensor_index: int
    tensor_count: int
    tensor_name: Optional[str]


ProgressFn = Callable[[Progress], None]


@dataclass(frozen=True)
class ConvertResult:
    """What :func:`remember`, :func:`convert` or :func:`forget` wrote."""

    output: str
    target: str
    out_dtype: str
    tensors_written: int
    dequantized: int
    cast: int
    dropped: int
    bytes_written: int
    seconds: float
    encoded: int = 0
    encode_passed: int = 0
    mean_abs_error: Optional[float] = None
    quantization_config: Optional[Dict[str, Any]] = None


# Suffixes quantized checkpoints carry in their names (as the CLI strips
# them), longest first so that "-GPTQ-Int4" wins over "-Int4".
_QUANT_SUFFIXES = (
    "-FP8-Dynamic", "-FP8-dynamic", "-fp8-dynamic", "-GPTQ-Int4", "-GPTQ-Int8", "-GPTQ-int4",
    "-GPTQ-int8", "-gptq-int4", "-gptq-int8", "-bnb-4bit", "-bnb-8bit", "-bnb-int8",
    "-bnb-nf4", "-GPTQ", "-gptq", "-AWQ", "-awq", "-FP8", "-fp8", "-4bit", "-8bit",
    "-int4", "-int8", "-Int4", "-Int8", "-nf4", "-NF4",
)
_EXTS = (".safetensors.index.json", ".safetensors", ".gguf", ".pth", ".pt", ".bin", ".npz",
         ".npy", ".sft")


def _default_output(src: str, tag: str, ext: str) -> str:
    """<stem>-<tag>.<ext> beside the input, as the CLI names outputs."""
    if ":" in src and not os.path.exists(src):
        base, d = src.split(":", 1)[1].replace(":", "-").replace("/", "-"), "."
    else:
        p = src.rstrip("/") or "/"
        d, base = os.path.split(p)
        d = d or "."
    for e in _EXTS:
        if base.endswith(e) and len(base) > len(e):
            base = base[: -len(e)]
            break
    for sfx in _QUANT_SUFFIXES:
        if base.endswith(sfx) and len(base) > len(sfx):
            base = base[: -len(sfx)]
            break
    return os.path.join(d, f"{base}{'-' if tag else ''}{tag}.{ext}")


_CLI_DTYPES = {"bf16": _lib.DT_BF16, "f16": _lib.DT_F16, "f32": _lib.DT_F32,
               "bfloat16": _lib.DT_BF16, "float16": _lib.DT_F16, "float32": _lib.DT_F32}


def _dtype_arg(v: str) -> int:
    d = _CLI_DTYPES.get(v.lower())
    if d is None:
        raise InvalidError(f"unknown dtype {v!r} (use bf16, f16 or f32)")
    return d


def _run(model: Model, *, mode: int, target: str, out_dtype: int, output: str,
         overwrite: bool, threads: int, options: Sequence[str],
         progress: Optional[ProgressFn], no_sync: bool,
         encode: Optional[_lib.EncodeOptions] = None, keep: Sequence[str] = ()) -> ConvertResult:
    c = ctx()
    h = model._handle()
    opts_arr = _lib.strings(list(options))
    keep_arr = _lib.strings(list(keep))
    qc = ctypes.c_void_p()
    raised: List[BaseException] = []

    def on_progress(_user: Optional[int], p: Any) -> None:
        # Runs on the converting thread, which ctypes hands the GIL back to.
        if raised:
            return
        q = p.contents
        try:
            progress(Progress(q.bytes_done, q.bytes_total, q.tensor_index, q.tensor_count,  # type: ignore[misc]
                              _lib.s(q.tensor_name)))
        except BaseException as e:  # libamn cannot unwind: re-raised after the call
            raised.append(e)

    cb = _lib.PROGRESS_FN(on_progress) if progress else _lib.PROGRESS_FN()
    o = _lib.ConvertOptions(
        mode=mode, target=target.encode(), out_dtype=out_dtype, output=os.fsencode(output),
        overwrite=overwrite, threads=threads, options=opts_arr, n_options=len(options),
        progress=cb, progress_user=None, no_sync=no_sync,
        encode=ctypes.pointer(encode) if encode is not None else None,
        keep=keep_arr, n_keep=len(keep),
        quant_config=ctypes.pointer(qc) if encode is not None else None)
    st = _lib.ConvertStats()
    err = _lib.Error_()
    t0 = time.monotonic()
    rc = c.dll.amn_convert(c.p, h.model, h.plan, ctypes.byref(o), ctypes.byref(st),
                           ctypes.byref(err))
    dt = time.monotonic() - t0
    qcfg = None
    if qc.value:
        try:
            qcfg = json.loads(ctypes.string_at(qc.value).decode())
        finally:
            _lib.libc_free()(qc)
    check(rc, err)
    if raised:
        raise raised[0]
    return ConvertResult(
        output=output, target=target, out_dtype=_lib.s(c.dll.amn_dtype_name(out_dtype)) or "",
        tensors_written=st.tensors_written, dequantized=st.dequantized, cast=st.cast,
        dropped=st.dropped, bytes_written=st.bytes_written, seconds=dt, encoded=st.encoded,
        encode_passed=st.encode_passed,
        mean_abs_error=st.abs_err_sum / st.abs_err_values if st.abs_err_values else None,
        quantization_config=qcfg)


def _writer(target: str) -> "_lib.Format":
    c = ctx()
    f = c.dll.amn_ctx_find_format(c.p, target.encode())
    if not f or not f.contents.writer:
        raise UnsupportedError(
            f"unsupported: no loaded plugin writes '{target}'; install the amn-plugin-{target} package")
    return f.contents


def _lossless(fmt: "_lib.Format") -> bool:
    has = fmt.struct_size >= _lib.Format.flags.offset + 4
    return bool(has and fmt.flags & _lib.FORMAT_LOSSLESS)


def _ext(fmt: "_lib.Format") -> str:
    e = _lib.s(fmt.extensions) or _lib.s(fmt.name) or "out"
    return e.split(",")[0]


def remember(src: PathLike, dst: Optional[PathLike] = None, to: str = "bf16", *,
             from_: Optional[str] = None, threads: int = 0, overwrite: bool = False,
             progress: Optional[ProgressFn] = None, no_sync: bool = False,
             limits: Union[Limits, Mapping[str, int], None] = None) -> ConvertResult:
    """``amn remember``: dequantize every quantized weight of ``src`` to
    ``to`` ("bf16", "f16", "f32") and write a safetensors file, other
    tensors copied as they are. ``dst`` defaults to ``<stem>-<to>.safetensors``
    beside the input. The GIL is released while libamn works; ``progress``
    is called on this thread with a :class:`Progress`."""
    out = _dtype_arg(to)
    with _open(src, from_=from_, limits=limits) as m:
        tag = (_lib.s(ctx().dll.amn_dtype_name(out)) or "").lower()
        output = os.fspath(dst) if dst is not None else _default_output(os.fspath(src), tag,
                                                                         "safetensors")
        return _run(m, mode=0, target="safetensors", out_dtype=out, output=output,
                    overwrite=overwrite, threads=threads, options=(), progress=progress,
                    no_sync=no_sync)


def _is_encode_target(to: str) -> bool:
    c = ctx()
    return bool(c.dll.amn_ctx_find_encoder(c.p, to.encode()))


def convert(src: PathLike, to: str, dst: Optional[PathLike] = None,
            out_dtype: Optional[str] = None, *, from_: Optional[str] = None,
            options: Sequence[str] = (), threads: int = 0, overwrite: bool = False,
            progress: Optional[ProgressFn] = None, no_sync: bool = False,
            limits: Union[Limits, Mapping[str, int], None] = None) -> ConvertResult:
    """``amn convert``: write ``src`` as format ``to`` ("safetensors",
    "gguf", "npz", "pth", or "bf16" for safetensors), quantized weights
    dequantized. ``out_dtype`` ("bf16", "f16", "f32", "keep") as the CLI's
    --out-dtype: without it floats are cast to BF16, except from or to a
    lossless format (npz, pth) where they keep their dtype. ``options`` are
    the writer's ``KEY=VALUE`` options (--opt). An encode target
    ("bnb-nf4", "q4_k_m", ...) runs :func:`forget`."""
    if _is_encode_target(to):
        return forget(src, to, dst, from_=from_, threads=threads, overwrite=overwrite,
                      progress=progress, no_sync=no_sync, limits=limits)
    target = "safetensors" if to == "bf16" else to
    fmt = _writer(target)
    keep = out_dtype == "keep"
    out = _dtype_arg(out_dtype) if out_dtype and not keep else _lib.DT_BF16
    with _open(src, from_=from_, limits=limits) as m:
        c = ctx()
        in_fmt = c.dll.amn_ctx_find_format(c.p, m.format.encode())
        lossless = (bool(in_fmt) and _lossless(in_fmt.contents)) or _lossless(fmt)
        mode = 1 if not keep and not (lossless and not out_dtype) else 0
        if dst is None:
            tag = ""
            if mode == 1 or m.groups or m.format == target:
                tag = (_lib.s(c.dll.amn_dtype_name(out)) or "").lower()
            output = _default_output(os.fspath(src), tag, _ext(fmt))
        else:
            output = os.fspath(dst)
        return _run(m, mode=mode, target=target, out_dtype=out, output=output,
                    overwrite=overwrite, threads=threads, options=options, progress=progress,
                    no_sync=no_sync)


def forget(src: PathLike, to: str, dst: Optional[PathLike] = None, *,
           block_size: int = 0, keep: Sequence[str] = (), from_: Optional[str] = None,
           threads: int = 0, overwrite: bool = False, progress: Optional[ProgressFn] = None,
           no_sync: bool = False,
           limits: Union[Limits, Mapping[str, int], None] = None) -> ConvertResult:
    """``amn forget``: quantize ``src`` to the encode target ``to``
    ("bnb-nf4", "bnb-fp4", "bnb-int8", ... as :func:`plugins` lists) into a
    safetensors file; tensors matching a ``keep`` glob are never encoded.
    The result carries the encoder's ``quantization_config`` (the CLI
    writes it into a config.json beside the output; this function does not)."""
    if not _is_encode_target(to):
        raise UnsupportedError(f"unsupported: no loaded plugin encodes '{to}'")
    eo = _lib.EncodeOptions(struct_size=ctypes.sizeof(_lib.EncodeOptions), target=to.encode(),
                            block_size=block_size)
    with _open(src, from_=from_, limits=limits) as m:
        output = os.fspath(dst) if dst is not None else _default_output(os.fspath(src), to,
                                                                         "safetensors")
        return _run(m, mode=0, target="safetensors", out_dtype=_lib.DT_BF16, output=output,
                    overwrite=overwrite, threads=threads, options=(), progress=progress,
                    no_sync=no_sync, encode=eo, keep=keep)


@dataclass(frozen=True)
class Finding:
    """One thing a scan found: ``kind`` ("global", "call", "object", ...),
    ``what`` ("os.system"), ``where`` (member, "" for the file), ``offset``
    (None if none) and whether it alone makes the file ``unsafe``."""

    kind: str
    what: str
    where: str
    offset: Optional[int]
    unsafe: bool


@dataclass(frozen=True)
class ScanReport:
    """``amn scan``'s verdict on a file: nothing was executed or imported."""

    path: str
    format: str
    unsafe: bool
    findings: List[Finding]
    dropped: int

    @property
    def safe(self) -> bool:
        return not self.unsafe


def scan(path: PathLike, *, from_: Optional[str] = None,
         limits: Union[Limits, Mapping[str, int], None] = None) -> ScanReport:
    """Audit a file without loading it (pickle globals, code-carrying
    opcodes, container anomalies). Returns a report however hostile the
    file; raises only when it cannot be read at all."""
    c = ctx()
    from ._model import resolve
    real = resolve(path)
    lim = limits_arg(limits)
    r = ctypes.c_void_p()
    err = _lib.Error_()
    check(c.dll.amn_scan(c.p, os.fsencode(real), _lib.b(from_), ctypes.byref(lim) if lim else None,
                         ctypes.byref(r), ctypes.byref(err)), err)
    try:
        fs = []
        for i in range(c.dll.amn_scan_count(r)):
            f = c.dll.amn_scan_get(r, i).contents
            fs.append(Finding(_lib.s(f.kind) or "", _lib.s(f.what) or "", _lib.s(f.where) or "",
                              None if f.offset == 2**64 - 1 else f.offset, bool(f.unsafe)))
        return ScanReport(real, _lib.s(c.dll.amn_scan_format(r)) or "",
                          bool(c.dll.amn_scan_unsafe(r)), fs, c.dll.amn_scan_dropped(r))
    finally:
        c.dll.amn_scan_free(r)


@dataclass(frozen=True)
class Plugin:
    """A plugin the registry found (``amn plugins``): ``status`` is "loaded",
    "shadowed" or "rejected" (``reason`` says why)."""

    name: str
    version: str
    description: str
    license: str
    file: str
    status: str
    reason: Optional[str]
    abi: str
    formats: List[str] = field(default_factory=list)
    schemes: List[str] = field(default_factory=list)
    encode_targets: List[str] = field(default_factory=list)
    writes: List[str] = field(default_factory=list)


def plugins() -> List[Plugin]:
    """Every plugin found, loaded or not, as ``amn plugins`` lists them."""
    c = ctx()
    out = []
    pi = _lib.PluginInfo()
    for i in range(c.dll.amn_ctx_plugin_count(c.p)):
        if c.dll.amn_ctx_plugin(c.p, i, ctypes.byref(pi)) != 0:
            continue
        fmts = [pi.formats[k].contents for k in range(pi.n_formats)]
        schemes = [pi.schemes[k].contents for k in range(pi.n_schemes)]
        targets: List[str] = []
        for sc in schemes:
            has = sc.struct_size >= _lib.Scheme.encoder.offset + ctypes.sizeof(ctypes.c_void_p)
            if has and sc.encoder:
                t = sc.encoder.contents.targets
                k = 0
                while t[k]:
                    targets.append(_lib.s(t[k]) or "")
                    k += 1
        out.append(Plugin(
            name=_lib.s(pi.name) or "", version=_lib.s(pi.version) or "",
            description=_lib.s(pi.description) or "", license=_lib.s(pi.license) or "",
            file=_lib.s(pi.file) or "", status=_lib.s(pi.status) or "",
            reason=_lib.s(pi.reason), abi=f"{pi.abi_major}.{pi.abi_minor}",
            formats=[_lib.s(f.name) or "" for f in fmts],
            schemes=[_lib.s(sc.name) or "" for sc in schemes],
            encode_targets=targets,
            writes=[_lib.s(f.name) or "" for f in fmts if f.writer]))
    return out


@dataclass(frozen=True)
class Matrix:
    """The conversions the loaded plugins support: every input format
    converts to every target (quantized schemes dequantized on the way);
    ``encode_targets`` are what :func:`forget` can write."""

    inputs: List[str]
    targets: List[str]
    encode_targets: List[str]

    def supports(self, src_format: str, target: str) -> bool:
        return src_format in self.inputs and (target in self.targets
                                              or target in self.encode_targets)


def conversion_matrix() -> Matrix:
    """The (input format x target) matrix, as ``amn plugins`` prints it."""
    c = ctx()
    ins = [_lib.s(c.dll.amn_matrix_input(c.p, i)) or "" for i in range(c.dll.amn_matrix_inputs(c.p))]
    outs = [_lib.s(c.dll.amn_matrix_target(c.p, j)) or ""
            for j in range(c.dll.amn_matrix_targets(c.p))]
    enc = [t for p in plugins() if p.status == "loaded" for t in p.encode_targets]
    return Matrix(ins, outs, enc)
