#!/usr/bin/python3
"""Inputs of tests/bench/input_states_bench.sh (random but valid data).

  input_states_gen.py DIR

writes into DIR, unless already there:
  st.safetensors    4 x F32 [4096, 4096]                          (256 MiB)
  pth.pth           torch.save of 4 x F32 [4096, 4096]            (256 MiB)
  npz.npz           numpy.savez of 4 x F32 [4096, 4096]           (256 MiB)
  q4k.gguf          2 x Q4_K [4096, 4096] (GGUF v3, alignment 32)  (18 MiB)
  fp8.safetensors   4 x F8_E4M3 [4096, 4096] + F32 128x128 block
                    scales (weight_scale_inv [32, 32])             (64 MiB)
  awq.safetensors   4 AutoAWQ GEMM layers 4096 -> 4096, group 128:
                    qweight I32 [4096, 512], qzeros I32 [32, 512],
                    scales F16 [32, 4096]                          (32 MiB)
The bench copies each into the state it measures; these are only the
masters. Debian's python3 has numpy and torch (python3-numpy, python3-torch).
"""
import json
import os
import struct
import sys

import numpy as np

N = 4096
rng = np.random.default_rng(17)


def st_write(path, tensors):
    """safetensors as save_file lays it out: header padded to 8 bytes."""
    hdr, off = {}, 0
    for name, dtype, shape, arr in tensors:
        hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + arr.nbytes]}
        off += arr.nbytes
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, _, arr in tensors:
            f.write(arr.tobytes())


def f32_weights(n=4):
    return {"layer.%d.weight" % i: rng.standard_normal((N, N), dtype=np.float32)
            for i in range(n)}


def make_st(path):
    st_write(path, [(k, "F32", [N, N], v) for k, v in f32_weights().items()])


def make_pth(path):
    import torch
    torch.save({k: torch.from_numpy(v) for k, v in f32_weights().items()}, path)


def make_npz(path):
    np.savez(path, **f32_weights())


def make_gguf(path):
    """GGUF v3 with two Q4_K tensors whose f16 scales d, dmin are finite."""
    def s(x):
        b = x.encode()
        return struct.pack("<Q", len(b)) + b
    nblk = N * N // 256
    tensors = []
    for i in range(2):
        q = rng.integers(0, 256, size=(nblk, 144), dtype=np.uint8)
        d = rng.uniform(1e-3, 1e-2, size=(nblk, 2)).astype(np.float16)
        q[:, 0:4] = d.view(np.uint8).reshape(nblk, 4)
        tensors.append(("blk.%d.ffn_up.weight" % i, q.tobytes()))
    kv = s("general.architecture") + struct.pack("<I", 8) + s("llama")
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), 1) + kv
    off = 0
    for name, data in tensors:
        head += s(name) + struct.pack("<IQQIQ", 2, N, N, 12, off)  # ggml type 12 = Q4_K
        off += len(data) + (-len(data) % 32)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head)
        for _, data in tensors:
            f.write(data + b"\0" * (-len(data) % 32))


def make_fp8(path):
    t = []
    for i in range(4):
        w = rng.integers(0, 256, size=(N, N), dtype=np.uint8)
        w[(w & 0x7F) == 0x7F] = 0  # no NaN encodings
        sc = rng.uniform(1e-3, 1e-1, size=(N // 128, N // 128)).astype(np.float32)
        t.append(("layer.%d.weight" % i, "F8_E4M3", [N, N], w))
        t.append(("layer.%d.weight_scale_inv" % i, "F32", [N // 128, N // 128], sc))
    st_write(path, t)


def make_awq(path):
    t = []
    g = N // 128
    for i in range(4):
        qw = rng.integers(0, 2**32, size=(N, N // 8), dtype=np.uint32).view(np.int32)
        qz = rng.integers(0, 2**32, size=(g, N // 8), dtype=np.uint32).view(np.int32)
        sc = rng.uniform(1e-3, 1e-2, size=(g, N)).astype(np.float16)
        p = "model.layers.%d.mlp.up_proj" % i
        t.append((p + ".qweight", "I32", [N, N // 8], qw))
        t.append((p + ".qzeros", "I32", [g, N // 8], qz))
        t.append((p + ".scales", "F16", [g, N], sc))
    st_write(path, t)


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    for name, fn in [("st.safetensors", make_st), ("pth.pth", make_pth), ("npz.npz", make_npz),
                     ("q4k.gguf", make_gguf), ("fp8.safetensors", make_fp8),
                     ("awq.safetensors", make_awq)]:
        p = os.path.join(d, name)
        if not os.path.exists(p):
            fn(p + ".part")
            if name == "npz.npz":
                os.rename(p + ".part.npz", p)
            else:
                os.rename(p + ".part", p)


if __name__ == "__main__":
    main()
