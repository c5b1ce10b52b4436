#!/usr/bin/env bash
# An input truncated while amn converts it: an i/o error (exit 6) naming the
# file, no output and no temporary file left, never a signal death; for
# every way the bytes are read (AMN_INPUT=map|pread|splice|copy, and the
# automatic choice), for pass-through copies, casts (the converter's own
# reads) and dequantization (a scheme's reads), to outputs with and without
# a CRC-32 tap (npz / safetensors). The hook AMN_TEST_TRUNCATE_AFTER
# truncates the input at the first progress report once the output holds
# that many bytes, between two chunks: the same point on every run.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init truncate "$1" "$2"
need_plugin safetensors

# Four 4 MiB F32 tensors (16 MiB): a pass-through chunk is 2 MiB, so the
# output holds 5 MiB at a report with most of the input still unread.
$py - "$work/in.safetensors" <<'PY'
import json, struct, sys
import numpy as np
rng = np.random.default_rng(6)
hdr, blobs, off = {}, [], 0
for i in range(4):
    b = rng.standard_normal((1024, 1024)).astype('<f4').tobytes()
    hdr['t%d' % i] = {'dtype': 'F32', 'shape': [1024, 1024], 'data_offsets': [off, off + len(b)]}
    blobs.append(b)
    off += len(b)
h = json.dumps(hdr).encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + b''.join(blobs))
PY

bus_words='truncated or unreadable while mapped \(SIGBUS\); no output was written'
# truncated WHAT INPUT AFTER WORDS ARGS...: exit 6, WORDS and the input's
# name in the message, the output directory left empty.
truncated() {
  local what=$1 in=$2 after=$3 words=$4
  shift 4
  rm -rf "$work/out" && mkdir "$work/out"
  cp "$in" "$work/w.in"
  AMN_TEST_TRUNCATE_AFTER=$after AMN_TEST_TRUNCATE_TO=4096 \
    "$amn" convert "$work/w.in" --from safetensors "$@" -o "$work/out/o" --quiet >"$work/log" 2>&1
  local rc=$?
  [ "$(stat -c %s "$work/w.in")" = 4096 ] || { fail "$what: the hook did not truncate"; return; }
  # Another worker may be reading the mapping when the hook truncates: that
  # read ends in SIGBUS, reported as the same i/o error in other words.
  if [ $rc -eq 6 ] && grep -qE "i/o error: $work/w.in: ($words|$bus_words)" "$work/log" &&
    [ -z "$(ls -A "$work/out")" ]; then pass; else
    fail "$what: exit $rc, output dir: $(ls -A "$work/out" | xargs)"
    indent "$work/log"
  fi
}

for mode in map pread splice copy auto; do
  for target in "safetensors --out-dtype keep" "safetensors --out-dtype bf16" "npz" "npz --out-dtype bf16"; do
    # shellcheck disable=SC2086
    AMN_INPUT=$mode truncated "$mode, to $target" "$work/in.safetensors" $((5 << 20)) \
      "file shrank while being read" --to $target
  done
done
# A dequantization reads weights and scales through the scheme (FP8).
if have "scheme fp8"; then
  for mode in map pread auto; do
    AMN_INPUT=$mode truncated "$mode, fp8 dequantized" "$src/fixtures/example/tiny-fp8.safetensors" 1 \
      "file shrank while being read" --to safetensors --threads 1
  done
fi
# A read racing with the truncation gets SIGBUS through the mapping: the
# CLI reports it the same way, naming the input.
AMN_TEST_TRUNCATE_SIGBUS=1 truncated "SIGBUS" "$work/in.safetensors" $((5 << 20)) \
  "$bus_words" --to npz
# Unchanged, the same conversions succeed (the hook fires only when asked).
for mode in map pread splice copy; do
  AMN_INPUT=$mode "$amn" convert "$work/in.safetensors" --to npz -o "$work/ok-$mode.npz" --quiet &&
    pass || fail "$mode: untouched input"
done
cmp -s "$work/ok-map.npz" "$work/ok-copy.npz" && cmp -s "$work/ok-pread.npz" "$work/ok-splice.npz" &&
  cmp -s "$work/ok-map.npz" "$work/ok-pread.npz" && pass || fail "outputs differ between read paths"

finish truncate
