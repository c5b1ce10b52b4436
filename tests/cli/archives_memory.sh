#!/usr/bin/env bash
# A compressed model archive is read in one pass with memory bounded by a
# block, not by the model: a 128 MiB model file packed as .tar.gz and .zip
# (deflated) converts with a peak resident set far below its size, and
# no larger than the unpacked folder's (+ slack); inspect reads headers only.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init archmem "$1" "$2"
need_plugin safetensors
[ -x /usr/bin/time ] || skip "needs /usr/bin/time (GNU time)"
cd "$work" || exit 1
export TMPDIR=$work/tmp
mkdir -p tmp model
rss() { # rss NAME ARGS...: runs amn, its peak RSS (KiB) into rss_NAME
  local name=$1; shift
  /usr/bin/time -f %M -o rss.$name "$amn" "$@" >out 2>&1 ||
    { fail "amn $*: exit $?"; indent out; }
  eval "rss_$name=$(tail -1 rss.$name)"
  echo "peak RSS $name: $(tail -1 rss.$name) KiB"
}

# 128 MiB of f32 (positive, small exponents: finite values), one tensor.
mib=128
/usr/bin/python3 "$src/tests/lib/big_safetensors.py" model/model.safetensors $mib --seed 1 ||
  fail "making the model"
echo '{"model_type": "big"}' > model/config.json
tar -I 'gzip -1' -cf big.tgz model || fail "tar"
/usr/bin/python3 -c '
import zipfile
with zipfile.ZipFile("big.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    for n in ("model/model.safetensors", "model/config.json"):
        z.write(n)' || fail "zip"
size_kib=$((mib * 1024))

rss folder convert model --to safetensors -o folder.safetensors --quiet
rss folder_bf16 remember model --to bf16 -o folder-bf16.safetensors --quiet
for a in big.tgz big.zip; do
  k=${a#big.}
  rss $k convert $a --to safetensors -o $k.safetensors --quiet
  cmp -s folder.safetensors $k.safetensors && pass || fail "convert $a: not the folder's bytes"
  got=$(eval echo \$rss_$k)
  # Far below the model: half of it at most. The peak RSS also counts the
  # mapped page-cache pages of the input (or of a member's temporary file),
  # which depend on the folios the kernel holds them in, not on amn: 18 to
  # 35 MiB for the folder itself by machine, 80 MiB once it was read ahead
  # from disk. A path that buffered the model would take 128 MiB or more.
  [ "$got" -lt $((size_kib / 2)) ] && pass ||
    fail "convert $a: peak RSS $got KiB (model $size_kib KiB, folder $rss_folder KiB)"
  rss ${k}_bf16 remember $a --to bf16 -o $k-bf16.safetensors --quiet
  cmp -s folder-bf16.safetensors $k-bf16.safetensors && pass ||
    fail "remember $a: not the folder's bytes"
  got=$(eval echo \$rss_${k}_bf16)
  [ "$got" -lt $((rss_folder_bf16 + 16384)) ] && pass ||
    fail "remember $a: peak RSS $got KiB, the folder's $rss_folder_bf16 KiB"
  rss ${k}_inspect inspect $a
  got=$(eval echo \$rss_${k}_inspect)
  [ "$got" -lt $((size_kib / 2)) ] && pass || fail "inspect $a: peak RSS $got KiB"
done
[ -z "$(ls -A tmp)" ] && pass || fail "temporary files left in \$TMPDIR"

finish archives_memory
