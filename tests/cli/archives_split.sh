#!/usr/bin/env bash
# A split GGUF (NAME-0000K-of-0000N.gguf, made by amn's own `convert --to
# gguf --split-max-tensors`, which tests/gguf/gguf_split.sh proves equal to
# llama-gguf-split --split) packed in a model folder opens as the split
# model, read from the archive: every command's output equals the one of the
# unpacked folder's shard, byte for byte, for an uncompressed tar and each
# compressed kind. Then hostile splits: a missing shard, a shard of another
# split, two splits in one folder; refused naming the member, nothing written.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init archives-split "$1" "$2"
need_plugin gguf
model=$src/fixtures/gguf_imatrix/model.gguf
cd "$work" || exit 1
st=false
have "format safetensors" && st=true
# The tensors' values as F32: remember (which writes safetensors), or in a
# build without the safetensors plugin a conversion to npz.
deq="remember --to f32"
$st || deq="convert --to npz --out-dtype f32"

mkdir -p split/model
"$amn" convert "$model" --to gguf --out-dtype keep --split-max-tensors 10 \
  -o split/model/sh.gguf --quiet --no-sync || fail "splitting $model"
three=(sh-00001-of-00003.gguf sh-00002-of-00003.gguf sh-00003-of-00003.gguf)
for n in "${three[@]}"; do [ -f split/model/$n ] || fail "no split/model/$n"; done
echo "a tokenizer, not a model file" >split/model/README.md

pack() { # pack DIR NAME: every kind of archive of DIR/model, members in name order
  (cd "$1" && tar cf ../"$2".tar model && tar czf ../"$2".tar.gz model &&
    tar cJf ../"$2".tar.xz model && tar --zstd -cf ../"$2".tar.zst model) || fail "tar $1"
  $py - "$1" "$2" <<'PY' || fail "zip $1"
import os, sys, zipfile
d, n = sys.argv[1], sys.argv[2]
for name, how in ((n + ".zip", zipfile.ZIP_DEFLATED), (n + "-stored.zip", zipfile.ZIP_STORED)):
    with zipfile.ZipFile(name, "w", how) as z:
        for f in sorted(os.listdir(os.path.join(d, "model"))):
            z.write(os.path.join(d, "model", f), "model/" + f)
PY
}
pack split split
# Shard 3 first in the archive: any order of members opens the same model.
(cd split && tar cf ../rev.tar model/"${three[2]}" model/"${three[0]}" model/"${three[1]}" &&
  tar czf ../rev.tar.gz model/"${three[2]}" model/"${three[0]}" model/"${three[1]}") ||
  fail "tar rev"

s1=split/model/${three[0]}
"$amn" parse $s1 | tail -n +2 >ref.parse
"$amn" inspect $s1 | tail -n +2 >ref.inspect
"$amn" convert $s1 --to gguf --out-dtype keep -o ref-merged.gguf --quiet --no-sync ||
  fail "merge $s1"
# shellcheck disable=SC2086
"$amn" $deq -o ref-f32.npz --quiet --no-sync $s1 || fail "remember $s1"
$st && { "$amn" convert $s1 --to safetensors -o ref.safetensors --quiet --no-sync ||
  fail "convert $s1"; }
"$amn" inspect $s1 | grep -q "split in 3 files" && pass || fail "the shard does not open as the split model"
for a in split.tar split.tar.gz split.tar.xz split.tar.zst split.zip split-stored.zip rev.tar \
  rev.tar.gz; do
  "$amn" parse $a | tail -n +2 >$a.parse
  same "parse $a" ref.parse $a.parse
  "$amn" inspect $a | tail -n +2 >$a.inspect
  same "inspect $a" ref.inspect $a.inspect
  expect "merge $a" 0 convert $a --to gguf --out-dtype keep -o $a.gguf --quiet --no-sync
  same "merge $a" ref-merged.gguf $a.gguf
  # shellcheck disable=SC2086
  expect "remember $a" 0 $deq -o $a.npz --quiet --no-sync $a
  same "remember $a" ref-f32.npz $a.npz
  if $st; then
    expect "convert $a" 0 convert $a --to safetensors -o $a.safetensors --quiet --no-sync
    same "convert $a" ref.safetensors $a.safetensors
  fi
  expect "scan $a" 0 scan $a
  says "scan $a" "model/${three[0]}"
done
# What needs only headers never decompresses a compressed archive's model
# files to disk: with no usable $TMPDIR, inspect, parse and scan still work
# (a conversion needs one, and says so naming the member).
for a in split.tar.gz split.tar.zst split.zip; do
  TMPDIR=$work/none "$amn" parse $a | tail -n +2 >$a.notmp.parse
  same "parse $a, no TMPDIR" ref.parse $a.notmp.parse
  TMPDIR=$work/none expect "inspect $a, no TMPDIR" 0 inspect $a
  TMPDIR=$work/none expect "scan $a, no TMPDIR" 0 scan $a
  TMPDIR=$work/none expect "convert $a, no TMPDIR" 6 convert $a --to gguf --out-dtype keep \
    -o bad.gguf --quiet
  says "convert $a, no TMPDIR" "no temporary file in $work/none"
  nothing_left "convert $a, no TMPDIR"
done

# forget --keep-split of the packed split writes the shards the folder's does.
mkdir -p ref-q tar-q tgz-q
"$amn" forget $s1 --to Q8_0 --keep-split -o ref-q/q.gguf --quiet --no-sync || fail "forget $s1"
expect "forget split.tar" 0 forget split.tar --to Q8_0 --keep-split -o tar-q/q.gguf --quiet --no-sync
expect "forget split.tar.gz" 0 forget split.tar.gz --to Q8_0 --keep-split -o tgz-q/q.gguf \
  --quiet --no-sync
for n in q-00001-of-00003.gguf q-00002-of-00003.gguf q-00003-of-00003.gguf; do
  same "forget split.tar $n" ref-q/$n tar-q/$n
  same "forget split.tar.gz $n" ref-q/$n tgz-q/$n
done

# Hostile splits, packed: refused with the plain shards' errors, naming the
# archive's member; nothing written.
mkdir -p other/model
"$amn" convert "$model" --to gguf --out-dtype keep --split-max-tensors 8 -o other/model/sh.gguf \
  --quiet --no-sync || fail "the other split"
refused() { # refused NAME WORD EXIT: every command on A = NAME.tar, NAME.tar.gz says WORD (@: A)
  local name=$1 word=$2 want=$3
  (cd $name && tar cf ../$name.tar model && tar czf ../$name.tar.gz model) || fail "tar $name"
  for a in $name.tar $name.tar.gz; do
    for cmd in "inspect" "parse" "$deq -o bad.npz" \
      "forget --to Q8_0 --keep-split -o bad.gguf"; do
      # shellcheck disable=SC2086
      expect "$name: $cmd $a" $want $cmd $a
      says "$name: $cmd $a" "${word//@/$a}"
      nothing_left "$name: $cmd $a"
    done
    expect "$name: scan $a" 1 scan $a # unreadable: a finding, exit 1
    says "$name: scan $a" "${word//@/$a}"
  done
}
mkdir -p missing/model && cp split/model/${three[0]} split/model/${three[2]} missing/model/
refused missing "@/model/${three[0]}: shard 2 of the split GGUF is missing" 1
mkdir -p nofirst/model && cp split/model/${three[1]} split/model/${three[2]} nofirst/model/
refused nofirst "@/model/${three[1]}: shard 1 of the split GGUF is missing" 1
mkdir -p mixed/model && cp split/model/sh-0000* mixed/model/ &&
  cp other/model/sh-00002-of-00003.gguf mixed/model/ # tensors of shards 1 and 2 overlap
refused mixed "@/model/${three[1]}: tensor" 1 # ... is also in shard 1
mkdir -p two/model && cp split/model/sh-0000* two/model/ &&
  cp other/model/sh-00001-of-00003.gguf two/model/other-00001-of-00003.gguf
refused two "@: 4 model files beside" 3

finish archives_split
