#!/usr/bin/env bash
# Packed model folders read the files beside their weights as the folder
# does: `--to gguf` of a packed Hugging Face folder is the converter route
# of the unpacked folder (llama.cpp's names, config.json, tokenizer files),
# byte for byte; the quantization settings files (config.json's
# quantization_config, quantize_config.json) reach the GPTQ and bnb plugins
# from the archive, so `remember model.tar` equals `remember model/`; and
# nothing is left in $TMPDIR, after a run or after one killed by SIGTERM or
# SIGKILL.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init archfolders "$1" "$2"
need_plugin safetensors
cd "$work" || exit 1
mkdir tmp
export TMPDIR=$work/tmp # every temporary file of amn goes here, and must go away
clean_tmp() { # clean_tmp WHAT: nothing of amn's left in $TMPDIR
  [ -z "$(ls -A "$TMPDIR")" ] && pass ||
    { fail "$1: left in \$TMPDIR: $(ls -A "$TMPDIR" | tr '\n' ' ')"; rm -rf "${TMPDIR:?}"/*; }
}
pack() { # pack FOLDER NAME: NAME.tar, NAME.tar.gz, NAME.zip of FOLDER's files under NAME/
  local f=$1 n=$2
  mkdir -p packs/$n && cp -r "$f"/. packs/$n/
  (cd packs && tar cf ../$n.tar $n && tar czf ../$n.tar.gz $n) || fail "tar $n"
  (cd packs && $py -c '
import os, sys, zipfile
n = sys.argv[1]
with zipfile.ZipFile("../" + n + ".zip", "w", zipfile.ZIP_DEFLATED) as z:
    for f in sorted(os.listdir(n)):
        z.write(os.path.join(n, f), n + "/" + f)' $n) || fail "zip $n"
}

# ---- a packed Hugging Face folder to GGUF: the folder's file -------------
if have "scheme hf "; then
  # Shards with an index and generation_config.json; shards without an index;
  # a sentencepiece tokenizer with added tokens; a model card (README.md);
  # pytorch_model.bin, and .bin shards with their index.
  for c in Qwen3-Tiny-Base qwen3-tiny-noindex Llama-2-Tiny-SPM Qwen2.5-Tiny-Instruct \
    Llama-2-Tiny-Bin qwen2-tiny-bin; do
    pack "$src/fixtures/hf/$c" $c
    want=$(grep "  $c/f16\$" "$src/fixtures/hf/expected.sha256" | cut -d' ' -f1)
    expect "$c/ to gguf" 0 convert packs/$c --to gguf -o ref-$c.gguf --quiet
    for a in $c.tar $c.tar.gz $c.zip; do
      expect "$a to gguf" 0 convert $a --to gguf -o $a.gguf --quiet
      same "$a to gguf" ref-$c.gguf $a.gguf
      if [ -n "$want" ]; then
        got=$(sha256sum $a.gguf | cut -d' ' -f1)
        [ "$got" = "$want" ] && pass || fail "$a: sha256 $got, the converter's $want"
      fi
      clean_tmp "$a to gguf"
    done
  done
  # .bin shards without their index: read in name order, as a folder's.
  c=qwen2-tiny-bin
  mkdir -p noix && cp -r packs/$c noix/ && rm noix/$c/pytorch_model.bin.index.json
  (cd noix && tar cf ../$c-noix.tar $c) || fail "tar $c-noix"
  expect "$c-noix.tar to gguf" 0 convert $c-noix.tar --to gguf -o noix.gguf --quiet
  same "$c-noix.tar to gguf" ref-$c.gguf noix.gguf
  # beside a pytorch_model.bin (transformers' one file) they are refused
  cp noix/$c/pytorch_model-00001-of-00002.bin noix/$c/pytorch_model.bin
  (cd noix && tar cf ../$c-both.tar $c) || fail "tar $c-both"
  expect "$c-both.tar to gguf" 3 convert $c-both.tar --to gguf -o both.gguf --quiet
  says "$c-both.tar to gguf" "model files beside"
  [ ! -e both.gguf ] && pass || fail "$c-both.tar: an output was written"
  # Another output type, and a GGUF file type in one pass.
  c=Qwen3-Tiny-Base
  expect "$c/ q8_0" 0 convert packs/$c --to gguf --out-dtype q8_0 -o ref-q8.gguf --quiet
  expect "$c.tar.gz q8_0" 0 convert $c.tar.gz --to gguf --out-dtype q8_0 -o q8.gguf --quiet
  same "$c.tar.gz q8_0" ref-q8.gguf q8.gguf
  if have "encode gguf"; then
    expect "$c/ Q4_K_M" 0 convert packs/$c --to gguf-Q4_K_M -o ref-q4.gguf --quiet
    expect "$c.tar Q4_K_M" 0 convert $c.tar --to gguf-Q4_K_M -o q4.gguf --quiet
    same "$c.tar Q4_K_M" ref-q4.gguf q4.gguf
  fi
  # Packed at the top level: the folder takes the archive's name, as `tar
  # xf` into a folder of that name would give it (general.name reads it).
  mkdir top && (cd packs/$c && tar czf ../../top/$c.tgz .) || fail "tar top"
  expect "top-level $c.tgz" 0 convert top/$c.tgz --to gguf -o top.gguf --quiet
  same "top-level $c.tgz" ref-$c.gguf top.gguf
  clean_tmp "the GGUF runs"
  # A packed folder that is not a Hugging Face one is refused as the
  # unpacked one is, naming the archive, with no output.
  mkdir -p plain/w && cp "$src/fixtures/example/tiny-f32.safetensors" plain/w/model.safetensors
  (cd plain && tar czf ../w.tgz w)
  expect "w.tgz to gguf" 3 convert w.tgz --to gguf -o w.gguf
  says "w.tgz to gguf" "w.tgz has no config.json"
  [ ! -e w.gguf ] && pass || fail "w.tgz: an output was written"
  clean_tmp "the refusal"
  # A packed GGUF is no Hugging Face folder: --to gguf / gguf-TYPE convert
  # the file it holds, as for the file itself.
  mkdir -p pg/g && cp "$src/fixtures/gguf_imatrix/model.gguf" pg/g/ && (cd pg && tar czf ../g.tgz g)
  for to in gguf gguf-Q4_0; do
    expect "g.tgz --to $to" 0 convert g.tgz --to $to -o g-$to.gguf --quiet
    expect "model.gguf --to $to" 0 convert pg/g/model.gguf --to $to -o g-$to-ref.gguf --quiet
    same "packed GGUF --to $to" g-$to-ref.gguf g-$to.gguf
  done
  clean_tmp "the packed GGUF"
  # A packed folder that does not open reports the archive's own error,
  # whatever --out-dtype asks for, with no output.
  mkdir -p brk/m && printf '\x10\0\0\0\0\0\0\0{"a":' >brk/m/model.safetensors &&
    echo '{}' >brk/m/config.json && (cd brk && tar czf ../brk.tgz m)
  for dt in keep f16; do
    expect "brk.tgz --out-dtype $dt" 1 convert brk.tgz --to gguf --out-dtype $dt -o brk.gguf
    says "brk.tgz --out-dtype $dt" "brk.tgz/m/model.safetensors"
  done
  [ ! -e brk.gguf ] && pass || fail "brk.tgz: an output was written"
  clean_tmp "the broken archive"
else
  echo "note: no hf plugin; the GGUF checks are left out"
fi

# ---- quantization settings files read from the archive -------------------
if have "scheme gptq" && $py -c 'import numpy' 2>/dev/null; then
  $py "$src/tests/folders/folders.py" make gen >/dev/null || fail "making the folders"
  # gptq_v2 zero points, said only by quantize_config.json (or by
  # config.json's quantization_config): the tensors alone read as gptq v1.
  for how in quantize config; do
    d=gen/gptq-v2-$how && cp -r gen/gptq $d
    $py - "$d" "$how" <<'PY' || fail "editing $d"
import json, os, sys
d, how = sys.argv[1:]
if how == "quantize":
    p = os.path.join(d, "quantize_config.json")
    q = json.load(open(p)); q["checkpoint_format"] = "gptq_v2"; json.dump(q, open(p, "w"))
else:
    os.remove(os.path.join(d, "quantize_config.json"))
    p = os.path.join(d, "config.json")
    c = json.load(open(p)); c["quantization_config"]["checkpoint_format"] = "gptq_v2"
    json.dump(c, open(p, "w"))
PY
  done
  mkdir -p bare && cp gen/gptq/*.safetensors* bare/ # the control: no settings files
  "$amn" remember bare --to f32 -o bare.safetensors --quiet || fail "remember bare/"
  folders="gen/gptq gen/gptq-v2-quantize gen/gptq-v2-config"
  have "scheme awq" && folders="$folders gen/awq"
  have "scheme bnb" && folders="$folders $src/fixtures/bnb/model"
  for f in $folders; do
    n=q-$(basename "$f")
    pack "$f" $n
    "$amn" remember packs/$n --to f32 -o ref-$n.safetensors --quiet || fail "remember $f/"
    for a in $n.tar $n.tar.gz $n.zip; do
      expect "remember $a" 0 remember $a --to f32 -o $a.safetensors --quiet
      same "remember $a" ref-$n.safetensors $a.safetensors
    done
  done
  # The settings matter here: without them the result is another.
  for how in quantize config; do
    cmp -s bare.safetensors ref-q-gptq-v2-$how.safetensors && fail "gptq_v2 ($how) reads as v1" ||
      pass
  done
  clean_tmp "the remember runs"
else
  echo "note: no gptq plugin or numpy; the settings checks are left out"
fi

# ---- interrupted runs leave nothing in $TMPDIR ----------------------------
# A sharded output folder from a compressed archive, stopped after its first
# shard by the test-only hook with SIGTERM (handled: the temporary folder of
# the packed folder's other files is removed) and with SIGKILL (the model
# files' temporary files are unlinked: they vanish with the process).
mkdir -p big/model
$py - big/model <<'PY' || fail "making the big folder"
import json, os, struct, sys
n = 8 << 20
hdr = json.dumps({"w%d" % i: {"dtype": "F32", "shape": [n // 4],
                              "data_offsets": [i * n, (i + 1) * n]} for i in range(4)}).encode()
hdr += b" " * (-len(hdr) % 8)
with open(os.path.join(sys.argv[1], "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr)
    for i in range(4):
        f.write(os.urandom(n))
open(os.path.join(sys.argv[1], "config.json"), "w").write('{"model_type": "big"}\n')
open(os.path.join(sys.argv[1], "tokenizer.json"), "w").write('{}\n')
PY
(cd big && tar czf ../big.tgz model) || fail "tar big"
for sig in 15 9; do
  rc=$( (AMN_TEST_FOLDER_KILL_AFTER=1 AMN_TEST_FOLDER_KILL_SIGNAL=$sig "$amn" convert big.tgz \
    --to safetensors --shard-size 10MB -o killed-$sig/ --quiet >/dev/null 2>&1
    echo $?) 2>/dev/null)
  [ $rc -eq $((128 + sig)) ] && pass || fail "signal $sig: exit $rc, wanted $((128 + sig))"
  if [ $sig = 15 ]; then
    clean_tmp "big.tgz -o DIR/ killed by SIGTERM"
  else # what SIGKILL can leave: the named folder of the other files, no model file
    find "$TMPDIR" -type f ! -path "*/amn-side-*/model/*" | grep -q . &&
      fail "big.tgz killed by SIGKILL: a model file left in \$TMPDIR" || pass
    ls -d "$TMPDIR"/amn-side-* >/dev/null 2>&1 && pass || fail "no side folder to sweep"
    # The next run that unpacks a packed folder's files removes it (its
    # maker no longer holds its lock), and then its own.
    expect "after SIGKILL" 0 convert big.tgz --to safetensors -o after/ --quiet
    clean_tmp "the run after the one killed by SIGKILL"
  fi
done
# One output file, killed by a real signal while it is being written.
for sig in TERM KILL; do
  (
    "$amn" convert big.tgz --to bf16 -o big-$sig.safetensors --quiet >/dev/null 2>&1 &
    pid=$!
    sleep 0.5
    kill -s $sig $pid
    wait $pid
  ) 2>/dev/null
  clean_tmp "big.tgz killed by SIG$sig"
done

finish archives_folders need-passes
