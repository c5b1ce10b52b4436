#!/usr/bin/python3
"""hf_st_edit.py DIR EDIT: rewrite each safetensors shard of the model folder
DIR (those its model.safetensors.index.json names, else every *.safetensors)
after the Python statement EDIT has changed `t`, the shard's tensors (name ->
[dtype, shape, bytes], in file order; `shard` is the file's name). The
index's weight_map follows: names gone from a shard dropped, new ones added.
For the tests' malformed and reshaped folders."""
import json
import os
import re  # noqa: F401 (for EDIT)
import struct
import sys


def main():
    d, edit = sys.argv[1], sys.argv[2]
    ix_path = os.path.join(d, "model.safetensors.index.json")
    ix = json.load(open(ix_path)) if os.path.exists(ix_path) else None
    shards = sorted(set(ix["weight_map"].values())) if ix else \
        sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
    for shard in shards:
        path = os.path.join(d, shard)
        raw = open(path, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        h = json.loads(raw[8:8 + n])
        t = {k: [v["dtype"], v["shape"], raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]]
             for k, v in h.items() if k != "__metadata__"}
        exec(edit, {"re": re}, {"t": t, "shard": shard})
        hdr, blobs, off = {}, [], 0
        for k, (dt, shape, b) in t.items():
            hdr[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
            blobs.append(b)
            off += len(b)
        hb = json.dumps(hdr).encode()
        hb += b" " * (-len(hb) % 8)
        open(path, "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
        if ix:
            wm = ix["weight_map"]
            ix["weight_map"] = {k: v for k, v in wm.items() if v != shard or k in t}
            ix["weight_map"].update({k: shard for k in t})
    if ix:
        json.dump(ix, open(ix_path, "w"))


if __name__ == "__main__":
    main()
