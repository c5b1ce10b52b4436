"""Model folders for fuzz_model's seeds that fixtures/ does not hold:
GPTQ (sequential and act-order), AWQ, FP8 128x128 blocks, plain floats,
and a declared method no plugin reads. The values are random (the kernels
are tested elsewhere); the layouts are the producers' (see each plugin's
detect). Run from this folder: python3 make_seeds.py"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures"))
from st_fixture import write_st  # noqa: E402

rng = np.random.default_rng(7)


def folder(name, tensors, config):
    os.makedirs(name, exist_ok=True)
    write_st(os.path.join(name, "model.safetensors"), tensors)
    with open(os.path.join(name, "config.json"), "w") as f:
        json.dump(config, f, indent=1)


def words(n):
    return rng.integers(0, 2**31 - 1, size=n, dtype=np.int64).astype(np.int32)


def f16(shape):
    return (rng.random(shape) * 0.01 + 0.001).astype(np.float16)


IN, OUT, GS = 64, 32, 32
G = IN // GS
for name, act in (("gptq", False), ("gptq_actorder", True)):
    gidx = np.arange(IN, dtype=np.int32) // GS
    if act:
        gidx = rng.permutation(gidx).astype(np.int32)
    folder(name, [("l.qweight", words(IN // 8 * OUT).reshape(IN // 8, OUT), None),
                  ("l.qzeros", words(G * OUT // 8).reshape(G, OUT // 8), None),
                  ("l.scales", f16((G, OUT)), None),
                  ("l.g_idx", gidx, None),
                  ("norm.weight", np.ones(OUT, np.float32), None)],
           {"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": GS,
                                    "desc_act": act, "sym": True}})

folder("awq", [("l.qweight", words(IN * OUT // 8).reshape(IN, OUT // 8), None),
               ("l.qzeros", words(G * OUT // 8).reshape(G, OUT // 8), None),
               ("l.scales", f16((G, OUT)), None)],
       {"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": GS,
                                "version": "gemm", "zero_point": True}})

# E4M3 bytes without the NaN codes 0x7f / 0xff.
fp8 = rng.integers(0, 0x7e, size=(160, 136), dtype=np.uint8) | (
    rng.integers(0, 2, size=(160, 136), dtype=np.uint8) << 7)
folder("fp8_block", [("l.weight", fp8, "F8_E4M3"),
                     ("l.weight_scale_inv", (rng.random((2, 2)) + 0.5).astype(np.float32), None)],
       {"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}})

bf16 = (rng.standard_normal((8, 12)).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
folder("floats", [("a", rng.standard_normal((4, 6)).astype(np.float32), None),
                  ("b", bf16, "BF16"),
                  ("c", rng.standard_normal(5).astype(np.float16), None),
                  ("ids", np.arange(7, dtype=np.int64), None)],
       {"model_type": "llama", "torch_dtype": "float32"})

folder("unhandled", [("l.weight", rng.integers(-8, 8, size=(16, 16), dtype=np.int8), None),
                     ("l.weight_scale", f16((16, 1)), None)],
       {"quantization_config": {"quant_method": "hqq", "nbits": 4}})
