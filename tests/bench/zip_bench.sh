#!/bin/sh
# Benchmark the npz and pth plugins against Debian's python3-torch / numpy
# on the same ~300 MB inputs (generated under /tmp, never committed).
#
#   cmake --build BUILD --target zip_bench amn-cli amn-plugin-npz amn-plugin-pth \
#       amn-plugin-safetensors
#   tests/bench/zip_bench.sh BUILD
#
# Prints, per format: Python load + safetensors write (best of 5, in-process,
# no fsync anywhere: page-cache rates), amn's in-process remember and the copy rate of the same bytes
# (from zip_bench), and whole programs' wall time: the amn CLI against a
# python3 script doing the same.
set -eu
B=${1:?usage: zip_bench.sh BUILD_DIR}
D=${AMN_BENCH_DIR:-/tmp/amn-zip-bench}
PY=/usr/bin/python3
mkdir -p "$D"

$PY - "$D" <<'EOF'
import os, sys
import numpy as np, torch
d = sys.argv[1]
if not os.path.exists(os.path.join(d, 'model.pth')):
    g = torch.Generator().manual_seed(0)
    # 24 x 3072 x 1024 f32 = 302 MB, like a small transformer's state_dict.
    sd = {'layers.%d.%s' % (i // 2, 'w1' if i % 2 == 0 else 'w2'):
          torch.randn(3072, 1024, generator=g) for i in range(24)}
    torch.save(sd, os.path.join(d, 'model.pth'))
    np.savez(os.path.join(d, 'model.npz'), **{k: v.numpy() for k, v in sd.items()})
EOF

$PY - "$D" <<'EOF'
import json, os, struct, sys, time
import numpy as np, torch
d = sys.argv[1]
NAMES = {np.dtype('float32'): 'F32'}

def save_safetensors(arrays, path, copy=False):
    # safetensors' save_file; copy=True also makes its per-tensor bytes copy
    # (_tobytes), copy=False is a leaner writer than the library.
    header, off = {}, 0
    for k, a in arrays.items():
        header[k] = {'dtype': NAMES[a.dtype], 'shape': list(a.shape),
                     'data_offsets': [off, off + a.nbytes]}
        off += a.nbytes
    h = json.dumps(header, separators=(',', ':')).encode()
    h += b' ' * (-len(h) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for a in arrays.values():
            a = np.ascontiguousarray(a)
            f.write(a.tobytes() if copy else memoryview(a).cast('B'))

def bench(label, load, copy):
    best = 1e9
    for _ in range(5):
        os.sync()  # start each run with no dirty pages queued
        t0 = time.perf_counter()
        save_safetensors(load(), os.path.join(d, 'py.safetensors'), copy)
        best = min(best, time.perf_counter() - t0)
    os.unlink(os.path.join(d, 'py.safetensors'))
    print('python %-34s %8.1f ms' % (label, best * 1e3))

def load_pth():
    return {k: v.numpy() for k, v in torch.load(os.path.join(d, 'model.pth')).items()}

def load_npz():
    with np.load(os.path.join(d, 'model.npz')) as z:
        return {k: z[k] for k in z.files}

bench('torch.load + lean write', load_pth, False)
bench('torch.load + save_file-like write', load_pth, True)
bench('numpy.load + lean write', load_npz, False)
bench('numpy.load + save_file-like write', load_npz, True)
EOF

"$B/bin/zip_bench" "$D/model.pth" "$D/model.npz"

# Whole programs, as a user runs them: a python3 script (interpreter start,
# imports, load, write) against the amn CLI (process start, plugins,
# convert). Each run starts with no dirty pages queued and a fresh output.
cat >"$D/convert.py" <<'EOF'
import json, struct, sys
import numpy as np
src, dst = sys.argv[1], sys.argv[2]
if src.endswith('.pth'):
    import torch
    arrays = {k: v.numpy() for k, v in torch.load(src).items()}
else:
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
header, off = {}, 0
for k, a in arrays.items():
    header[k] = {'dtype': 'F32', 'shape': list(a.shape), 'data_offsets': [off, off + a.nbytes]}
    off += a.nbytes
h = json.dumps(header, separators=(',', ':')).encode()
h += b' ' * (-len(h) % 8)
with open(dst, 'wb') as f:
    f.write(struct.pack('<Q', len(h)))
    f.write(h)
    for a in arrays.values():
        f.write(memoryview(np.ascontiguousarray(a)).cast('B'))
EOF

wall_ms() { # best of 3 wall times of a command, in ms
    best=999999
    for _ in 1 2 3; do
        rm -f "$D/cli.safetensors"
        sync
        t0=$(date +%s%N)
        "$@" >/dev/null
        t1=$(date +%s%N)
        ms=$(( (t1 - t0) / 1000000 ))
        [ "$ms" -lt "$best" ] && best=$ms
    done
    rm -f "$D/cli.safetensors"
    echo "$best"
}

for f in model.pth model.npz; do
    a=$(wall_ms "$B/bin/amn" remember "$D/$f" -o "$D/cli.safetensors")
    p=$(wall_ms "$PY" "$D/convert.py" "$D/$f" "$D/cli.safetensors")
    echo "whole program, $f: amn CLI $a ms, python3 script $p ms ($(awk "BEGIN{printf \"%.1f\", $p / $a}")x)"
done
