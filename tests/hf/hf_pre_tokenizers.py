#!/usr/bin/python3
"""The tokenizer.json amn writes for a BPE GGUF (`--to hf`), per
tokenizer.ggml.pre name, against fixtures/hf/vocab/pre_tokenizers.expected.json
(gen_pre_fixtures.py: checked there against llama.cpp's regexes and Hugging
Face tokenizers' encodings).

1. Every name llama.cpp knows on a small GGUF: the normalizer, pre-tokenizer
   and ignore_merges written equal the expected ones key by key; the names
   expected refused, and a name llama.cpp does not know, are refused (exit 3,
   naming it) with no output.
2. The Llama 3.1 vocabulary under one name per llama.cpp pre-tokenizer type
   (--types, all by default): the folder written is converted to GGUF again;
   amn's encoder (plugins/hf/hf_tok.c) hashes its tokenization of the check
   text to the hash Hugging Face tokenizers gives (recorded by the
   generator): the GGUF made again names the pre-tokenizer of that hash, or
   the error names the hash when no tokenizer llama.cpp knows has it. Names
   whose written sections equal an earlier name's are not converted again
   (same file, same hash).

usage: hf_pre_tokenizers.py AMN SRC_DIR BPE_DIR WORK_DIR"""
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tiny_gguf as tiny  # noqa: E402

amn, src, bpe, work = sys.argv[1:5]
exp = json.load(open(os.path.join(src, "fixtures/hf/vocab/pre_tokenizers.expected.json"),
                     encoding="utf-8"))
fails = []


def to_hf(gguf, out):
    r = subprocess.run([amn, "convert", gguf, "--to", "hf", "-o", out + "/", "--quiet",
                        "--force"], capture_output=True, text=True)
    return r.returncode, r.stderr


def check_name(name, want):
    g, out = os.path.join(work, "toy.gguf"), os.path.join(work, "toy-" + name)
    tiny.toy_gguf(g, name)
    rc, err = to_hf(g, out)
    if "refused" in want:
        if rc != 3 or name not in err or os.path.exists(out):
            fails.append("%s: expected refused (exit 3, naming it, no output), got %d %s"
                         % (name, rc, err.strip()))
        return
    if rc:
        fails.append("%s: amn failed: %s" % (name, err.strip()))
        return
    t = json.load(open(os.path.join(out, "tokenizer.json"), encoding="utf-8"))
    got = {"normalizer": t["normalizer"], "pre_tokenizer": t["pre_tokenizer"],
           "ignore_merges": t["model"]["ignore_merges"]}
    for k in want:
        if got[k] != want[k]:
            fails.append("%s: %s differs: %s, expected %s" % (name, k, json.dumps(got[k])[:300],
                                                               json.dumps(want[k])[:300]))


def known_hashes():
    """hf_tok_pre.c's table, the later entry winning as the converter's does."""
    text = open(os.path.join(src, "plugins/hf/hf_tok_pre.c"), encoding="utf-8").read()
    return dict(re.findall(r'\{"([0-9a-f]{64})",\s*"([^"]+)"\}', text))


def check_hash(name, want, vocab, known):
    g, out = os.path.join(work, "v.gguf"), os.path.join(work, "v-" + name)
    tiny.bpe_gguf(g, *vocab, name)
    rc, err = to_hf(g, out)
    if rc:
        fails.append("%s: amn --to hf failed: %s" % (name, err.strip()))
        return
    again = os.path.join(work, "again.gguf")
    r = subprocess.run([amn, "convert", out, "--to", "gguf", "--out-dtype", "f32", "-o", again,
                        "--quiet", "--force"], capture_output=True, text=True)
    if r.returncode == 0:
        got = tiny.read_str(again, "tokenizer.ggml.pre")
        if got != known.get(want):
            fails.append("%s: made again as '%s', expected '%s' (chkhsh %s)"
                         % (name, got, known.get(want), want))
    elif want in known or ("chkhsh " + want) not in r.stderr:
        fails.append("%s: expected chkhsh %s, got: %s" % (name, want, r.stderr.strip()))


for name, want in sorted(exp["names"].items()):
    check_name(name, want)
g = os.path.join(work, "toy.gguf")
tiny.toy_gguf(g, "no-such-pre")
rc, err = to_hf(g, os.path.join(work, "unknown"))
if rc != 3 or "no-such-pre" not in err or os.path.exists(os.path.join(work, "unknown")):
    fails.append("unknown name: expected refused, got %d %s" % (rc, err.strip()))

with open(os.path.join(bpe, "llama3_1", "tokenizer.json"), encoding="utf-8") as f:
    vocab = tiny.tokenizer_json_vocab(json.load(f))
known = known_hashes()
hashes = exp["chkhsh_llama3_1"]
seen = set()
for name in sorted(hashes):
    form = json.dumps(exp["names"][name], sort_keys=True)
    if form in seen:
        continue
    seen.add(form)
    check_hash(name, hashes[name], vocab, known)

for f in fails:
    print("FAIL:", f)
print("hf_pre_tokenizers: %d names, %d hashes, %d failed" % (len(exp["names"]), len(seen),
                                                             len(fails)))
sys.exit(1 if fails else 0)
