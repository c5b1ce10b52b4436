#!/usr/bin/env python3
"""Random (seeded, torch) BF16 weights for the model a config.json
describes (names and shapes from fixtures/hf/splitmix_weights.py), as
DIR/model.safetensors: for tokenizers whose fixtures come without weights.
Usage: hf_make_weights.py DIR."""
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "fixtures", "hf"))
from splitmix_weights import shapes, write_safetensors  # noqa: E402


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "config.json")) as f:
        c = json.load(f)
    g = torch.Generator().manual_seed(33)
    tensors = []
    for name, shape in sorted(shapes(c).items()):
        t = (torch.randn(shape, generator=g) * 0.02).to(torch.bfloat16)
        tensors.append((name, shape, t.view(torch.int16).numpy().tobytes()))
    write_safetensors(d, tensors)


if __name__ == "__main__":
    main()
