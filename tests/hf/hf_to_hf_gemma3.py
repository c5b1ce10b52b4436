#!/usr/bin/python3
"""GGUF -> Hugging Face folder for Gemma 3's tokenizer.json-only BPE
vocabulary (tokenizer.ggml.pre granite-embed-multi-311m): against Google's
tokenizer.json (fixtures/hf/vocab/gemma3.tar.xz) and
fixtures/hf/vocab/gemma3_rev.expected.json (gen_gemma3_rev_fixtures.py,
which checked with Hugging Face tokenizers that the written file encodes
its strings as the original does).

1. The folder (gemma3.tar.xz's tokenizer files, the tiny config of
   fixtures/hf/assembled/Gemma-3-Tiny-BPE, seeded weights) made a GGUF, the
   GGUF a folder, the folder a GGUF again: equal byte for byte.
2. The written tokenizer.json: the original's normalizer, pre_tokenizer,
   decoder, post_processor and BPE options (as recorded); its vocabulary,
   merges (pairs) and added tokens those of the original (the converter's
   spaces of user-defined tokens escaped again); tokenizer_config.json's
   added_tokens_decoder the original's. Special as the GGUF has them: the
   converter types the added tokens that look special (looks_special)
   control tokens, which the folder has as special.
3. Refused with exit 3 and no output: such a vocabulary with a merge that
   does not split in two at a space. A merge whose part gguf-py wrote with
   U+0120 for a space goes back to the space when only that spelling is a
   token.
4. With AMN_HF_TOKENIZERS_JS (the path of @huggingface/tokenizers'
   dist/tokenizers.cjs) and node: the written tokenizer.json encodes the
   recorded strings to the recorded ids.

usage: hf_to_hf_gemma3.py AMN SRC_DIR GEMMA3_DIR WORK_DIR"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_tiny_gguf as tiny  # noqa: E402

amn, src, gemma3, work = sys.argv[1:5]
exp = json.load(open(os.path.join(src, "fixtures/hf/vocab/gemma3_rev.expected.json"),
                     encoding="utf-8"))
fails = []
PRE = "granite-embed-multi-311m"


def amn_run(*args):
    r = subprocess.run([amn, "convert", *args, "--quiet"], capture_output=True, text=True)
    return r.returncode, r.stderr


def looks_special(t):
    """llama.cpp's converter's ModelBase.does_token_look_special."""
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or
            (t.startswith("<|") and t.endswith("|>")) or
            (t.startswith("<\uff5c") and t.endswith("\uff5c>")) or
            (t.startswith("<unused") and t.endswith(">")))


def as_typed(t):
    """An added token as the GGUF types it."""
    return dict(t, special=t["special"] or looks_special(t["content"]))


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# 1. the round trip
d = os.path.join(work, "Gemma-3-Tiny-BPE")
os.mkdir(d)
for f in ("tokenizer.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(gemma3, f), d)
shutil.copy(os.path.join(src, "fixtures/hf/assembled/Gemma-3-Tiny-BPE/config.json"), d)
subprocess.run(["/usr/bin/python3", os.path.join(src, "fixtures/hf/splitmix_weights.py"), d],
               check=True)
a, b, out = os.path.join(work, "a.gguf"), os.path.join(work, "b.gguf"), os.path.join(work, "out")
for args in ((d, "--to", "gguf", "--out-dtype", "f32", "-o", a), (a, "--to", "hf", "-o", out + "/"),
             (out, "--to", "gguf", "--out-dtype", "f32", "-o", b)):
    rc, err = amn_run(*args)
    if rc:
        print("FAIL: amn convert %s: %s" % (" ".join(args), err.strip()))
        sys.exit(1)
if tiny.read_str(a, "tokenizer.ggml.pre") != PRE:
    fails.append("the GGUF's pre-tokenizer is %r, not %s" % (tiny.read_str(a, "tokenizer.ggml.pre"),
                                                            PRE))
with open(a, "rb") as fa, open(b, "rb") as fb:
    if fa.read() != fb.read():
        fails.append("the GGUF made again from the written folder differs")

# 2. the written files against the original
want, got = load(os.path.join(gemma3, "tokenizer.json")), load(os.path.join(out, "tokenizer.json"))
for k, v in exp["sections"].items():
    g = got[k] if k != "model" else {k2: got["model"].get(k2) for k2 in v}
    if g != v:
        fails.append("tokenizer.json %s: %s, expected %s" % (k, json.dumps(g)[:300],
                                                             json.dumps(v)[:300]))
wv, gv = want["model"]["vocab"], got["model"]["vocab"]
added_ids = {t["id"]: t["content"] for t in want["added_tokens"]}
extra = {k: i for k, i in gv.items() if wv.get(k) != i}
missing = {k: i for k, i in wv.items() if gv.get(k) != i}
if missing or any(added_ids.get(i) != k for k, i in extra.items()):
    fails.append("vocab: %d tokens missing or moved (%s), %d not the original's (%s)"
                 % (len(missing), list(missing.items())[:3], len(extra), list(extra.items())[:3]))
if got["model"]["merges"] != want["model"]["merges"]:
    n = sum(1 for x, y in zip(got["model"]["merges"], want["model"]["merges"]) if x != y)
    fails.append("merges differ: %d of %d, %d written" % (n, len(want["model"]["merges"]),
                                                          len(got["model"]["merges"])))
key = lambda t: json.dumps(t, sort_keys=True)  # noqa: E731
if sorted(map(key, got["added_tokens"])) != sorted(key(as_typed(t)) for t in want["added_tokens"]):
    fails.append("added_tokens differ")
wd = {k: as_typed(t) for k, t in
      load(os.path.join(gemma3, "tokenizer_config.json"))["added_tokens_decoder"].items()}
gd = load(os.path.join(out, "tokenizer_config.json"))["added_tokens_decoder"]
if gd != wd:
    bad = [k for k in set(wd) | set(gd) if wd.get(k) != gd.get(k)]
    fails.append("tokenizer_config.json added_tokens_decoder: %d differ (%s)" % (len(bad), bad[:3]))

# 3. merges: refused when they do not split; U+0120 back to a space
g = os.path.join(work, "bad.gguf")
tiny.bpe_gguf(g, ["a", "b", "ab"], [1, 1, 1], ["ab"], PRE, n_embd=8)
rc, err = amn_run(g, "--to", "hf", "-o", os.path.join(work, "bad") + "/")
if rc != 3 or "merge 0" not in err or os.path.exists(os.path.join(work, "bad")):
    fails.append("a merge without a space: expected refused (exit 3, no output), got %d %s"
                 % (rc, err.strip()))
tiny.bpe_gguf(g, ["a", " ", "a ", "\u0120b", "b"], [1, 1, 1, 1, 1], ["a \u0120", "\u0120 b"], PRE,
              n_embd=8)
rc, err = amn_run(g, "--to", "hf", "-o", os.path.join(work, "sp") + "/")
if rc:
    fails.append("U+0120 merges: amn failed: %s" % err.strip())
else:
    m = load(os.path.join(work, "sp", "tokenizer.json"))["model"]["merges"]
    if m != [["a", " "], [" ", "b"]]:
        fails.append("U+0120 merges written as %s" % m)

# 4. encodings, where Hugging Face tokenizers (node) is at hand
js = os.environ.get("AMN_HF_TOKENIZERS_JS")
if js and shutil.which("node"):
    server = os.path.join(src, "fixtures/hf/shim/transformers/tokenizers_server.cjs")
    p = subprocess.Popen(["node", server, js, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, encoding="utf-8")
    bad = []
    for text, ids in zip(exp["strings"], exp["ids"]):
        p.stdin.write(json.dumps({"op": "encode", "text": text, "add_special_tokens": False}) +
                      "\n")
        p.stdin.flush()
        if json.loads(p.stdout.readline()).get("result") != ids:
            bad.append(text)
    p.stdin.close()
    p.wait()
    if bad:
        fails.append("encodings differ for %d of %d strings: %r" % (len(bad), len(exp["ids"]),
                                                                   bad[:3]))
    print("encoded %d strings with Hugging Face tokenizers" % len(exp["ids"]))
else:
    print("encodings not checked (set AMN_HF_TOKENIZERS_JS and have node)")

for f in fails:
    print("FAIL:", f)
print("hf_to_hf_gemma3: %d failed" % len(fails))
sys.exit(1 if fails else 0)
