#!/usr/bin/env python3
"""Random (seeded) BF16 weights for the llama / qwen3 model a config.json
describes, as DIR/model.safetensors: for tokenizers whose fixtures come
without weights. Usage: hf_make_weights.py DIR."""
import json
import os
import struct
import sys

import torch


def main():
    d = sys.argv[1]
    c = json.load(open(os.path.join(d, "config.json")))
    h, ff, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    nh, nkv = c["num_attention_heads"], c.get("num_key_value_heads", c["num_attention_heads"])
    hd = c.get("head_dim", h // nh)
    qwen3 = c["architectures"][0].startswith("Qwen3")
    shapes = {"model.embed_tokens.weight": [v, h], "model.norm.weight": [h], "lm_head.weight": [v, h]}
    for i in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % i
        shapes.update({
            p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
            p + "self_attn.q_proj.weight": [nh * hd, h], p + "self_attn.k_proj.weight": [nkv * hd, h],
            p + "self_attn.v_proj.weight": [nkv * hd, h], p + "self_attn.o_proj.weight": [h, nh * hd],
            p + "mlp.gate_proj.weight": [ff, h], p + "mlp.up_proj.weight": [ff, h],
            p + "mlp.down_proj.weight": [h, ff]})
        if qwen3:
            shapes.update({p + "self_attn.q_norm.weight": [hd], p + "self_attn.k_norm.weight": [hd]})
    g = torch.Generator().manual_seed(33)
    header, blobs, off = {}, [], 0
    for name in sorted(shapes):
        t = (torch.randn(shapes[name], generator=g) * 0.02).to(torch.bfloat16)
        raw = t.view(torch.int16).numpy().tobytes()
        header[name] = {"dtype": "BF16", "shape": shapes[name], "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
