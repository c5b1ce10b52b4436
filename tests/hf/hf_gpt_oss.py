#!/usr/bin/env python3
"""gpt-oss's experts at a size where amn reads a transposed group in spans
of its source rows (an expert's gate_up_proj over 2^18 values; the tiny
fixture's are read whole): `amn convert DIR --to gguf --out-dtype f32` at 1
and 3 threads, the GGUF read back through `amn convert --to safetensors`,
each expert tensor against GptOssModel.modify_tensors' own expressions
(convert_hf_to_gguf.py, conversion/gpt_oss.py), in torch.
Usage: hf_gpt_oss.py AMN SRC WORK. Exit 0 when equal."""
import json
import os
import struct
import subprocess
import sys

import torch

H, FF, E = 512, 384, 2  # gate_up_proj [2, 512, 768]: 393216 values an expert


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = tensors[name].view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": list(tensors[name].shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    out = {}
    for name, info in json.loads(data[8:8 + n]).items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        raw = bytearray(data[8 + n + a:8 + n + b])
        out[name] = torch.frombuffer(raw, dtype=torch.float32).reshape(info["shape"])
    return out


def main():
    amn, src, work = sys.argv[1:4]
    with open(os.path.join(src, "fixtures", "hf", "gpt-oss-tiny-bf16", "config.json")) as f:
        c = json.load(f)
    c.update(hidden_size=H, intermediate_size=FF, num_local_experts=E, num_hidden_layers=1,
             layer_types=["sliding_attention"])
    d = os.path.join(work, "gpt-oss-large")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f)
    g = torch.Generator().manual_seed(7)
    r = lambda *s: (torch.randn(s, generator=g) * 0.05).to(torch.bfloat16)
    nh, nkv, hd, v = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["vocab_size"]
    p = "model.layers.0."
    t = {"model.embed_tokens.weight": r(v, H), "model.norm.weight": r(H), "lm_head.weight": r(v, H),
         p + "input_layernorm.weight": r(H), p + "post_attention_layernorm.weight": r(H),
         p + "self_attn.q_proj.weight": r(nh * hd, H), p + "self_attn.q_proj.bias": r(nh * hd),
         p + "self_attn.k_proj.weight": r(nkv * hd, H), p + "self_attn.k_proj.bias": r(nkv * hd),
         p + "self_attn.v_proj.weight": r(nkv * hd, H), p + "self_attn.v_proj.bias": r(nkv * hd),
         p + "self_attn.o_proj.weight": r(H, nh * hd), p + "self_attn.o_proj.bias": r(H),
         p + "self_attn.sinks": r(nh), p + "mlp.router.weight": r(E, H), p + "mlp.router.bias": r(E),
         p + "mlp.experts.gate_up_proj": r(E, H, 2 * FF),
         p + "mlp.experts.gate_up_proj_bias": r(E, 2 * FF),
         p + "mlp.experts.down_proj": r(E, FF, H), p + "mlp.experts.down_proj_bias": r(E, H)}
    write_safetensors(os.path.join(d, "model.safetensors"), t)

    # modify_tensors, as the converter runs it on the BF16 tensors widened to F32
    gu = t[p + "mlp.experts.gate_up_proj"].float().transpose(-1, -2)
    gub = t[p + "mlp.experts.gate_up_proj_bias"].float()
    want = {"blk.0.ffn_gate_exps.weight": gu[:, ::2, :], "blk.0.ffn_up_exps.weight": gu[:, 1::2, :],
            "blk.0.ffn_gate_exps.bias": gub[..., ::2], "blk.0.ffn_up_exps.bias": gub[..., 1::2],
            "blk.0.ffn_down_exps.weight": t[p + "mlp.experts.down_proj"].float().transpose(-1, -2),
            "blk.0.ffn_down_exps.bias": t[p + "mlp.experts.down_proj_bias"].float()}
    bad = 0
    outs = []
    for threads in ("1", "3"):
        gguf = os.path.join(work, f"oss-{threads}.gguf")
        st = os.path.join(work, f"oss-{threads}.safetensors")
        for cmd in ([amn, "convert", d, "--to", "gguf", "--out-dtype", "f32", "--threads", threads,
                     "-o", gguf, "--force", "--quiet"],
                    [amn, "convert", gguf, "--to", "safetensors", "--out-dtype", "f32", "-o", st,
                     "--force", "--quiet"]):
            rc = subprocess.run(cmd, stderr=subprocess.PIPE)
            if rc.returncode:
                print("not ok:", " ".join(cmd), rc.stderr.decode()[-500:])
                return 1
        with open(gguf, "rb") as f:
            outs.append(f.read())
        got = read_safetensors(st)
        for name, w in want.items():
            ok = name in got and list(got[name].shape) == list(w.shape) and \
                got[name].contiguous().numpy().tobytes() == w.contiguous().numpy().tobytes()
            print(("ok" if ok else "not ok") + f": {name} (threads {threads})")
            bad += not ok
    same = outs[0] == outs[1]
    print(("ok" if same else "not ok") + ": the same bytes at 1 and 3 threads")
    return 1 if bad or not same else 0


if __name__ == "__main__":
    sys.exit(main())
