#!/usr/bin/env bash
# The --max-* limits: each axis with a file that just passes and one that
# just fails (exit 4, "limit exceeded"); the zip-bomb default and the honest
# all-zero member it spares; sizes as 64M / 2G; raising a cap explicitly, up
# to the highest accepted value.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init limits "$1" "$2"
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
need_plugin safetensors
edge() { # edge AXIS VALUE CMD FILE: passes at VALUE, fails with exit 4 at VALUE-1
  expect "$1 $2 passes" 0 "$3" "$4" "--$1" "$2"
  expect "$1 $(($2 - 1)) fails" 4 "$3" "$4" "--$1" "$(($2 - 1))"
  matches "$1" "$5"
}

st=$src/fixtures/example/tiny-f32.safetensors # 4 tensors
hdr=$(od -An -tu8 -N8 "$st" | tr -d ' ')
edge max-items 4 inspect "$st" "exceed the cap"
edge max-items 4 parse "$st" "exceed the cap"
edge max-header "$hdr" inspect "$st" "exceeds"
edge max-alloc "$hdr" parse "$st" "exceeds"
edge max-depth 3 parse "$st" "nests deeper than 2"

if have "format gguf"; then
  # GGUF: --max-items caps the key/value count as well as the tensor count.
  g=$src/fixtures/gguf/tiny-quant.gguf
  items=$("$amn" inspect --json "$g" | $py -c 'import json,sys; d=json.load(sys.stdin); print(max(len(d["kv"]), d["tensor_count"]))')
  edge max-items "$items" inspect "$g" "exceed the cap of $((items - 1))"
fi

if have "format npz"; then
  # Two DEFLATE members; sizes and ratios read back from the archive.
  $py - "$work/c.npz" <<'PY'
import sys
import numpy as np
np.savez_compressed(sys.argv[1], a=np.zeros(100000, np.float32), b=np.arange(1000, dtype=np.int64))
PY
  read -r total one < <($py - "$work/c.npz" <<'PY'
import sys, zipfile
inf = zipfile.ZipFile(sys.argv[1]).infolist()
print(sum(i.file_size for i in inf), max(i.file_size for i in inf))
PY
)
  edge max-total "$total" parse "$work/c.npz" "exceeds the allocation limit"
  edge max-alloc "$one" parse "$work/c.npz" "single-allocation cap"
  # The ratio cap spares members of at most 256 MiB: a member of zeros
  # (about 1010:1) of exactly 256 MiB passes, one byte more fails; and the
  # latter passes when --max-ratio raises the cap to its ratio.
  floor=$((256 << 20))
  read -r _ c256 < <($py "$src/tests/cli/zeros_npz.py" "$work/z256.npz" "$floor")
  read -r _ c257 < <($py "$src/tests/cli/zeros_npz.py" "$work/z257.npz" "$((floor + 1))")
  [ $((floor / c256)) -ge 1000 ] && pass || fail "z256.npz is not over 1000:1"
  expect "256 MiB of zeros" 0 inspect "$work/z256.npz"
  expect "256 MiB + 1 of zeros" 4 inspect "$work/z257.npz"
  grep -q "more than the 1000:1 ratio cap for members over $floor bytes" "$work/out" && pass ||
    { fail "floor message"; cat "$work/out"; }
  edge max-ratio $(((floor + c257) / c257)) inspect "$work/z257.npz" "ratio cap"
  expect "ratio off" 0 inspect "$work/z257.npz" --max-ratio 0
  # A zip bomb (1 GiB of zeros, about 1010:1) is refused by default, by
  # every command, and convert leaves no output.
  $py "$src/tests/cli/zeros_npz.py" "$work/bomb.npz" $((1 << 30)) >/dev/null
  expect "zip bomb by default" 4 parse "$work/bomb.npz"
  grep -q "more than the 1000:1 ratio cap" "$work/out" && pass || { fail "bomb message"; cat "$work/out"; }
  expect "zip bomb inspect" 4 inspect "$work/bomb.npz"
  expect "zip bomb convert" 4 convert "$work/bomb.npz" --to safetensors -o "$work/bomb.st"
  [ ! -e "$work/bomb.st" ] && pass || fail "zip bomb convert left an output"
  expect "zip bomb raised" 0 inspect "$work/bomb.npz" --max-ratio 1100
  # numpy.savez_compressed of a 64 MiB all-zero float32 array (a mask, a
  # zero-initialised LoRA B) converts by default, bytes intact.
  $py - "$work/mask.npz" <<'PY'
import sys
import numpy as np
np.savez_compressed(sys.argv[1], mask=np.zeros((4096, 4096), np.float32))
PY
  expect "64 MiB of zeros converts" 0 convert "$work/mask.npz" --to safetensors -o "$work/mask.st"
  $py - "$work/mask.st" <<'PY' && pass || fail "mask.st content"
import json, struct, sys
import numpy as np
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])["mask"]
assert h["dtype"] == "F32" and h["shape"] == [4096, 4096], h
d = np.frombuffer(b[8 + n:], np.uint8)
assert d.size == 64 << 20 and not d.any()
PY
fi

# Sizes; raising a cap, up to the highest accepted value.
expect "size 64M" 0 inspect "$st" --max-header 64M
expect "size 2G" 0 inspect "$st" --max-alloc 2G
expect "size 1KiB" 0 inspect "$st" --max-header 1KiB
expect "alloc raised" 0 inspect "$st" --max-alloc 65G
expect "alloc at the ceiling" 0 inspect "$st" --max-total 1P
expect "alloc above the ceiling" 2 inspect "$st" --max-alloc 1025T
grep -q "above the highest accepted value of 1P" "$work/out" && pass || fail "ceiling message"
expect "ratio raised" 0 inspect "$st" --max-ratio 1001
expect "ratio at the ceiling" 0 inspect "$st" --max-ratio 4294967295
expect "ratio above the ceiling" 2 inspect "$st" --max-ratio 4294967296
expect "items raised" 0 inspect "$st" --max-items 2M
expect "depth at the cap" 0 inspect "$st" --max-depth 64
expect "depth above the cap" 2 inspect "$st" --max-depth 65
grep -q "built-in cap (limits only tighten) of 64" "$work/out" && pass || fail "depth cap message"
expect "zero" 2 inspect "$st" --max-items 0
expect "zero size" 2 inspect "$st" --max-alloc 0
expect "not a size" 2 inspect "$st" --max-total 12X
expect "no value" 2 inspect "$st" --max-depth
"$amn" --help | grep -q -- "--max-ratio N" && pass || fail "--help lists the limits"
"$amn" remember --help | grep -q -- "--max-total SIZE" && pass || fail "remember --help lists the limits"

finish limits
