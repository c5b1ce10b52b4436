#!/usr/bin/python3
"""Compare a GGUF file with one file type of a gguf_quant_reference
.expect.json (what llama-quantize wrote): tensor order, names, ggml types,
shapes, byte sizes and SHA-256 of each tensor's data; every metadata key in
order with its types and value (arrays: type, length, and equality with the
input's array).

usage: check_gguf_expect.py OUT.gguf EXPECT.json FTYPE INPUT.gguf

A GGUF v3 parser of its own (the format's spec), independent of amn's."""
import hashlib
import json
import struct
import sys

# ggml type ids (ggml.h) -> gguf-py names, as the .expect.json spells them.
GGML_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0",
              10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K",
              16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL",
              21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0",
              35: "TQ2_0", 39: "MXFP4", 41: "Q1_0", 42: "Q2_0"}
KV_NAMES = ["UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32", "BOOL", "STRING",
            "ARRAY", "UINT64", "INT64", "FLOAT64"]
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def get(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.get("<Q")
        s = self.d[self.p:self.p + n].decode("utf-8")
        self.p += n
        return s

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.get("<I"), self.get("<Q")
            return (et, [self.value(et) for _ in range(n)])
        return self.get(SCALAR[t])


def parse(path):
    data = open(path, "rb").read()
    r = Reader(data)
    assert data[:4] == b"GGUF", path
    r.p = 4
    assert r.get("<I") == 3
    n_t, n_kv = r.get("<Q"), r.get("<Q")
    kv = []
    for _ in range(n_kv):
        k = r.string()
        t = r.get("<I")
        kv.append((k, t, r.value(t)))
    infos = []
    for _ in range(n_t):
        name = r.string()
        nd = r.get("<I")
        ne = [r.get("<Q") for _ in range(nd)]
        infos.append((name, ne, r.get("<I"), r.get("<Q")))
    align = next((v for k, t, v in kv if k == "general.alignment"), 32)
    start = (r.p + align - 1) // align * align
    return data, kv, infos, start


def main():
    out, expect, ftype, inp = sys.argv[1:5]
    exp = json.load(open(expect))["ftypes"][ftype]
    data, kv, infos, start = parse(out)
    _, kv_in, _, _ = parse(inp)
    inputs = {k: v for k, t, v in kv_in}
    bad = []
    # Tensors: order, names, types, shapes, sizes, data.
    names = [i[0] for i in infos]
    want = [t["name"] for t in exp["tensors"]]
    if names != want:
        bad.append("tensor order: got %s want %s" % (names[:6], want[:6]))
    offsets = sorted(i[3] for i in infos) + [len(data) - start]
    for (name, ne, t, off), e in zip(infos, exp["tensors"]):
        nxt = min(o for o in offsets if o > off) if any(o > off for o in offsets) else off
        got_type = GGML_TYPES.get(t, str(t))
        if got_type != e["type"] or ne != e["shape"]:
            bad.append("%s: %s %s, want %s %s" % (name, got_type, ne, e["type"], e["shape"]))
            continue
        blob = data[start + off:start + off + e["nbytes"]]
        if len(blob) != e["nbytes"] or nxt - off < e["nbytes"]:
            bad.append("%s: truncated" % name)
        elif hashlib.sha256(blob).hexdigest() != e["sha256"]:
            bad.append("%s: data differs from llama-quantize's (%s)" % (name, e["type"]))
    # Metadata: keys in order, types and values.
    keys = [k for k, t, v in kv]
    if keys != list(exp["kv"]):
        bad.append("kv order: got %s want %s" % (keys, list(exp["kv"])))
    for k, t, v in kv:
        e = exp["kv"].get(k)
        if e is None:
            continue
        types = [KV_NAMES[t]] + ([KV_NAMES[v[0]]] if t == 9 else [])
        if types != e["types"]:
            bad.append("kv %s: types %s want %s" % (k, types, e["types"]))
        elif t == 9:
            if len(v[1]) != e["len"] or (e.get("equal_to_input") and inputs.get(k) != v):
                bad.append("kv %s: array differs" % k)
        elif v != e["value"]:
            bad.append("kv %s: %r want %r" % (k, v, e["value"]))
    for b in bad[:20]:
        print("FAIL %s: %s" % (ftype, b))
    if not bad:
        print("ok %s: %d tensors, %d keys equal llama-quantize's" % (ftype, len(infos), len(kv)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
