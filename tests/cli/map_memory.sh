#!/usr/bin/env bash
# Reading an input through its mapping leaves no more of it mapped than a
# batch of pieces: with AMN_INPUT=map and two workers, a 256 MiB model
# copied, cast, written as GGUF or passed through into an npz keeps a peak
# resident set far below its size (reading through the mapping used to keep
# every page it read mapped: the peak was the model's size), and gives the
# bytes the pread way gives. An encoder's sources, mapped ahead of the
# workers (256 MiB ahead at most), are unmapped once read: a 512 MiB model
# quantized to Q8_0 keeps well under its size (it kept all of it). Under
# ASan the bytes are checked, not the RSS (its own memory is in it).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init mapmem "$1" "$2"
need_plugin safetensors
[ -x /usr/bin/time ] || skip "needs /usr/bin/time (GNU time)"
cd "$work" || exit 1
mkdir -p model

# 256 MiB of f32 (positive, small exponents: finite values), one tensor.
mib=256
/usr/bin/python3 "$src/tests/lib/big_safetensors.py" model/model.safetensors $mib --seed 2 ||
  fail "making the model"
in=model/model.safetensors
size_kib=$((mib * 1024))
# Out of the page cache and read back: read ahead, as from disk, the file
# is held in large folios where the kernel can (a fault maps a whole one).
/usr/bin/python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
while os.read(fd, 1 << 20):
    pass' "$in" || fail "re-reading the model"

# check NAME EXT ARGS...: runs amn through the mapping (peak RSS measured)
# and by pread; the two outputs must be equal.
check() {
  local name=$1 ext=$2; shift 2
  rm -f map.$ext pread.$ext # a check that failed early leaves them
  AMN_INPUT=map /usr/bin/time -f %M -o rss "$amn" "$@" -o map.$ext --threads 2 --quiet \
    >out 2>&1 || { fail "$name (map): exit $?"; indent out; return; }
  AMN_INPUT=pread "$amn" "$@" -o pread.$ext --threads 2 --quiet >out 2>&1 ||
    { fail "$name (pread): exit $?"; indent out; }
  cmp -s map.$ext pread.$ext && pass || fail "$name: the mapping's bytes are not pread's"
  local got
  got=$(tail -1 rss)
  echo "peak RSS $name through the mapping: $got KiB (model $size_kib KiB)"
  sanitized && return # ASan's own memory is in the figure (harness.sh)
  [ "$got" -lt $((size_kib * ${bound_num:-1} / ${bound_den:-3})) ] && pass || fail "$name: peak RSS $got KiB through the mapping"
  rm -f map.$ext pread.$ext
}

check copy safetensors convert "$in" --to safetensors --out-dtype keep
check cast safetensors remember "$in" --to bf16
check gguf gguf convert "$in" --to gguf
check npz npz convert "$in" --to npz --out-dtype keep
rm -f "$in"

# 512 MiB of f16 in 32 tensors of 16 MiB, for an encoder.
need_plugin gguf
/usr/bin/python3 "$src/tests/lib/big_safetensors.py" model/model.safetensors 512 --dtype F16 \
  --tensors 32 --seed 3 || fail "making the second model"
size_kib=$((512 * 1024))
bound_den=4 bound_num=3 check q8_0 gguf forget "$in" --to Q8_0

finish map_memory
