"""Model folders for tests/folders/folders.sh, and the checks of what amn
writes from them; /usr/bin/python3 with numpy only.

  folders.py make ROOT          small model folders under ROOT: plain (BF16),
                                gptq, awq, fp8; each sharded in two with an
                                index, config.json and tokenizer-like files
  folders.py make-bin ROOT      ROOT/bin: a sharded PyTorch checkpoint (torch)
  folders.py check IN OUT SINGLE MAX [DTYPE|keep]
                                OUT, written from IN with --shard-size MAX,
                                against SINGLE (the same input written to one
                                file): shard split as huggingface_hub's
                                split_torch_state_dict_into_shards makes it
                                from the model's order, shard names, index
                                text as save_pretrained writes it, every
                                tensor bit-exact, config.json edits, copies.

Safetensors is read and written from its format description (8-byte
little-endian header length, JSON header, data); the shard rule from
huggingface_hub's serialization/_base.py, the index from transformers'
modeling_utils save_pretrained."""
import json
import os
import struct
import sys

import numpy as np

rng = np.random.default_rng(14)


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, dt, shape, b in tensors:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_st(path):
    """name -> (dtype, shape, bytes), in data order."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    hdr.pop("__metadata__", None)
    items = sorted(hdr.items(), key=lambda kv: kv[1]["data_offsets"][0])
    base = 8 + n
    return {k: (v["dtype"], tuple(v["shape"]), data[base + v["data_offsets"][0]:base + v["data_offsets"][1]])
            for k, v in items}


def bf16_bits(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    return (x.view(np.uint32) >> 16).astype(np.uint16).tobytes()


def f16(shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float16).tobytes()


def i32(shape):
    return rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32).tobytes()


def common(layers):
    t = [("model.embed_tokens.weight", "BF16", (64, 32), bf16_bits((64, 32)))]
    for i in range(layers):
        t.append((f"model.layers.{i}.input_layernorm.weight", "BF16", (32,), bf16_bits((32,))))
    t.append(("model.norm.weight", "BF16", (32,), bf16_bits((32,))))
    t.append(("lm_head.weight", "BF16", (64, 32), bf16_bits((64, 32))))
    return t


def gptq_layer(p):  # in 64, out 32, 4-bit, group 32 (as the reference gptq.safetensors)
    return [(p + ".g_idx", "I32", (64,), (np.arange(64, dtype=np.int32) // 32).tobytes()),
            (p + ".qweight", "I32", (8, 32), i32((8, 32))),
            (p + ".qzeros", "I32", (2, 4), i32((2, 4))),
            (p + ".scales", "F16", (2, 32), f16((2, 32), 0.001, 0.01))]


def awq_layer(p):
    return [(p + ".qweight", "I32", (64, 4), i32((64, 4))),
            (p + ".qzeros", "I32", (2, 4), i32((2, 4))),
            (p + ".scales", "F16", (2, 32), f16((2, 32), 0.001, 0.01))]


def fp8_layer(p):  # 32x32 E4M3 in 4x4... 16x16 blocks, scale_inv F32
    w = rng.integers(0, 256, (32, 32), dtype=np.uint8)
    w[(w & 0x7F) == 0x7F] = 0x3C  # no NaN codes
    return [(p + ".weight", "F8_E4M3", (32, 32), w.tobytes()),
            (p + ".weight_scale_inv", "F32", (2, 2), rng.uniform(0.5, 2, (2, 2)).astype(np.float32).tobytes())]


KINDS = {
    "plain": (lambda p: [(p + ".weight", "BF16", (32, 64), bf16_bits((32, 64)))], None),
    "gptq": (gptq_layer, {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False,
                          "sym": False}),
    "awq": (awq_layer, {"quant_method": "awq", "bits": 4, "group_size": 32, "version": "gemm",
                        "zero_point": True}),
    "fp8": (fp8_layer, {"quant_method": "fp8", "activation_scheme": "dynamic",
                        "weight_block_size": [16, 16]}),
}


def make(root):
    for kind, (layer, qc) in KINDS.items():
        d = os.path.join(root, kind)
        os.makedirs(d, exist_ok=True)
        tensors = common(4)
        for i in range(4):
            tensors += layer(f"model.layers.{i}.self_attn.q_proj")
        # Two input shards, each in sorted order (the index lists names sorted).
        tensors.sort(key=lambda t: t[0])
        half = len(tensors) // 2
        shards = [tensors[:half], tensors[half:]]
        wm = {}
        for k, part in enumerate(shards):
            fn = f"model-{k + 1:05d}-of-00002.safetensors"
            write_st(os.path.join(d, fn), part)
            for t in part:
                wm[t[0]] = fn
        total = sum(len(t[3]) for t in tensors)
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2,
                               sort_keys=True) + "\n")
        cfg = {"architectures": ["LlamaForCausalLM"], "hidden_size": 32, "rope_theta": 500000.0,
               "rms_norm_eps": 1e-05, "torch_dtype": "float16", "url": "https://x/y"}
        if qc:
            cfg["quantization_config"] = qc
        cfg["vocab_size"] = 64
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
        if kind == "gptq":
            with open(os.path.join(d, "quantize_config.json"), "w") as f:
                json.dump({k: v for k, v in qc.items() if k != "quant_method"}, f)
        files = {"tokenizer.json": b'{"model": {"type": "BPE"}}\n',
                 "generation_config.json": b'{"do_sample": true}\n',
                 "special_tokens_map.json": b"{}",
                 "README.md": "# caf\u00e9\n".encode(),
                 "tokenizer.model": bytes(range(256)) * 3}
        for n, b in files.items():
            with open(os.path.join(d, n), "wb") as f:
                f.write(b)


def make_bin(root):
    """A sharded PyTorch checkpoint as save_pretrained wrote them before
    safetensors: pytorch_model-0000K-of-00002.bin and its index."""
    import torch
    d = os.path.join(root, "bin")
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(14)
    sd = {"model.embed_tokens.weight": torch.randn(64, 32, generator=g).half()}
    # Tied: one storage under two names (torch.save writes it once); the
    # safetensors output gives each name its own bytes.
    sd["model.tied_embed.weight"] = sd["model.embed_tokens.weight"]
    for i in range(4):
        sd[f"model.layers.{i}.self_attn.q_proj.weight"] = torch.randn(32, 32, generator=g).half()
        sd[f"model.layers.{i}.input_layernorm.weight"] = torch.randn(32, generator=g).float()
    sd["lm_head.weight"] = torch.randn(64, 32, generator=g).to(torch.bfloat16)
    names = list(sd)
    parts = [names[:5], names[5:]]
    wm = {}
    for k, part in enumerate(parts):
        fn = f"pytorch_model-{k + 1:05d}-of-00002.bin"
        torch.save({n: sd[n] for n in part}, os.path.join(d, fn))
        wm.update({n: fn for n in part})
    total = sum(t.numel() * t.element_size() for t in sd.values())
    with open(os.path.join(d, "pytorch_model.bin.index.json"), "w") as f:
        f.write(json.dumps({"metadata": {"total_size": total}, "weight_map": wm}, indent=2) + "\n")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float16"}, f, indent=2)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        f.write('{"chat_template": "{{ messages }}"}')
    # Beside the folder: the state dicts' order, and every tensor's bytes as
    # torch holds them (what amn must write), so checks need no torch.
    with open(os.path.join(root, "bin-order.json"), "w") as f:
        json.dump(names, f)
    dt = {torch.float16: "F16", torch.float32: "F32", torch.bfloat16: "BF16"}
    write_st(os.path.join(root, "bin-expect.safetensors"),
             [(n, dt[t.dtype], tuple(t.shape),
               (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes())
              for n, t in sd.items()])


def make_tied(root):
    """Folders for --dedup-tied: lm_head.weight equal to the embeddings with
    "tie_word_embeddings": true (tied), with other bytes (tied-diff), equal
    but the config says false (tied-off); and with torch, a single
    pytorch_model.bin holding one storage under both names (tied-bin)."""
    emb = bf16_bits((64, 32))
    other = bytearray(emb)
    other[-1] ^= 1
    for name, head, tie in (("tied", emb, True), ("tied-diff", bytes(other), True),
                            ("tied-off", emb, False)):
        d = os.path.join(root, name)
        os.makedirs(d, exist_ok=True)
        write_st(os.path.join(d, "model.safetensors"),
                 [("model.embed_tokens.weight", "BF16", (64, 32), emb),
                  ("model.norm.weight", "BF16", (32,), bf16_bits((32,))),
                  ("lm_head.weight", "BF16", (64, 32), head)])
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": tie}, f)
    try:
        import torch
    except ImportError:
        return
    d = os.path.join(root, "tied-bin")
    os.makedirs(d, exist_ok=True)
    w = torch.randn(64, 32, generator=torch.Generator().manual_seed(14)).half()
    torch.save({"model.embed_tokens.weight": w, "model.norm.weight": torch.ones(32).half(),
                "lm_head.weight": w}, os.path.join(d, "pytorch_model.bin"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "tie_word_embeddings": True}, f)


def model_order(in_dir):
    """The input's tensors as amn orders them: shards by first mention in
    the index, each in data order (a .bin: its state dict's order)."""
    if os.path.exists(os.path.join(in_dir, "pytorch_model.bin.index.json")):
        with open(os.path.join(in_dir, "..", "bin-order.json")) as f:
            return [(n, None) for n in json.load(f)]
    with open(os.path.join(in_dir, "model.safetensors.index.json")) as f:
        wm = json.load(f)["weight_map"]
    shards = []
    for fn in wm.values():
        if fn not in shards:
            shards.append(fn)
    order = []
    for fn in shards:
        order += list(read_st(os.path.join(in_dir, fn)).items())
    return order


def split(sizes, max_size):
    """huggingface_hub split_state_dict_into_shards_factory: [[names]]."""
    if max_size == 0:
        return [[n for n, _ in sizes]]
    shard_list, cur, cur_size = [], [], 0
    for name, size in sizes:
        if size > max_size:
            shard_list.append([name])
            continue
        if cur_size + size > max_size:
            shard_list.append(cur)
            cur, cur_size = [], 0
        cur.append(name)
        cur_size += size
    if cur:
        shard_list.append(cur)
    return shard_list or [[]]


QUANT_SUFFIXES = (".qweight", ".weight_scale_inv", ".qzeros", ".scales", ".g_idx")


def check(in_dir, out_dir, single, max_size, dtype="bfloat16"):
    fails = []
    ref = read_st(single)
    # Output order: the model's order, a quantized weight where its qweight
    # (FP8: its weight) stood, its companions gone.
    names = []
    for name, _ in model_order(in_dir):
        if name.endswith(".qweight"):
            name = name[:-len(".qweight")] + ".weight"
        elif name.endswith(QUANT_SUFFIXES):
            continue
        names.append(name)
    if sorted(names) != sorted(ref):
        fails.append(f"tensor names differ from the single file: {sorted(set(names) ^ set(ref))}")
    sizes = [(n, len(ref[n][2])) for n in names if n in ref]
    plan = split(sizes, max_size)
    n = len(plan)
    fname = (lambda k: "model.safetensors") if n == 1 else (
        lambda k: f"model-{k + 1:05d}-of-{n:05d}.safetensors")
    expect_files = {fname(k) for k in range(n)}
    got = {f for f in os.listdir(out_dir) if f.endswith(".safetensors")}
    if got != expect_files:
        fails.append(f"shards {sorted(got)}, expected {sorted(expect_files)}")
    for k, members in enumerate(plan):
        p = os.path.join(out_dir, fname(k))
        if not os.path.exists(p):
            continue
        st = read_st(p)
        if sorted(st) != sorted(members):
            fails.append(f"{fname(k)} holds {sorted(st)}, expected {sorted(members)}")
        for t, v in st.items():
            if t in ref and v != ref[t]:
                fails.append(f"{fname(k)}: {t} differs from the single file")
    idx = os.path.join(out_dir, "model.safetensors.index.json")
    if n > 1:
        wm = {m: fname(k) for k, ms in enumerate(plan) for m in ms}
        want = json.dumps({"metadata": {"total_size": sum(s for _, s in sizes)}, "weight_map": wm},
                          indent=2, sort_keys=True) + "\n"
        got_idx = open(idx).read() if os.path.exists(idx) else "(missing)"
        if got_idx != want:
            fails.append(f"index:\n{got_idx}\nexpected:\n{want}")
    elif os.path.exists(idx):
        fails.append("an index beside a single shard")
    # config.json: quantization_config gone, torch_dtype set, the rest as it was.
    with open(os.path.join(in_dir, "config.json")) as f:
        cin = json.load(f)
    with open(os.path.join(out_dir, "config.json")) as f:
        cout = json.load(f)
    cin.pop("quantization_config", None)
    if dtype != "keep":
        cin["torch_dtype"] = dtype
    if list(cout.items()) != list(cin.items()):
        fails.append(f"config.json {cout}, expected {cin}")
    for f in os.listdir(in_dir):
        if f.endswith((".safetensors", ".index.json", ".bin")) or f in ("config.json", "quantize_config.json"):
            if f == "quantize_config.json" and os.path.exists(os.path.join(out_dir, f)):
                fails.append("quantize_config.json kept")
            continue
        a = open(os.path.join(in_dir, f), "rb").read()
        b = open(os.path.join(out_dir, f), "rb").read() if os.path.exists(os.path.join(out_dir, f)) else None
        if a != b:
            fails.append(f"{f} not copied byte for byte")
    extra = set(os.listdir(out_dir)) - expect_files - set(os.listdir(in_dir)) - {"model.safetensors.index.json"}
    if extra:
        fails.append(f"unexpected files {sorted(extra)}")
    for f in fails:
        print("FAIL:", f)
    print(f"{out_dir}: {n} shard(s), {len(sizes)} tensors, {len(fails)} failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    elif sys.argv[1] == "make-tied":
        make_tied(sys.argv[2])
    elif sys.argv[1] == "make-bin":
        make_bin(sys.argv[2])
    else:
        sys.exit(check(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                       *(sys.argv[6:7] or [])))
