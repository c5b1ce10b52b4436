#!/usr/bin/env bash
# The --max-* limits: each axis with a file that just passes and one that
# just fails (exit 4, "limit exceeded"); the zip-bomb default; sizes as 64M /
# 2G; tighten-only against the built-in caps.
set -uo pipefail
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
"$amn" plugins 2>/dev/null | grep -q "format safetensors" ||
  { echo "SKIP: needs the safetensors plugin, not built"; exit 77; }
py=/usr/bin/python3
work=$(mktemp -d /tmp/amn-limits.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { passes=$((passes + 1)); }
expect() { # expect WHAT RC ARGS...
  local what=$1 want=$2; shift 2
  "$amn" "$@" >"$work/out" 2>&1; local rc=$?
  [ $rc -eq "$want" ] && pass || { fail "$what: exit $rc, wanted $want"; sed 's/^/    /' "$work/out"; }
}
edge() { # edge AXIS VALUE CMD FILE: passes at VALUE, fails with exit 4 at VALUE-1
  expect "$1 $2 passes" 0 "$3" "$4" "--$1" "$2"
  expect "$1 $(($2 - 1)) fails" 4 "$3" "$4" "--$1" "$(($2 - 1))"
  grep -q "$5" "$work/out" && pass || { fail "$1: no '$5' in:"; cat "$work/out"; }
}

st=$src/fixtures/example/tiny-f32.safetensors # 4 tensors
hdr=$(od -An -tu8 -N8 "$st" | tr -d ' ')
edge max-items 4 inspect "$st" "exceed the cap"
edge max-items 4 parse "$st" "exceed the cap"
edge max-header "$hdr" inspect "$st" "exceeds"
edge max-alloc "$hdr" parse "$st" "exceeds"
edge max-depth 3 parse "$st" "nests deeper than 2"

if "$amn" plugins | grep -q "format gguf"; then
  # GGUF: --max-items caps the key/value count as well as the tensor count.
  g=$src/fixtures/gguf/tiny-quant.gguf
  items=$("$amn" inspect --json "$g" | $py -c 'import json,sys; d=json.load(sys.stdin); print(max(len(d["kv"]), d["tensor_count"]))')
  edge max-items "$items" inspect "$g" "exceed the cap of $((items - 1))"
fi

if "$amn" plugins | grep -q "format npz"; then
  # Two DEFLATE members; sizes and ratios read back from the archive.
  $py - "$work/c.npz" "$work/bomb.npz" <<'PY'
import io, sys, zipfile
import numpy as np
np.savez_compressed(sys.argv[1], a=np.zeros(100000, np.float32), b=np.arange(1000, dtype=np.int64))
buf = io.BytesIO()
np.save(buf, np.zeros(64 << 20, np.uint8))
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
    z.writestr("x.npy", buf.getvalue())
PY
  read -r total one ratio bomb < <($py - "$work/c.npz" "$work/bomb.npz" <<'PY'
import math, sys, zipfile
inf = zipfile.ZipFile(sys.argv[1]).infolist()
b = zipfile.ZipFile(sys.argv[2]).infolist()[0]
print(sum(i.file_size for i in inf), max(i.file_size for i in inf),
      max(math.ceil(i.file_size / i.compress_size) for i in inf), b.file_size / b.compress_size)
PY
)
  edge max-total "$total" parse "$work/c.npz" "exceeds the allocation limit"
  edge max-alloc "$one" parse "$work/c.npz" "single-allocation cap"
  edge max-ratio "$ratio" inspect "$work/c.npz" "ratio cap"
  # A zip bomb (64 MiB of zeros, about 1030:1) is refused by default.
  echo "bomb ratio $bomb"
  expect "zip bomb by default" 4 parse "$work/bomb.npz"
  grep -q "more than the 1000:1 ratio cap" "$work/out" && pass || { fail "bomb message"; cat "$work/out"; }
  expect "zip bomb inspect" 4 inspect "$work/bomb.npz"
fi

# Sizes and tighten-only.
expect "size 64M" 0 inspect "$st" --max-header 64M
expect "size 2G" 0 inspect "$st" --max-alloc 2G
expect "size 1KiB" 0 inspect "$st" --max-header 1KiB
expect "above the cap" 2 inspect "$st" --max-alloc 65G
grep -q "built-in cap of 64G" "$work/out" && pass || fail "cap message"
expect "ratio above the cap" 2 inspect "$st" --max-ratio 1001
expect "items above the cap" 2 inspect "$st" --max-items 2M
expect "zero" 2 inspect "$st" --max-items 0
expect "not a size" 2 inspect "$st" --max-total 12X
expect "no value" 2 inspect "$st" --max-depth
"$amn" --help | grep -q -- "--max-ratio N" && pass || fail "--help lists the limits"
"$amn" remember --help | grep -q -- "--max-total SIZE" && pass || fail "remember --help lists the limits"

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
