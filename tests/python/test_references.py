"""Every format and scheme through the Python API against the references
the C suites use: the shared corpus's goldens (bit for bit, F32 and BF16)
and the project's generated fixtures."""

from __future__ import annotations

import glob
import json
import os
import struct

import numpy as np
import pytest

import amn
import refs
from conftest import fixture_path, reference_dir

SCHEMES = {"gptq": refs.gptq, "awq": refs.awq, "fp8": refs.fp8, "bnb": refs.bnb}
DIRS = {"gptq": "gptq_reference", "awq": "awq_reference", "fp8": "fp8_reference",
        "bnb": "bnb_reference"}


def check_golden(g: refs.Golden, tmp_path, threads=(1, 3)) -> int:
    p = str(tmp_path / (os.path.basename(g.path) + ".safetensors"))
    refs.write_safetensors(p, g.tensors, g.meta)
    with amn.open(p) as m:
        assert g.weight in m.groups, (g.path, list(m.groups))
        assert m.groups[g.weight].scheme == g.kind
        for th in threads:
            f32 = m.dequantize(g.weight, "float32", threads=th)
            assert f32.shape == g.shape
            bad = np.count_nonzero(f32.view("<u4") != g.f32)
            assert bad == 0, f"{g.path}: {bad} F32 values differ (threads {th})"
        b16 = m.dequantize(g.weight, "bfloat16")
        assert np.array_equal(b16, g.bf16 if g.bf16 is not None else refs.bf16_rne(g.f32))
        f16 = m.dequantize(g.weight, "float16")
        assert np.array_equal(f16, g.f32.view("<f4").astype(np.float16))
        logical = dict(m.items(dtype="float32"))
        assert np.array_equal(logical[g.weight].view("<u4"), g.f32)
    return g.f32.size


@pytest.mark.parametrize("kind", sorted(SCHEMES))
def test_scheme_goldens(kind, tmp_path, need):
    need("safetensors", kind)
    files = refs.bins(os.path.join(reference_dir(), DIRS[kind]))
    assert files, DIRS[kind]
    for f in files:
        check_golden(SCHEMES[kind](f), tmp_path)


def test_gptq_lowbit_fixtures(tmp_path, need):
    """The project's independent packer's data (fixtures/gptq, 2/3/4/8-bit)."""
    need("safetensors", "gptq")
    files = refs.bins(fixture_path("gptq"))
    assert len(files) >= 8
    for f in files:
        check_golden(refs.gptq(f), tmp_path)
    g = refs.gptq(files[0])
    p = str(tmp_path / "g.safetensors")
    refs.write_safetensors(p, g.tensors)
    with amn.open(p) as m:
        with pytest.raises(KeyError, match="model.dequantize"):
            m[g.weight]  # a logical tensor, not a stored one


def test_gguf_goldens(tmp_path, need):
    need("gguf")
    files = refs.bins(os.path.join(reference_dir(), "gguf_reference"))
    assert len(files) >= 15
    for f in files:
        g = refs.gguf(f)
        p = str(tmp_path / "t.gguf")
        refs.write_gguf(p, "blk.0.ffn_up.weight", g.ggml_type, g.n, g.raw)
        with amn.open(p) as m:
            info = m.tensors["blk.0.ffn_up.weight"]
            assert info.dtype == "BLOCK" and info.encoding
            raw = m["blk.0.ffn_up.weight"]
            assert raw.dtype == np.uint8 and raw.tobytes() == g.raw
            f32 = m.dequantize("blk.0.ffn_up.weight", "float32")
            bad = np.count_nonzero(f32.ravel().view("<u4") != g.f32)
            assert bad == 0, f"{f} ({info.encoding}): {bad} values differ"
            assert np.array_equal(m.dequantize("blk.0.ffn_up.weight").ravel(), g.bf16)
            assert m.metadata["general.architecture"] == "llama"


def test_safetensors_headers(need):
    need("safetensors")
    d = os.path.join(reference_dir(), "safetensors_reference")
    for exp_path in sorted(glob.glob(os.path.join(d, "*.expected.json"))):
        exp = json.load(open(exp_path))
        path = exp_path.replace(".expected.json", ".safetensors")
        raw = open(path, "rb").read()
        with amn.inspect(path) as m:
            assert {k: v for k, v in m.metadata.items()} == exp["metadata"]
            got = sorted(m.tensors.values(), key=lambda t: t.name)
            assert [t.name for t in got] == [t["name"] for t in exp["tensors"]]
            for t, e in zip(got, exp["tensors"]):
                assert t.dtype == e["dtype"] and list(t.shape) == e["shape"]
                assert t.nbytes == e["data_offsets"][1] - e["data_offsets"][0]
                assert t.file_offset == 8 + exp["header_size"] + e["data_offsets"][0]
        with amn.open(path) as m:
            for e in exp["tensors"]:
                a = m[e["name"]]
                lo = 8 + exp["header_size"] + e["data_offsets"][0]
                assert a.tobytes() == raw[lo:8 + exp["header_size"] + e["data_offsets"][1]]


def test_npz_reference(need):
    need("npz")
    d = os.path.join(reference_dir(), "npz_reference")
    b = open(os.path.join(d, "gemma_scope_reference.bin"), "rb").read()
    (n,), o = struct.unpack_from("<I", b, 0), 4
    want = {}
    for _ in range(n):
        (ln,) = struct.unpack_from("<I", b, o)
        name = b[o + 4:o + 4 + ln].decode()
        o += 4 + ln
        (nd,) = struct.unpack_from("<I", b, o)
        o += 4 + 8 * nd
        dt, dl = struct.unpack_from("<II", b, o)
        o += 8
        want[name] = (dt, b[o:o + dl])
        o += dl
    assert o == len(b)
    with amn.open(os.path.join(d, "gemma_scope_small.npz")) as m:
        assert len(m) == n
        for name, (dt, data) in want.items():
            a = m[name]
            assert dt == 11 and a.dtype == np.float32 and a.size == 8
            assert a.tobytes() == data


def test_pth_reference(need):
    need("pth")
    d = os.path.join(reference_dir(), "pth_reference")
    for jp in sorted(glob.glob(os.path.join(d, "*_reference.json"))):
        exp = json.load(open(jp))
        with amn.open(jp.replace("_reference.json", ".pth")) as m:
            assert list(m) == [t["name"] for t in exp["tensors"]]
            for t in exp["tensors"]:
                a = m[t["name"]]
                assert list(a.shape) == t["shape"] and m.tensors[t["name"]].dtype == t["dtype"]
                assert np.ascontiguousarray(a).tobytes().hex() == t["data_hex"]


@pytest.mark.parametrize("fmt", ["npz", "pth"])
def test_project_fixtures(fmt, need):
    """fixtures/<fmt>/expected.json (made by the generators with NumPy /
    torch): every readable file's tensors and bytes; every hostile one's class."""
    need(fmt)
    exp = json.load(open(fixture_path(fmt, "expected.json")))
    n = 0
    for fname, e in sorted(exp.items()):
        if "error" in e:
            continue
        with amn.open(fixture_path(fmt, fname)) as m:
            assert m.label == e["label"], fname
            assert [t["name"] for t in e["tensors"]] == list(m), fname
            for t in e["tensors"]:
                a = m[t["name"]]
                assert m.tensors[t["name"]].dtype == t["dtype"], (fname, t["name"])
                assert list(a.shape) == t["shape"]
                assert np.ascontiguousarray(a).tobytes().hex() == t["data_hex"], (fname, t["name"])
                n += 1
    assert n > 10


def is_nan(a: np.ndarray, dt: str) -> np.ndarray:
    u = a.ravel()
    if dt == "bfloat16" and a.dtype == np.uint16:
        return (u & 0x7FFF) > 0x7F80
    return np.isnan(u) if a.dtype.kind == "f" else np.zeros(u.shape, bool)


def same_bits(a: np.ndarray, b: np.ndarray, dt: str) -> bool:
    """Bit-equal, except that a NaN only has to be a NaN (its payload is free)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    diff = a.ravel().view(f"u{a.dtype.itemsize}") != b.ravel().view(f"u{b.dtype.itemsize}")
    return not np.any(diff & ~(is_nan(a, dt) & is_nan(b, dt)))


CLASSES = {"parse": amn.ParseError, "unsupported": amn.UnsupportedError,
           "limit": amn.LimitError, "disallowed": amn.DisallowedError}


def test_scheme_fixture_cases(need):
    """fixtures/{ctensors,mxfp4,nvfp4,fp8}/cases.txt, as the C fixture tests read them:
    every ok case's weights equal its expected-<dtype>.safetensors (made by
    the generators from the reference libraries' code), every bad case
    raises its class with its words."""
    n = 0
    for fam in ("ctensors", "mxfp4", "nvfp4", "fp8"):
        need("safetensors", fam)
        for line in open(fixture_path(fam, "cases.txt")):
            if not line.strip() or line.startswith("#"):
                continue
            kind, case, *rest = line.split(None, 3)
            model = fixture_path(fam, case, "model.safetensors")
            if kind == "bad":
                cls, words = rest[0], rest[1].strip().split("|")
                with pytest.raises(CLASSES[cls]) as e:
                    amn.open(model)
                assert all(w in str(e.value) for w in words), (case, str(e.value))
                continue
            with amn.open(model) as m:
                assert m.groups, (fam, case)
                for dt, tag in (("float32", "f32"), ("bfloat16", "bf16"), ("float16", "f16")):
                    with amn.open(fixture_path(fam, case, f"expected-{tag}.safetensors")) as x:
                        for name in x:
                            got = m.dequantize(name, dt) if name in m.groups else m[name]
                            assert same_bits(got, x[name], dt), (fam, case, tag, name)
                            n += 1
    assert n > 10
