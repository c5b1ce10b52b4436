"""A large safetensors file of random finite floats, for memory tests and
benchmarks that need a model of a given size without storing one.

    big_safetensors.py OUT MIB [--dtype F32|F16] [--tensors N] [--seed S]
                       [--near-one]

One tensor "w" of MIB MiB (rows of 4 KiB), or N tensors "wNN.weight" of
MIB / N MiB each. Each value's top byte is masked so that its exponent
stays small (every value finite, positive); --near-one keeps F32 exponents
near 1.0 instead (values that compress as real weights do).
"""
import argparse
import json
import random
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("mib", type=int)
    ap.add_argument("--dtype", choices=("F32", "F16"), default="F32")
    ap.add_argument("--tensors", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--near-one", action="store_true")
    a = ap.parse_args()
    size = a.dtype == "F32" and 4 or 2
    per = (a.mib << 20) // a.tensors
    cols = 4096 // size
    if a.tensors == 1:
        names = ["w"]
    else:
        names = [f"w{i:02d}.weight" for i in range(a.tensors)]
    hdr = json.dumps({n: {"dtype": a.dtype, "shape": [per // 4096, cols],
                          "data_offsets": [i * per, (i + 1) * per]}
                      for i, n in enumerate(names)}).encode()
    hdr += b" " * (-len(hdr) % 8)
    if a.near_one:
        mask = bytes(0x3C | (b & 0x01) for b in range(256))
    else:
        mask = bytes(b & 0x3F for b in range(256))
    rnd = random.Random(a.seed)
    with open(a.out, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)) + hdr)
        for _ in range(a.mib):
            b = bytearray(rnd.randbytes(1 << 20))
            b[size - 1::size] = bytes(b[size - 1::size]).translate(mask)
            f.write(b)


if __name__ == "__main__":
    main()
