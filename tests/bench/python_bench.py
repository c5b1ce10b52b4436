#!/usr/bin/python3
"""Benchmarks of the Python package (not run by ctest).

    AMN_LIBRARY=build/lib/libamn.so PYTHONPATH=python \\
        /usr/bin/python3 tests/bench/python_bench.py [scratch dir]

1. Every tensor of a 256 MiB F32 safetensors file (64 tensors of 4 MiB)
   into NumPy arrays: amn.open + model[name] (zero-copy views) against
   numpy.fromfile per tensor (the file read into memory); bytes compared.
2. A 4096x11008 GPTQ 4-bit weight (group 128, F16 scales, g_idx) to
   float32: model.dequantize against a plain NumPy dequantizer of the same
   layout written from the GPTQ formula (shared corpus README section 4);
   values compared bit for bit.

Each timing is the best of 5 runs after a warm-up (page cache warm for
both sides); the ratios are what matters on a loaded machine.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
import time

import numpy as np

import amn


def best(fn, n=5):
    fn()
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def write_st(path, tensors):
    head, off = {}, 0
    for name, a in tensors:
        head[name] = {"dtype": {"<f4": "F32", "<i4": "I32", "<f2": "F16"}[a.dtype.str],
                      "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in tensors:
            f.write(a.tobytes())
    return 8 + len(h), head


def bench_read(d):
    rng = np.random.default_rng(0)
    ts = [(f"layer.{i}.weight", rng.standard_normal((1024, 1024), dtype=np.float32))
          for i in range(64)]
    path = os.path.join(d, "f32_256mib.safetensors")
    base, head = write_st(path, ts)
    del ts

    def with_amn():
        with amn.open(path) as m:
            return {n: m[n] for n in m}

    def with_fromfile():
        out = {}
        for n, e in head.items():
            lo, hi = e["data_offsets"]
            out[n] = np.fromfile(path, "<f4", (hi - lo) // 4, offset=base + lo).reshape(e["shape"])
        return out

    a, b = with_amn(), with_fromfile()
    assert a.keys() == b.keys() and all(np.array_equal(a[n].view("<u4"), b[n].view("<u4"))
                                        for n in a)
    del a, b
    ta, tb = best(with_amn), best(with_fromfile, n=3)
    print(f"read 256 MiB F32 safetensors, 64 tensors: amn {ta * 1e3:.2f} ms, "
          f"numpy.fromfile {tb * 1e3:.1f} ms, ratio {tb / ta:.0f}x (bytes identical)")
    os.unlink(path)


def numpy_gptq(qweight, qzeros, scales, g_idx):
    """Plain NumPy GPTQ v1 dequantizer as GPTQModel computes it: the v1 -> v2
    conversion adds 1 to every zero field of the packed word at once
    (qzeros + 0x11111111, so a stored 15 wraps to 0 and carries), then
    y[i][j] = scale[g][j] * (q[i][j] - z2[g][j]); output [in][out] (the
    layout of its dequantize_weight)."""
    pf, mask = 8, 15
    shifts = np.arange(pf, dtype=np.uint32) * 4
    qw = qweight.view(np.uint32)
    q = ((qw[:, None, :] >> shifts[None, :, None]) & mask).reshape(-1, qw.shape[1])
    qz = qzeros.view(np.uint32) + np.uint32(0x11111111)  # wraps modulo 2**32
    z = ((qz[:, :, None] >> shifts[None, None, :]) & mask).reshape(qz.shape[0], -1)
    diff = q.astype(np.int32) - z[g_idx].astype(np.int32)
    return scales[g_idx].astype(np.float32) * diff.astype(np.float32)


def bench_gptq(d):
    n_in, n_out, gs = 4096, 11008, 128
    rng = np.random.default_rng(1)
    G = n_in // gs
    qweight = rng.integers(0, 2**32, (n_in // 8, n_out), dtype=np.uint32).view("<i4")
    qzeros = rng.integers(0, 2**32, (G, n_out // 8), dtype=np.uint32).view("<i4")
    scales = (rng.standard_normal((G, n_out)) * 0.01).astype("<f2")
    g_idx = (np.arange(n_in) // gs).astype("<i4")
    P = "model.layers.0.mlp.gate_proj"
    path = os.path.join(d, "gptq.safetensors")
    write_st(path, [(P + ".qweight", qweight), (P + ".qzeros", qzeros), (P + ".scales", scales),
                    (P + ".g_idx", g_idx)])
    with amn.open(path) as m:
        got = m.dequantize(P + ".weight", "float32")
        want = numpy_gptq(qweight, qzeros, scales, g_idx)
        assert got.shape == (n_out, n_in)
        same = np.array_equal(got.view("<u4"), np.ascontiguousarray(want.T).view("<u4"))
        assert same, "values differ"
        tn = best(lambda: numpy_gptq(qweight, qzeros, scales, g_idx), n=3)
        t1 = best(lambda: m.dequantize(P + ".weight", "float32", threads=1))
        tt = best(lambda: m.dequantize(P + ".weight", "float32"))
    print(f"GPTQ 4-bit 4096x11008 to float32: numpy {tn * 1e3:.0f} ms ([in, out], no transpose), "
          f"amn 1 thread {t1 * 1e3:.1f} ms ({tn / t1:.0f}x), amn default threads "
          f"{tt * 1e3:.1f} ms ({tn / tt:.0f}x); values identical; simd {amn.simd()}")
    os.unlink(path)


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    print(f"libamn: {amn.library_path()}, cores: {os.cpu_count()}, load: {os.getloadavg()}")
    bench_read(d)
    bench_gptq(d)


if __name__ == "__main__":
    main()
