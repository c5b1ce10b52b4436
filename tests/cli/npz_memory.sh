#!/usr/bin/env bash
# numpy.savez_compressed deflates every array: a large member is inflated
# into a scratch file (amn_spill), not onto the heap, so converting a
# 128 MiB compressed npz takes far less memory than the model. The bytes are
# those of the same arrays saved uncompressed (numpy.savez, read in place),
# also where no scratch file can be made (the heap then); a member whose
# data does not match its CRC-32 is refused with no output; no scratch file
# outlives the command.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init npzmem "$1" "$2"
need_plugin npz
need_plugin safetensors
need_python numpy
cd "$work" || exit 1
export TMPDIR=$work/tmp
mkdir -p tmp

# 128 MiB of f32 in one array (small integers: deflates about 4:1), four
# of 4 MiB (inflated on several threads at once), one of 256 KiB (held on
# the heap), an empty one; saved compressed and stored.
mib=128
$py - $mib <<'PY' || fail "making the npz files"
import sys
import numpy as np
rng = np.random.default_rng(7)
big = rng.integers(-8, 8, size=(int(sys.argv[1]) << 18,)).astype(np.float32) * 0.25
small = rng.standard_normal((256, 256)).astype(np.float32)
mids = {"mid%d" % i: rng.integers(0, 4, size=(1024, 1024 + i)).astype(np.float32) for i in range(4)}
arrays = dict(big=big.reshape(-1, 4096), **mids, small=small, empty=np.zeros((0, 3), np.float16))
np.savez_compressed("c.npz", **arrays)
np.savez("s.npz", **arrays)
PY
size_kib=$((mib * 1024))

expect "stored npz" 0 convert s.npz --to safetensors -o s.safetensors
/usr/bin/time -f %M -o rss.c "$amn" convert c.npz --to safetensors -o c.safetensors >out 2>&1 &&
  pass || { fail "convert c.npz: exit $?"; indent out; }
cmp -s s.safetensors c.safetensors && pass || fail "compressed npz: not the stored npz's bytes"
got=$(tail -1 rss.c)
echo "peak RSS: $got KiB (the model: $size_kib KiB)"
# Far below the model (the heap path took it all and more; what remains is
# the converter's buffers and mapped page-cache pages, machine-dependent).
if sanitized; then
  echo "(sanitizer build: peak RSS not checked)"
else
  [ "$got" -lt $((size_kib / 2)) ] && pass || fail "convert c.npz: peak RSS $got KiB"
fi
expect "remember to bf16, compressed" 0 remember c.npz --to bf16 -o c-bf16.safetensors
expect "remember to bf16, stored" 0 remember s.npz --to bf16 -o s-bf16.safetensors
cmp -s s-bf16.safetensors c-bf16.safetensors && pass || fail "bf16: not the stored npz's bytes"
[ -z "$(ls -A tmp)" ] && pass || fail "scratch files left in \$TMPDIR"

# No scratch file possible: the members go to the heap, same bytes.
TMPDIR=$work/none expect "no TMPDIR" 0 convert c.npz --to safetensors -o h.safetensors
cmp -s s.safetensors h.safetensors && pass || fail "heap fallback: not the stored npz's bytes"

# A member's CRC-32 changed in its local and central headers alike (a
# consistent archive whose data is not what was packed): refused, naming
# it, no output.
$py - <<'PY' || fail "patching the CRC"
import struct, zipfile
data = bytearray(open("c.npz", "rb").read())
info = zipfile.ZipFile("c.npz").getinfo("mid2.npy")
bad = struct.pack("<I", info.CRC ^ 1)
data[info.header_offset + 14:info.header_offset + 18] = bad

pos = 0
while (pos := data.find(b"PK\x01\x02", pos)) >= 0:
    n = struct.unpack_from("<H", data, pos + 28)[0]
    if data[pos + 46:pos + 46 + n] == b"mid2.npy":
        data[pos + 16:pos + 20] = bad
    pos += 4
open("crc.npz", "wb").write(data)
PY
expect "CRC mismatch" 1 convert crc.npz --to safetensors -o crc.safetensors
says "CRC mismatch" "entry 'mid2.npy': CRC-32 mismatch"
[ ! -e crc.safetensors ] && pass || fail "output left after a CRC mismatch"
[ -z "$(ls -A tmp)" ] && pass || fail "scratch files left in \$TMPDIR"

finish npz_memory
