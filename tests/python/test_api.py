"""The Python API over libamn: opening, views (zero-copy, lifetime),
dequantize, items, conversions, scan, plugins, errors, threads."""

from __future__ import annotations

import gc
import json
import os
import threading
import weakref

import numpy as np
import pytest

import amn
from amn import _model
from conftest import fixture_path, no_sanitizer
from refs import T, bf16_rne, write_safetensors


def st_file(tmp_path, tensors, meta=None, name="m.safetensors"):
    p = str(tmp_path / name)
    write_safetensors(p, tensors, meta)
    return p


def mapped_ranges(path):
    """[start, end) of every mapping of `path` in this process (/proc/self/maps)."""
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip() == real:
                a, b = (int(x, 16) for x in parts[0].split("-"))
                out.append((a, b))
    return out


def test_library_and_plugins(loaded, need):
    assert os.path.exists(amn.library_path())
    ps = amn.plugins()
    assert ps and all(p.status in ("loaded", "shadowed", "rejected") for p in ps)
    need("safetensors")
    m = amn.conversion_matrix()
    assert "safetensors" in m.inputs and "safetensors" in m.targets
    assert m.supports("safetensors", "safetensors")
    assert not m.supports("nonesuch", "safetensors")
    if "bnb" in loaded:
        assert "bnb-nf4" in m.encode_targets


def test_zero_copy_views_lie_in_the_mapping(tmp_path, need):
    need("safetensors")
    a = np.arange(4096, dtype="<f4").reshape(64, 64)
    i = np.arange(-8, 8, dtype="<i8")
    p = st_file(tmp_path, [T("a", "F32", a.shape, a.tobytes()), T("i", "I64", i.shape, i.tobytes()),
                           T("e", "F32", (0, 3), b"")], {"k": "v"})
    with amn.open(p) as m:
        assert m.format == "safetensors" and m.metadata == {"k": "v"}
        assert m.tensors["a"].dtype == "F32" and m.tensors["a"].shape == (64, 64)
        assert m.tensors["a"].role is None and m.groups == {} and m.scheme is None
        v = m["a"]
        assert v.dtype == np.float32 and v.shape == (64, 64) and not v.flags.writeable
        assert np.array_equal(v, a) and np.array_equal(m["i"], i)
        assert m["e"].shape == (0, 3)
        with pytest.raises(ValueError):
            v[0, 0] = 1
        # The array's buffer lies inside this process's mapping of the file.
        addr = v.__array_interface__["data"][0]
        ranges = mapped_ranges(p)
        assert any(lo <= addr and addr + v.nbytes <= hi for lo, hi in ranges), ranges
        # ...at the tensor's file offset.
        lo = [r for r in ranges if r[0] <= addr < r[1]][0][0]
        assert addr - lo == m.tensors["a"].file_offset
        assert v.base is not None and np.shares_memory(v, m["a"])


def test_views_outlive_the_model(tmp_path, need):
    need("safetensors")
    a = np.linspace(-1, 1, 1000, dtype="<f4")
    p = st_file(tmp_path, [T("a", "F32", a.shape, a.tobytes())])
    m = amn.open(p)
    v = m["a"]
    h = weakref.ref(m._h)
    m.close()
    assert m.closed
    with pytest.raises(amn.InvalidError, match="closed"):
        m["a"]
    gc.collect()
    assert h() is not None and mapped_ranges(p)  # the view holds the mapping
    assert np.array_equal(v, a)
    del v, m
    gc.collect()
    assert h() is None and not mapped_ranges(p)  # released with the last view


def test_replaced_file_keeps_views_valid(tmp_path, need):
    """Writers that replace a file by rename (as amn does) leave open
    mappings intact; only truncation in place would SIGBUS (python/README.md)."""
    need("safetensors")
    a = np.arange(100, dtype="<f4")
    p = st_file(tmp_path, [T("a", "F32", a.shape, a.tobytes())])
    with amn.open(p) as m:
        v = m["a"]
        q = st_file(tmp_path, [T("a", "F32", a.shape, (a * 2).tobytes())], name="new")
        os.replace(q, p)
        assert np.array_equal(v, a)
    with amn.open(p) as m:
        assert np.array_equal(m["a"], a * 2)


def test_bf16_f16_and_requested_dtypes(tmp_path, need):
    need("safetensors")
    f = np.array([1.0, -2.5, 3.140625, 65504.0, -0.0, np.inf], "<f4")
    bf = (f.view("<u4") >> 16).astype("<u2")
    h = f.astype("<f2")
    p = st_file(tmp_path, [T("b", "BF16", (6,), bf.tobytes()), T("h", "F16", (6,), h.tobytes()),
                           T("i", "I32", (2,), b"\1\0\0\0\2\0\0\0")])
    with amn.open(p) as m:
        b = m["b"]
        assert b.dtype == np.uint16 and np.array_equal(b, bf)
        recipe = (b.astype(np.uint32) << 16).view(np.float32)  # the documented recipe
        f32 = m.read("b", dtype="float32")
        assert f32.dtype == np.float32 and f32.view("<u4").tolist() == recipe.view("<u4").tolist()
        assert np.array_equal(m.read("h", "float32").view("<u4"), h.astype("<f4").view("<u4"))
        assert np.array_equal(m.read("h", "bfloat16"), bf16_rne(m.read("h", "float32").view("<u4")))
        with pytest.raises(amn.InvalidError, match="not a floating"):
            m.read("i", "float32")
        with pytest.raises(amn.InvalidError, match="float32"):
            m.read("b", "int8")
        with pytest.raises(KeyError):
            m["nope"]


def test_big_endian_and_strided_views(need):
    """pth fixtures: big-endian storage comes back swapped (a copy); a view
    into a shared storage comes back as a zero-copy strided array."""
    need("pth")
    exp = json.load(open(fixture_path("pth", "expected.json")))
    for fname in ("big_endian.pth", "views.pth"):
        with amn.open(fixture_path("pth", fname)) as m:
            for t in exp[fname]["tensors"]:
                a = m[t["name"]]
                assert list(a.shape) == t["shape"]
                assert np.ascontiguousarray(a).tobytes().hex() == t["data_hex"], (fname, t["name"])
            if fname == "big_endian.pth":
                assert any(i.big_endian for i in m.tensors.values())
                for n, i in m.tensors.items():
                    if i.big_endian and i.nbytes > 1:
                        assert m[n].flags.owndata or m[n].base is None or m[n].flags.writeable
            else:
                strided = [n for n, i in m.tensors.items() if i.strided]
                assert strided
                for n in strided:
                    assert not m[n].flags.writeable and m[n].base is not None


def test_inspect_reads_no_data(tmp_path, need):
    need("safetensors")
    p = st_file(tmp_path, [T("a", "F32", (2,), bytes(8))])
    with amn.inspect(p) as m:
        assert m.header_only and m.tensors["a"].nbytes == 8
        with pytest.raises(amn.InvalidError, match="inspected"):
            m["a"]


def test_dequantize_and_items(need):
    need("safetensors", "fp8")
    with amn.open(fixture_path("example", "tiny-fp8.safetensors")) as m:
        (name,) = m.groups
        g = m.groups[name]
        assert g.scheme == "fp8" and "128x128" in (g.label or "")
        w32 = m.dequantize(name, "float32")
        assert w32.shape == g.shape and w32.dtype == np.float32
        # BF16 is the RNE narrowing of the F32 values; F16 likewise.
        assert np.array_equal(m.dequantize(name), bf16_rne(w32.view("<u4")))
        assert np.array_equal(m.dequantize(name, "float16"), w32.astype(np.float16))
        for th in (1, 2, 3):
            assert np.array_equal(m.dequantize(name, "float32", threads=th), w32)
        items = dict(m.items(dtype="float32"))
        assert np.array_equal(items[name], w32)
        assert not any(n.endswith("input_scale") or n.endswith("scale_inv") for n in items)
        assert items["model.norm.weight"].dtype == np.float32
        with pytest.raises(KeyError):
            m.dequantize("model.norm.weight")
    with amn.inspect(fixture_path("example", "tiny-fp8.safetensors")) as m:
        with pytest.raises(amn.InvalidError, match="inspected"):
            m.dequantize(name, "float32")


def test_hostile_files_raise_their_class(need):
    """Every malformed fixture whose expected outcome is an error class
    raises that class, with libamn's message."""
    classes = {"parse": amn.ParseError, "limit": amn.LimitError,
               "disallowed": amn.DisallowedError, "unsupported": amn.UnsupportedError}
    seen = set()
    for fmt in ("pth", "npz"):
        need(fmt)
        exp = json.load(open(fixture_path(fmt, "expected.json")))
        for fname, e in exp.items():
            if "error" not in e:
                continue
            with pytest.raises(classes[e["error"]]) as info:
                amn.open(fixture_path(fmt, fname))
            assert str(info.value) and info.value.error_class == e["error"]
            assert isinstance(info.value, amn.Error)
            seen.add(e["error"])
    assert {"parse", "limit", "disallowed"} <= seen


def test_errors_map_to_python_classes(tmp_path, need):
    need("safetensors")
    with pytest.raises(amn.IoError) as e:
        amn.open(str(tmp_path / "missing.safetensors"))
    assert isinstance(e.value, OSError) and "missing.safetensors" in str(e.value)
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\0\0\0\0\0\0\0{\"a\": 1}        ")
    with pytest.raises(amn.ParseError):
        amn.open(str(bad), from_="safetensors")
    big = st_file(tmp_path, [T(f"t{i}", "F32", (1,), bytes(4)) for i in range(5)])
    with pytest.raises(amn.LimitError, match="tensors"):
        amn.open(big, limits={"max_tensors": 3})
    with pytest.raises(amn.LimitError):
        amn.open(big, limits=amn.Limits(max_header_bytes=16))
    with amn.open(big, limits=amn.Limits(max_tensors=5)) as m:
        assert len(m) == 5
    with pytest.raises(amn.InvalidError) as e:
        amn.remember(big, str(tmp_path / "x.safetensors"), to="i8")
    assert isinstance(e.value, ValueError)


def test_ratio_limit_spares_small_members(tmp_path, need):
    """max_ratio applies only to members inflating past ratio_min_size."""
    need("npz")
    path = str(tmp_path / "z.npz")
    np.savez_compressed(path, z=np.zeros(1 << 16, np.float32))
    import zipfile
    usize = zipfile.ZipFile(path).infolist()[0].file_size
    with amn.open(path, limits=amn.Limits(max_ratio=1, ratio_min_size=usize)) as m:
        assert len(m) == 1
    with pytest.raises(amn.LimitError, match="ratio cap"):
        amn.open(path, limits=amn.Limits(max_ratio=1, ratio_min_size=usize - 1))
    with amn.open(path, limits={"max_ratio": 0, "ratio_min_size": 0}) as m:
        assert len(m) == 1


def test_remember_convert_progress(tmp_path, need):
    need("safetensors", "fp8", "npz")
    src = fixture_path("example", "tiny-fp8.safetensors")
    seen = []
    r = amn.remember(src, str(tmp_path / "out.safetensors"), to="f32", progress=seen.append,
                     no_sync=True)
    assert r.dequantized == 1 and r.dropped == 1 and r.out_dtype == "F32"
    assert seen and seen[-1].bytes_done == seen[-1].bytes_total == r.bytes_written
    assert seen[-1].tensor_name is None and seen[0].tensor_count == r.tensors_written
    with amn.open(src) as m, amn.open(r.output) as o:
        (name,) = m.groups
        assert np.array_equal(o[name], m.dequantize(name, "float32"))
    with pytest.raises(amn.InvalidError, match="exists"):
        amn.remember(src, r.output, to="f32")

    def boom(p):
        raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        amn.remember(src, r.output, to="f32", overwrite=True, progress=boom, no_sync=True)
    c = amn.convert(r.output, "npz", str(tmp_path / "out.npz"), no_sync=True)
    assert c.target == "npz" and os.path.exists(c.output)
    with amn.open(c.output) as z, amn.open(r.output) as o:
        assert set(z) == set(o) and all(np.array_equal(z[n], o[n]) for n in z)
    # Default names beside the input, as the CLI makes them.
    d = tmp_path / "m-GPTQ-Int4.safetensors"
    write_safetensors(str(d), [T("a", "F32", (2,), bytes(8))])
    r2 = amn.remember(str(d), no_sync=True)
    assert r2.output == str(tmp_path / "m-bf16.safetensors") and os.path.exists(r2.output)
    with pytest.raises(amn.UnsupportedError, match="writes"):
        amn.convert(src, "nonesuch", str(tmp_path / "x"))


def test_forget(tmp_path, need):
    need("safetensors", "bnb")
    w = np.random.default_rng(1).standard_normal((64, 64)).astype("<f4")
    p = st_file(tmp_path, [T("l.weight", "F32", w.shape, w.tobytes()),
                           T("norm.weight", "F32", (64,), np.ones(64, "<f4").tobytes())])
    r = amn.forget(p, "bnb-nf4", str(tmp_path / "q.safetensors"), keep=["norm.*"], no_sync=True)
    assert r.encoded == 1 and r.encode_passed >= 1 and r.mean_abs_error and r.mean_abs_error > 0
    assert r.quantization_config and r.quantization_config.get("bnb_4bit_quant_type") == "nf4"
    with amn.open(r.output) as m:
        assert m.scheme == "bnb" and "l.weight" in m.groups
        back = m.dequantize("l.weight", "float32")
        assert back.shape == (64, 64) and np.abs(back - w).mean() < 0.2
    with pytest.raises(amn.UnsupportedError, match="encodes"):
        amn.forget(p, "nonesuch")


def test_scan(need):
    need("pth")
    r = amn.scan(fixture_path("pth", "hostile_system.pth"))
    assert r.unsafe and not r.safe and r.format == "pth"
    assert any("system" in f.what and f.unsafe for f in r.findings)
    ok = amn.scan(fixture_path("pth", "state_dict.pth"))
    assert ok.safe


def test_threads_read_models_concurrently(need):
    need("safetensors", "fp8")
    src = fixture_path("example", "tiny-fp8.safetensors")
    with amn.open(src) as m:
        (name,) = m.groups
        want = m.dequantize(name, "float32")
    errors = []

    def work():
        try:
            for _ in range(20):
                with amn.open(src) as mm:
                    got = mm.dequantize(name, "float32", threads=1)
                    assert np.array_equal(got, want)
                    assert mm["model.norm.weight"].shape == (160,)
        except BaseException as e:  # reported below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_one_registry_per_process():
    assert _model.ctx() is _model.ctx()


@no_sanitizer
def test_truncated_while_open_is_sigbus(tmp_path, need):
    """What python/README.md documents: a file truncated in place while
    mapped kills the reader by SIGBUS when a view touches the lost pages."""
    import signal
    import subprocess
    import sys

    need("safetensors")
    a = np.zeros(1 << 16, "<f4")
    p = st_file(tmp_path, [T("a", "F32", a.shape, a.tobytes())])
    code = ("import os, sys, amn\n"
            "m = amn.open(sys.argv[1]); v = m['a']\n"
            "os.truncate(sys.argv[1], 64)\n"
            "print(float(v[-1]))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run([sys.executable, "-c", code, p], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == -signal.SIGBUS, (r.returncode, r.stderr[-500:])


def test_complex_arrays(tmp_path, need):
    """complex64 / complex128 arrays (either byte order) read as NumPy's
    complex dtypes, values intact; never converted to a real dtype."""
    need("npz")
    path = str(tmp_path / "c.npz")
    rng = np.random.default_rng(5)
    a = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype("<c8")
    b = (rng.standard_normal(6) - 1j * rng.standard_normal(6)).astype(">c16")
    np.savez(path, a=a, b=b)
    with amn.open(path) as m:
        assert m.tensors["a"].dtype == "C64" and m.tensors["b"].dtype == "C128"
        assert m["a"].dtype == np.complex64 and np.array_equal(m["a"], a)
        assert m["b"].dtype == np.complex128 and np.array_equal(m["b"], b)
        with pytest.raises(amn.InvalidError, match="not a floating type"):
            m.read("a", "float32")
