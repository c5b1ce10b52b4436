#!/usr/bin/env bash
# Model folders out: small sharded BF16, GPTQ, AWQ and FP8 folders (made by
# folders.py) remembered into folders with --shard-size; folders.py checks
# the shard split, names, index text, config.json edits, the copies and every
# tensor bit-exact against the single-file output. Also: -o DIR/ from one
# file, an existing target kept without --force and replaced with it, the
# input never replaced, a failed run leaving nothing, forget into a folder.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init folders "$1" "$2"
gen=$src/tests/folders/folders.py
for p in safetensors gptq awq fp8; do
  need_plugin "$p" "\(format\|scheme\) $p "
done
need_python numpy
no_temporaries() { # nothing named .*.amn-* left in $1
  local left
  left=$(find "$1" -maxdepth 1 -name '.*amn-*')
  [ -z "$left" ] && pass || fail "$2: temporaries left: $left"
}

"$py" "$gen" make "$work/in" || { echo "FAIL: folders.py make"; exit 1; }
declare -A sizes=([plain]="5KB default" [gptq]="5KB 12000" [awq]="5KB" [fp8]="5KB 0")
declare -A dtype=([plain]=keep [gptq]=bfloat16 [awq]=bfloat16 [fp8]=bfloat16)
for k in plain gptq awq fp8; do
  run_rc "$k single file" 0 "$amn" remember --no-sync "$work/in/$k" -o "$work/$k.safetensors" -q
  for size in ${sizes[$k]}; do
    opt=(--shard-size "$size") bytes=$size
    [ "$size" = default ] && opt=() bytes=5000000000
    [ "$size" = 5KB ] && bytes=5000
    run_rc "$k folder $size" 0 "$amn" remember --no-sync "$work/in/$k" -o "$work/out-$k-$size/" "${opt[@]}" -q
    run_rc "$k check $size" 0 "$py" "$gen" check "$work/in/$k" "$work/out-$k-$size" \
      "$work/$k.safetensors" "$bytes" "${dtype[$k]}"
  done
done
no_temporaries "$work" "remember"

# A sharded PyTorch checkpoint (pytorch_model-0000K-of-00002.bin + index) as
# one model, its folder or its index; every tensor as torch holds it.
if have "format pth " && "$py" -c "import torch" 2>/dev/null; then
  "$py" "$gen" make-bin "$work/in" || fail "folders.py make-bin"
  run_rc "bin single file" 0 "$amn" remember --no-sync "$work/in/bin" -o "$work/bin.safetensors" -q
  run_rc "bin folder" 0 "$amn" remember --no-sync "$work/in/bin/pytorch_model.bin.index.json" \
    -o "$work/out-bin" --shard-size 6KB -q
  run_rc "bin check" 0 "$py" "$gen" check "$work/in/bin" "$work/out-bin" "$work/bin.safetensors" 6000 keep
  "$py" - "$work/in/bin-expect.safetensors" "$work/bin.safetensors" "$src/tests/folders" <<'EOF2' \
    && pass || fail "bin: tensors differ from torch's"
import sys
sys.path.insert(0, sys.argv[3])
from folders import read_st
want, got = read_st(sys.argv[1]), read_st(sys.argv[2])
assert len(want) == 11 and want == got, sorted(set(want.items()) ^ set(got.items()))
EOF2
  # A folder holding one pytorch_model.bin (no index), as save_pretrained
  # wrote small models: read as that checkpoint, written as a model folder.
  mkdir -p "$work/in/bin1" && cp "$work/in/bin/config.json" "$work/in/bin1/"
  cp "$work/in/bin/pytorch_model-00001-of-00002.bin" "$work/in/bin1/pytorch_model.bin"
  run_rc "bin1 inspect" 0 "$amn" inspect "$work/in/bin1"
  matches "bin1 inspect" "PyTorch state_dict"
  run_rc "bin1 folder" 0 "$amn" remember --no-sync "$work/in/bin1" -o "$work/out-bin1/" -q
  run_rc "bin1 file" 0 "$amn" remember --no-sync "$work/in/bin1/pytorch_model.bin" -o "$work/bin1.safetensors" -q
  "$py" - "$work/out-bin1" "$work/bin1.safetensors" "$src/tests/folders" <<'EOF2' \
    && pass || fail "bin1: folder output differs from the file's"
import os, sys
sys.path.insert(0, sys.argv[3])
from folders import read_st
got, want = read_st(os.path.join(sys.argv[1], "model.safetensors")), read_st(sys.argv[2])
assert len(want) == 5 and got == want, sorted(set(want.items()) ^ set(got.items()))
assert os.path.isfile(os.path.join(sys.argv[1], "config.json"))
EOF2
  # Bad indexes: a parse error saying which, before any output.
  bad() { # bad WHAT WEIGHT_MAP_JSON WORDS
    mkdir -p "$work/badbin" && cp "$work/in/bin/"*.bin "$work/badbin/"
    printf '{"weight_map": {%s}}' "$2" >"$work/badbin/pytorch_model.bin.index.json"
    run_rc "bad bin index: $1" 1 "$amn" remember --no-sync "$work/badbin" -o "$work/badout/"
    matches "bad bin index: $1" "$3"
    [ ! -e "$work/badout" ] && pass || fail "bad bin index: $1: output written"
  }
  s1=pytorch_model-00001-of-00002.bin s2=pytorch_model-00002-of-00002.bin
  bad missing "\"a\": \"pytorch_model-00003-of-00003.bin\"" "shard pytorch_model-00003-of-00003.bin does not exist"
  bad parent "\"a\": \"../$s1\"" "names a bad shard (not a .bin file inside the model folder)"
  bad absolute "\"a\": \"/tmp/$s1\"" "names a bad shard"
  cp "$work/badbin/$s2" "$work/dup.bin" && ln -sf "../dup.bin" "$work/badbin/link.bin"
  bad symlink "\"a\": \"link.bin\"" "is a symlink leading outside the model folder"
  cp "$work/badbin/$s2" "$work/badbin/copy.bin"
  bad "two shards" "\"a\": \"$s2\", \"b\": \"copy.bin\"" "is in two shards"
  bad "not held" "\"nope\": \"$s1\"" "weight_map names nope, no shard holds it"
else
  echo "SKIP: sharded .bin (needs the pth plugin and torch)"
fi

# Default name: <input>-bf16 beside the input, its quantization suffix gone.
cp -r "$work/in/gptq" "$work/in/Tiny-GPTQ-Int4"
run_rc "default name" 0 "$amn" remember --no-sync "$work/in/Tiny-GPTQ-Int4" --to f16 --json
matches "json shards" '"shards": 1'
matches "json copies" '"files_copied": 5'
[ -f "$work/in/Tiny-f16/model.safetensors" ] && pass || fail "default name: no $work/in/Tiny-f16"
grep -q '"torch_dtype": "float16"' "$work/in/Tiny-f16/config.json" && pass || fail "f16 torch_dtype"
# The index as input: the same folder.
run_rc "index input" 0 "$amn" remember --no-sync "$work/in/fp8/model.safetensors.index.json" -o "$work/from-index" --shard-size 5KB -q
diff -r "$work/from-index" "$work/out-fp8-5KB" >/dev/null && pass || fail "index input differs"

# An existing target is kept without --force, replaced with it.
run_rc "exists" 2 "$amn" remember --no-sync "$work/in/plain" -o "$work/out-plain-default" --shard-size 5KB
matches "exists message" "already exists; pass --force"
[ -f "$work/out-plain-default/model.safetensors" ] && pass || fail "existing target changed"
run_rc "force" 0 "$amn" remember --no-sync "$work/in/plain" -o "$work/out-plain-default" --shard-size 5KB --force -q
diff -r "$work/out-plain-default" "$work/out-plain-5KB" >/dev/null && pass || fail "--force: not the new folder"
run_rc "input kept" 2 "$amn" remember --no-sync "$work/in/plain" -o "$work/in/plain" --force
matches "input message" "would replace the input"
run_rc "parent kept" 2 "$amn" remember --no-sync "$work/in/plain" -o "$work/in" --force
[ -f "$work/in/plain/config.json" ] && pass || fail "input folder touched"

# A config.json that is not a JSON object (an array, a truncated text, text
# after the object, nesting past the cap): an error naming it, and no
# folder, no temporary left.
mkdir -p "$work/badcfg"
deep=$(printf '{"a": %s1%s}' "$(printf '[%.0s' $(seq 40))" "$(printf ']%.0s' $(seq 40))")
declare -A bad_rc=(['[1]']=1 ['{"a": ']=1 ['{} x']=1 ["$deep"]=4)
declare -A bad_msg=(['[1]']="config.json: not a JSON object" ['{"a": ']="config.json: not valid JSON"
  ['{} x']="config.json: not valid JSON" ["$deep"]="config.json: JSON nests deeper than 32")
for text in '[1]' '{"a": ' '{} x' "$deep"; do
  rm -rf "$work/badcfg/m" "$work/badcfg/out"
  cp -r "$work/in/plain" "$work/badcfg/m"
  printf '%s' "$text" >"$work/badcfg/m/config.json"
  run_rc "bad config.json ${text:0:12}" "${bad_rc[$text]}" "$amn" remember --no-sync "$work/badcfg/m" -o "$work/badcfg/out"
  matches "bad config.json message" "${bad_msg[$text]}"
  [ ! -e "$work/badcfg/out" ] && pass || fail "bad config.json: output left"
  no_temporaries "$work/badcfg" "bad config.json"
done

# -o DIR/ from a single file: the shards alone.
run_rc "file to folder" 0 "$amn" remember --no-sync "$work/plain.safetensors" -o "$work/single/" -q
[ "$(ls "$work/single")" = model.safetensors ] && pass || fail "file to folder: $(ls "$work/single")"
cmp -s "$work/single/model.safetensors" "$work/plain.safetensors" && pass || fail "file to folder bytes"

# Scale-out: shards in separate processes (in any order, one at a time or as
# a range), then the index and the other files, give the one run's bytes.
for part in 3 1-2 6 4-5; do
  run_rc "only-shards $part" 0 "$amn" remember --no-sync "$work/in/gptq" -o "$work/scaled" \
    --shard-size 5KB --only-shards "$part" -q
done
[ ! -e "$work/scaled/config.json" ] && pass || fail "only-shards wrote more than shards"
run_rc "write-index" 0 "$amn" remember --no-sync "$work/in/gptq" -o "$work/scaled" --shard-size 5KB --write-index -q
diff -r "$work/scaled" "$work/out-gptq-5KB" && pass || fail "scale-out differs from one run"
run_rc "shard again" 2 "$amn" remember --no-sync "$work/in/gptq" -o "$work/scaled" --shard-size 5KB --only-shards 2
matches "shard again message" "already exists; pass --force"
run_rc "shard past the end" 2 "$amn" remember --no-sync "$work/in/gptq" -o "$work/scaled" --shard-size 5KB --only-shards 6-7
matches "past the end message" "the output has 6 shards"
run_rc "bad range" 2 "$amn" remember --no-sync "$work/in/gptq" -o "$work/scaled" --only-shards 2-1
matches "bad range message" "bad --only-shards"
no_temporaries "$work/scaled" "scale-out"

# Bad options: before any output.
run_rc "bad shard size" 2 "$amn" remember --no-sync "$work/in/plain" -o "$work/bad1" --shard-size 5XB
matches "bad shard size message" "bad --shard-size"
run_rc "folder needs safetensors" 2 "$amn" convert "$work/in/plain" --to npz -o "$work/bad2/"
matches "folder target message" "model folder is written as safetensors"
[ ! -e "$work/bad1" ] && [ ! -e "$work/bad2" ] && pass || fail "output left after a refusal"

# A failed write (ENOSPC in the third shard) leaves neither target nor temporaries.
AMN_TEST_ENOSPC_AFTER=100 run_rc "enospc" 6 "$amn" remember --no-sync "$work/in/gptq" -o "$work/full" --shard-size 5KB
[ ! -e "$work/full" ] && pass || fail "enospc: target left"
no_temporaries "$work" "enospc"

# Killed (SIGTERM, SIGINT) at a few points of a 48 MiB folder, on the O_TMPFILE
# and the named path: no temporary folder or file left, and the target absent
# or whole (the run may finish first on a fast machine).
"$py" - "$work/big" "$src/tests/folders" <<'EOF2' || fail "big folder"
import os, sys
sys.path.insert(0, sys.argv[2])
from folders import write_st
os.makedirs(sys.argv[1])
for k in range(3):
    write_st(f"{sys.argv[1]}/model-0000{k + 1}-of-00003.safetensors",
             [(f"w{k}.{j}", "F32", (2 << 20,), bytes(8 << 20)) for j in range(2)])
EOF2
echo '{"torch_dtype": "float32"}' >"$work/big/config.json"
for nt in 0 1; do
  for sig in TERM; do
    [ "$nt" = 1 ] && sig=INT
    for at in 0.05 0.3; do
      rm -rf "$work/killed"
      AMN_NO_TMPFILE=$nt "$amn" convert --no-sync "$work/big" --to safetensors -o "$work/killed" \
        --shard-size 20MB -q >/dev/null 2>&1 &
      pid=$!
      sleep "$at"
      kill -"$sig" "$pid" 2>/dev/null
      wait "$pid"
      no_temporaries "$work" "killed by $sig at $at s (named: $nt)"
      if [ -e "$work/killed" ]; then
        [ "$(ls "$work/killed" | wc -l)" -eq 4 ] && pass || fail "killed at $at s: partial folder"
      else pass; fi
    done
  done
done
rm -rf "$work/big" "$work/killed"

# forget into a folder: quantization_config of the target, the rest copied.
if have "encode bnb"; then
  run_rc "forget folder" 0 "$amn" forget --no-sync "$work/in/plain" --to bnb-nf4 -o "$work/nf4/" --shard-size 5KB
  [ -f "$work/nf4/model.safetensors.index.json" ] && pass || fail "forget: no index"
  "$py" - "$work/nf4" "$work/in/plain" <<'EOF' && pass || fail "forget folder contents"
import json, os, sys
out, src = sys.argv[1:]
c = json.load(open(os.path.join(out, "config.json")))
assert c["quantization_config"]["quant_method"] == "bitsandbytes", c
assert c["torch_dtype"] == "float16", c  # forget keeps it
assert list(c)[:4] == list(json.load(open(os.path.join(src, "config.json"))))[:4]
for f in ("tokenizer.json", "README.md", "tokenizer.model"):
    assert open(os.path.join(out, f), "rb").read() == open(os.path.join(src, f), "rb").read(), f
idx = json.load(open(os.path.join(out, "model.safetensors.index.json")))
assert any(k.endswith(".weight.absmax") for k in idx["weight_map"]), idx
EOF
fi
no_temporaries "$work" "all"

finish folders
