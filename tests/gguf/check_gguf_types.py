#!/usr/bin/python3
"""Per-tensor types of a GGUF file against llama-quantize's, with overrides.

usage: check_gguf_types.py OUT.gguf EXPECT.json FTYPE [REGEX=TYPE ...]
       check_gguf_types.py --dump OUT.gguf

The expected type of each tensor is the one llama-quantize gave it for FTYPE
(gguf_quant_reference .expect.json), unless a REGEX (Python re.search on the
name; the first that matches wins) names another. Tensors no REGEX matches
must also hold llama-quantize's bytes (SHA-256); a tensor a REGEX retypes
must hold the bytes llama-quantize wrote for it at that type under any file
type of the reference (when one did), since without an importance matrix a
tensor's bytes depend on its data and type only. --dump prints "name type
sha256" per tensor in file order. Parsing: check_gguf_expect.py's reader."""
import hashlib
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_gguf_expect import GGML_TYPES, parse  # noqa: E402


def tensors(path):
    data, kv, infos, start = parse(path)
    offsets = sorted(i[3] for i in infos) + [len(data) - start]
    out = []
    for name, ne, t, off in infos:
        nxt = min(o for o in offsets if o > off) if any(o > off for o in offsets) else off
        out.append((name, GGML_TYPES.get(t, str(t)), ne, data[start + off:start + nxt]))
    return out


def main():
    if sys.argv[1] == "--dump":
        for name, t, ne, blob in tensors(sys.argv[2]):
            # the data up to the next tensor: padding is zeros, so equal
            # tensors of one file layout hash equal
            print(name, t, hashlib.sha256(blob.rstrip(b"\0")).hexdigest())
        return 0
    out, expect, ftype = sys.argv[1:4]
    rules = []
    for r in sys.argv[4:]:
        pat, typ = r.rsplit("=", 1)
        rules.append((re.compile(pat), typ))
    ref = json.load(open(expect))["ftypes"]
    exp = {t["name"]: t for t in ref[ftype]["tensors"]}
    # (name, type) -> sha256 of what llama-quantize wrote, over every file type
    known = {}
    for f in ref.values():
        for t in f["tensors"]:
            known[(t["name"], t["type"])] = t["sha256"]
    bad = []
    got = tensors(out)
    if sorted(n for n, _, _, _ in got) != sorted(exp):
        bad.append("tensor names differ")
    for name, typ, ne, blob in got:
        e = exp.get(name)
        if e is None:
            continue
        rule = next((t for p, t in rules if p.search(name)), None)
        want = rule or e["type"]
        if typ != want:
            bad.append("%s: %s, want %s" % (name, typ, want))
            continue
        sha = known.get((name, want)) if rule else e["sha256"]
        n = e["nbytes"] if not rule else None
        if sha is None:
            continue
        body = blob[:n] if n is not None else blob
        if rule and hashlib.sha256(body).hexdigest() != sha:
            # the blob runs to the next tensor: try the reference's size
            sizes = [t["nbytes"] for f in ref.values() for t in f["tensors"]
                     if t["name"] == name and t["type"] == want]
            body = blob[:sizes[0]] if sizes else body
        if hashlib.sha256(body).hexdigest() != sha:
            bad.append("%s: data differs from llama-quantize's %s" % (name, want))
    for b in bad[:20]:
        print("FAIL %s %s: %s" % (ftype, " ".join(sys.argv[4:]), b))
    if not bad:
        print("ok %s %s: %d tensors" % (ftype, " ".join(sys.argv[4:]), len(got)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
