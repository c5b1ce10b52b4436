#!/usr/bin/python3
"""A small Hugging Face style safetensors model for `amn forget --to TYPE`
on non-GGUF inputs (tests/gguf/forget_gguf_options.sh), and an independent
check of the GGUF amn writes from it.

usage: gen_plain_model.py write OUT.safetensors
       gen_plain_model.py q8_0 OUT.gguf IN.safetensors
           every quantizable tensor (2-D and up, *weight, not a norm) of IN
           must be Q8_0 with the bytes of ggml's quantize_row_q8_0_ref
           (ggml-quants.c: amax / 127, roundf of x * 1/d, d stored as f16),
           computed here with numpy; 1-D tensors F32 with IN's values; the
           others as IN stores them."""
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "fixtures"))
from st_fixture import write_st  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_gguf_expect import parse  # noqa: E402


def tensors():
    rng = np.random.default_rng(16)
    f = lambda *s: (rng.standard_normal(s) * 0.05).astype(np.float32)  # noqa: E731
    return [
        ("model.embed_tokens.weight", f(64, 256).astype(np.float16), None),
        ("model.layers.0.self_attn.q_proj.weight", f(256, 256), None),
        ("model.layers.0.self_attn.q_proj.bias", f(256), None),
        # rows of 96: not whole Q4_K blocks (256), whole Q5_0 / Q8_0 blocks
        ("model.layers.0.mlp.down_proj.weight", f(256, 96).astype(np.float16), None),
        ("model.layers.0.input_layernorm.weight", (1 + f(256)).astype(np.float16), None),
        ("model.layers.0.extra_norm.weight", f(4, 64).astype(np.float16), None),  # 2-D norm
        ("model.rotary.inv_freq", f(2, 32), None),  # not a *weight
        ("lm_head.weight", f(64, 256).astype(np.float16), None),
    ]


def read_st(path):
    import json
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data)[0]
    h = json.loads(data[8:8 + n])
    dt = {"F16": np.float16, "F32": np.float32}
    out = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(data[8 + n + a:8 + n + b], dt[v["dtype"]]).reshape(v["shape"])
    return out


def q8_0(x):
    """ggml quantize_row_q8_0_ref, row by row (x: f32, rows of 32k)."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    amax = np.abs(blocks).max(axis=1)
    d = (amax / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (blocks * idv[:, None]).astype(np.float32)
    # roundf: half away from zero (exact in float64)
    q = (np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)).astype(np.int8)
    out = bytearray()
    for i in range(len(blocks)):
        out += np.float16(d[i]).tobytes() + q[i].tobytes()
    return bytes(out)


def check_q8_0(out_path, in_path):
    src = read_st(in_path)
    data, kv, infos, start = parse(out_path)
    bad = []
    for name, ne, t, off in infos:
        x = src[name]
        quant = x.ndim >= 2 and name.endswith("weight") and "norm" not in name
        if quant:
            want_t, want = 8, q8_0(x.astype(np.float32))
        elif x.ndim <= 1:
            want_t, want = 0, x.astype(np.float32).tobytes()
        else:
            want_t, want = (1 if x.dtype == np.float16 else 0), x.tobytes()
        got = data[start + off:start + off + len(want)]
        if t != want_t or got != want:
            bad.append("%s: type %d, want %d%s" % (name, t, want_t,
                                                   "" if got == want else ", data differs"))
    if sorted(i[0] for i in infos) != sorted(src):
        bad.append("tensor names differ")
    for b in bad:
        print("FAIL plain q8_0:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write_st(sys.argv[2], tensors())
        sys.exit(0)
    sys.exit(check_q8_0(sys.argv[2], sys.argv[3]))
