#!/usr/bin/env python3
"""Compare a Hugging Face folder written from a GGUF with the folder the
GGUF was made from: every tensor's values (the original's upcast to F32,
the written F32 folder's as they are; experts stacked in the original are
compared one by one) byte for byte, and config.json's
fields. With --same-dtype the written tensors must have the original's
dtype and bytes (a BF16 / F16 GGUF of the same dtype). Usage: hf_compare.py
[--same-dtype] ORIGINAL_DIR WRITTEN_DIR. Exit 0 when equal."""
import json
import os
import re
import struct
import sys

import torch

DT = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def tensors(folder):
    out = {}
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".safetensors"):
            continue
        with open(os.path.join(folder, f), "rb") as fh:
            data = fh.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            raw = bytearray(data[base + a:base + b])
            t = torch.frombuffer(raw, dtype=DT[info["dtype"]]) if raw else torch.empty(0, dtype=DT[info["dtype"]])
            out[name] = t.reshape(info["shape"])
    return out


def unstack(t):
    """transformers 5's stacked experts (experts.gate_up_proj [experts, 2 x
    ff, hidden], gate rows first, and experts.down_proj) as one tensor per
    expert, the layout the written folder has."""
    for name in [n for n in t if re.search(r"\.experts\.(gate_up|down)_proj(\.weight)?$", n)]:
        a = t.pop(name)
        base = re.sub(r"(gate_up|down)_proj(\.weight)?$", "", name)
        for x in range(a.shape[0]):
            if "gate_up" in name:
                gate, up = a[x].chunk(2, dim=0)
                t[f"{base}{x}.gate_proj.weight"], t[f"{base}{x}.up_proj.weight"] = gate, up
            else:
                t[f"{base}{x}.down_proj.weight"] = a[x]
    return t


def main():
    args = sys.argv[1:]
    same = args[0] == "--same-dtype"
    orig_dir, new_dir = args[1:3] if same else args[0:2]
    orig, new = unstack(tensors(orig_dir)), tensors(new_dir)
    cfg_o = json.load(open(os.path.join(orig_dir, "config.json")))
    cfg_n = json.load(open(os.path.join(new_dir, "config.json")))
    bad = 0
    # lm_head of a tied model is not in the GGUF; the written folder says tied.
    if cfg_n.get("tie_word_embeddings"):
        orig.pop("lm_head.weight", None)
    # layers past num_hidden_layers (DeepSeek V3's multi-token prediction)
    # are not in the GGUF
    for name in [n for n in orig if re.match(r"model\.layers\.(\d+)\.", n)]:
        if int(name.split(".")[2]) >= cfg_o.get("num_hidden_layers", 1 << 30):
            del orig[name]
    if set(orig) != set(new):
        print("names differ: only original", sorted(set(orig) - set(new))[:5],
              "only written", sorted(set(new) - set(orig))[:5])
        bad += 1
    for name in sorted(set(orig) & set(new)):
        a, b = orig[name], new[name]
        if not same:
            a = a.to(torch.float32)
        bits = torch.int32 if a.dtype == torch.float32 else torch.int16
        if b.dtype != a.dtype or a.shape != b.shape or not torch.equal(a.view(bits), b.view(bits)):
            print("tensor differs:", name, a.shape, b.shape, b.dtype)
            bad += 1
    for k in ("architectures", "hidden_size", "intermediate_size", "num_attention_heads",
              "num_key_value_heads", "num_hidden_layers", "max_position_embeddings",
              "rms_norm_eps", "rope_theta", "vocab_size", "num_local_experts",
              "num_experts_per_tok", "head_dim", "model_type", "num_experts",
              "moe_intermediate_size", "shared_expert_intermediate_size", "norm_topk_prob",
              "attention_multiplier", "embedding_multiplier", "residual_multiplier",
              "logits_scaling", "sliding_window", "layer_types", "q_lora_rank", "kv_lora_rank",
              "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "n_routed_experts",
              "n_shared_experts", "first_k_dense_replace", "routed_scaling_factor", "n_group",
              "topk_group", "scoring_func", "topk_method"):
        if k in cfg_o and k in cfg_n and cfg_o[k] != cfg_n[k]:
            if k in ("architectures", "model_type") and cfg_o[k] in (["MistralForCausalLM"], "mistral") \
                    and cfg_n[k] in (["LlamaForCausalLM"], "llama"):
                continue  # a GGUF does not tell Mistral from Llama
            print("config.json %s: original %r, written %r" % (k, cfg_o[k], cfg_n[k]))
            bad += 1
        if k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "attention_multiplier",
                 "embedding_multiplier", "residual_multiplier", "logits_scaling",
                 "layer_types", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
                 "v_head_dim", "n_routed_experts", "first_k_dense_replace", "scoring_func") and \
                k in cfg_o and k not in cfg_n:
            print("config.json lacks", k)
            bad += 1
    ms = [(c.get("rope_scaling") or {}).get("mscale_all_dim") for c in (cfg_o, cfg_n)]
    if ms[0] is not None and ms[0] != ms[1]:
        print("config.json rope_scaling.mscale_all_dim: original %r, written %r" % tuple(ms))
        bad += 1
    if not same and cfg_n.get("torch_dtype") != "float32":
        print("torch_dtype", cfg_n.get("torch_dtype"))
        bad += 1
    print("%s: %d tensors compared, %d problems" % (os.path.basename(orig_dir.rstrip("/")), len(new), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
