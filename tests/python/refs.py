"""Reading the reference corpus (../shared/fixtures, README.md there) and
writing the containers amn then opens: a safetensors writer and a GGUF v3
writer, both minimal and written here from the formats' specs. The goldens'
layouts (AMNQ, AMNA, AMNF, AMNB, AMNG) are those of the corpus README; the
tensor names are the ones the C suites use (tests/<scheme>/test_*_scheme.c)."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

P = "model.layers.0.mlp.gate_proj"
SCALE_DTYPES = {0: ("F32", "<f4"), 1: ("BF16", "<u2"), 2: ("F16", "<f2")}
NP_OF = {"F32": "<f4", "F16": "<f2", "BF16": "<u2", "I32": "<i4", "U8": "u1", "I8": "i1",
         "F8_E4M3": "u1", "F64": "<f8", "I64": "<i8", "I16": "<i2", "U16": "<u2", "BOOL": "?",
         "U32": "<u4", "U64": "<u8"}


@dataclass
class T:
    """A tensor to write: name, safetensors dtype, shape, raw bytes."""

    name: str
    dtype: str
    shape: Tuple[int, ...]
    data: bytes


def write_safetensors(path: str, tensors: Sequence[T], meta: Optional[Dict[str, str]] = None) -> None:
    head: Dict[str, object] = {}
    if meta:
        head["__metadata__"] = meta
    off = 0
    for t in tensors:
        head[t.name] = {"dtype": t.dtype, "shape": list(t.shape),
                        "data_offsets": [off, off + len(t.data)]}
        off += len(t.data)
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for t in tensors:
            f.write(t.data)


def _gguf_str(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def write_gguf(path: str, name: str, ggml_type: int, n_elements: int, raw: bytes) -> None:
    """GGUF v3 with one 1-D tensor (ne0 = n_elements) and alignment 32."""
    kv = _gguf_str("general.architecture") + struct.pack("<I", 8) + _gguf_str("llama")
    info = _gguf_str(name) + struct.pack("<I", 1) + struct.pack("<Q", n_elements)
    info += struct.pack("<I", ggml_type) + struct.pack("<Q", 0)
    body = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + info
    body += b"\0" * (-len(body) % 32)
    with open(path, "wb") as f:
        f.write(body + raw)


def u32s(b: bytes, *offsets: int) -> List[int]:
    return [struct.unpack_from("<I", b, o)[0] for o in offsets]


@dataclass
class Golden:
    """A dequantization case: the tensors of a model, the name of the weight
    amn dequantizes, its shape, and the expected F32 and BF16 values."""

    path: str
    tensors: List[T]
    weight: str
    shape: Tuple[int, int]
    f32: np.ndarray  # uint32 bit patterns, shape `shape`
    bf16: Optional[np.ndarray]  # uint16 bit patterns
    kind: str
    meta: Dict[str, str] = field(default_factory=dict)


def _sections(b: bytes, start: int, lens: Sequence[int]) -> List[bytes]:
    out, o = [], start
    for n in lens:
        out.append(b[o:o + n])
        o += n
    assert o == len(b), "sections do not add up to the file size"
    return out


def gptq(path: str) -> Golden:
    b = open(path, "rb").read()
    assert b[:4] == b"AMNQ"
    bits, gs, n_in, n_out, sd, has_g, qwl, scl, qzl, gil, bl, fl = u32s(b, *range(8, 56, 4))
    qw, sc, qz, gi, bf, f3 = _sections(b, 56, [qwl, scl, qzl, gil, bl, fl])
    G = n_in // gs
    st = SCALE_DTYPES[sd][0]
    ts = [T(P + ".qweight", "I32", (qwl // 4 // n_out, n_out), qw),
          T(P + ".scales", st, (G, n_out), sc),
          T(P + ".qzeros", "I32", (G, qzl // 4 // G), qz)]
    if has_g:
        ts.append(T(P + ".g_idx", "I32", (n_in,), gi))
    ts.append(T(P + ".bias", "F16", (n_out,), bytes(2 * n_out)))
    # Goldens are [in][out]; the scheme writes nn.Linear's [out][in].
    f32 = np.frombuffer(f3, "<u4").reshape(n_in, n_out).T
    b16 = np.frombuffer(bf, "<u2").reshape(n_in, n_out).T
    return Golden(path, ts, P + ".weight", (n_out, n_in), f32, b16, "gptq")


def awq(path: str) -> Golden:
    b = open(path, "rb").read()
    assert b[:4] == b"AMNA"
    bits, gs, n_in, n_out, sd, qwl, scl, qzl, bl, fl = u32s(b, *range(8, 48, 4))
    qw, sc, qz, bf, f3 = _sections(b, 48, [qwl, scl, qzl, bl, fl])
    G = n_in // gs
    ts = [T(P + ".qweight", "I32", (n_in, n_out // 8), qw),
          T(P + ".qzeros", "I32", (G, n_out // 8), qz),
          T(P + ".scales", SCALE_DTYPES[sd][0], (G, n_out), sc),
          T("model.norm.weight", "F16", (n_in,), bytes(2 * n_in))]
    f32 = np.frombuffer(f3, "<u4").reshape(n_in, n_out).T
    b16 = np.frombuffer(bf, "<u2").reshape(n_in, n_out).T
    return Golden(path, ts, P + ".weight", (n_out, n_in), f32, b16, "awq")


def fp8(path: str) -> Golden:
    b = open(path, "rb").read()
    assert b[:4] == b"AMNF"
    scheme, sd, rows, cols, wl, sl, bl, fl = u32s(b, *range(8, 40, 4))
    w, s, bf, f3 = _sections(b, 40, [wl, sl, bl, fl])
    name = "model.layers.0.mlp.down_proj.weight"
    st = SCALE_DTYPES[sd][0]
    if scheme == 0:
        sc = T(name + "_scale_inv", st, ((rows + 127) // 128, (cols + 127) // 128), s)
    elif scheme == 1:
        sc = T(name + "_scale", st, (), s)
    else:
        sc = T(name + "_scale", st, (rows, 1), s)
    ts = [T(name, "F8_E4M3", (rows, cols), w), sc,
          T("model.norm.weight", "BF16", (256,), bytes(512))]
    f32 = np.frombuffer(f3, "<u4").reshape(rows, cols)
    b16 = np.frombuffer(bf, "<u2").reshape(rows, cols)
    return Golden(path, ts, name, (rows, cols), f32, b16, "fp8")


def bnb(path: str) -> Golden:
    b = open(path, "rb").read()
    assert b[:4] == b"AMNB"
    fmt = u32s(b, 8)[0]
    if fmt == 1:
        rows, cols, wl, scbl, bl, fl = u32s(b, *range(12, 36, 4))
        w, scb, bf, f3 = _sections(b, 36, [wl, scbl, bl, fl])
        ts = [T(P + ".weight", "I8", (rows, cols), w), T(P + ".SCB", "F32", (rows,), scb),
              T(P + ".weight_format", "U8", (), b"\0")]
    else:
        n, bs, wl, al, ql, nal, nql, bl, fl = u32s(b, *range(12, 48, 4))
        (offset,) = struct.unpack_from("<f", b, 48)
        w, a, q, na, nq, bf, f3 = _sections(b, 52, [wl, al, ql, nal, nql, bl, fl])
        rows, cols = 64, n // 64
        kind = "fp4" if q[4:8] == b"\xab\xaa\xaa\x3b" else "nf4"
        nested = fmt == 2
        blob = {"quant_type": kind, "blocksize": bs, "dtype": "bfloat16", "shape": [rows, cols]}
        if nested:
            blob.update({"nested_blocksize": 256, "nested_dtype": "float32",
                         "nested_offset": float(f"{offset:.9g}")})
        js = json.dumps(blob).encode()
        ts = [T(P + ".weight", "U8", (wl, 1), w),
              T(P + ".weight.absmax", "U8" if nested else "F32", (al if nested else al // 4,), a),
              T(P + ".weight.quant_map", "F32", (16,), q)]
        if nested:
            ts += [T(P + ".weight.nested_absmax", "F32", (nal // 4,), na),
                   T(P + ".weight.nested_quant_map", "F32", (256,), nq)]
        ts.append(T(P + ".weight.quant_state.bitsandbytes__" + kind, "U8", (len(js),), js))
    ts.append(T("model.norm.weight", "BF16", (64,), bytes(128)))
    f32 = np.frombuffer(f3, "<u4").reshape(rows, cols)
    b16 = np.frombuffer(bf, "<u2").reshape(rows, cols)
    return Golden(path, ts, P + ".weight", (rows, cols), f32, b16, "bnb")


@dataclass
class GgufGolden:
    path: str
    ggml_type: int
    n: int
    raw: bytes
    f32: np.ndarray
    bf16: np.ndarray


def gguf(path: str) -> GgufGolden:
    b = open(path, "rb").read()
    assert b[:4] == b"AMNG"
    t, n, rl, bl, fl = u32s(b, 8, 12, 16, 20, 24)
    raw, bf, f3 = _sections(b, 28, [rl, bl, fl])
    return GgufGolden(path, t, n, raw, np.frombuffer(f3, "<u4"), np.frombuffer(bf, "<u2"))


def bins(d: str) -> List[str]:
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".bin")) \
        if os.path.isdir(d) else []


def bf16_rne(f32_bits: np.ndarray) -> np.ndarray:
    """F32 bit patterns to BF16 by the corpus README's integer formula (§1)."""
    u = f32_bits.astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
