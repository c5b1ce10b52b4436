#!/bin/sh
# Benchmark the npz and pth writers against cp of the same output, in the
# same run (item: "writing npz and pth at >= 0.9x the rate of cp").
#
#   cmake --build BUILD && tests/bench/writer_bench.sh BUILD [DIR]
#
# Input: a 256 MiB safetensors file of 16 F32 tensors 2048x2048 (random
# bytes, written in 4 MiB blocks so the page cache holds it in large folios,
# as a download leaves it) in DIR (default /tmp/amn-writer-bench; run it
# again with DIR=/dev/shm/... for the input and outputs on tmpfs).
# Per target (safetensors, the writer without a CRC, as a baseline; npz;
# pth), ROUNDS (default 7) interleaved rounds of
#   amn convert IN --to T -o OUT  (a whole process: start, plugins, write)
#   cp OUT COPY                   (Debian's cp: copy_file_range in the kernel)
# each starting from `sync` with the previous outputs unlinked (untimed).
# Prints best and median wall times, their ratio as a rate (cp time / amn
# time: 1.0 = cp's rate), and amn's peak resident set (GNU time), which must
# stay O(one chunk), not O(tensor) or O(file).
set -eu
B=${1:?usage: writer_bench.sh BUILD_DIR [DIR]}
D=${2:-/tmp/amn-writer-bench}
R=${ROUNDS:-7}
AMN="$B/bin/amn"
mkdir -p "$D"
IN="$D/in.safetensors"
if [ ! -f "$IN" ]; then
    /usr/bin/python3 - "$IN" <<'PY'
import json, os, struct, sys
n, shape = 16, [2048, 2048]
size = 4 * shape[0] * shape[1]
hdr = {'t.%02d' % i: {'dtype': 'F32', 'shape': shape, 'data_offsets': [i * size, (i + 1) * size]}
       for i in range(n)}
h = json.dumps(hdr, separators=(',', ':')).encode()
h += b' ' * (-len(h) % 8)
with open(sys.argv[1], 'wb') as f:
    f.write(struct.pack('<Q', len(h)) + h)
    for _ in range(n * size // (4 << 20)):
        f.write(os.urandom(4 << 20))
PY
fi
cat "$IN" >/dev/null

ms() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }
stats() { # best and median of the numbers on stdin
    sort -n | awk '{ v[NR] = $1 } END { printf "%s %s", v[1], v[int((NR + 1) / 2)] }'
}

for T in ${TARGETS:-safetensors npz pth}; do
    OUT="$D/out.$T" COPY="$D/copy.$T"
    : >"$D/amn.ms"
    : >"$D/cp.ms"
    : >"$D/rss.kb"
    i=0
    while [ "$i" -lt "$R" ]; do
        rm -f "$OUT" "$COPY"
        sync
        t0=$(date +%s%N)
        /usr/bin/time -f %M -o "$D/rss.1" "$AMN" convert "$IN" --to "$T" --out-dtype keep -o "$OUT" >/dev/null
        t1=$(date +%s%N)
        cat "$D/rss.1" >>"$D/rss.kb"
        ms "$t0" "$t1" >>"$D/amn.ms"
        echo >>"$D/amn.ms"
        sync
        t0=$(date +%s%N)
        cp "$OUT" "$COPY"
        t1=$(date +%s%N)
        ms "$t0" "$t1" >>"$D/cp.ms"
        echo >>"$D/cp.ms"
        i=$((i + 1))
    done
    set -- $(stats <"$D/amn.ms") $(stats <"$D/cp.ms")
    rss=$(sort -n "$D/rss.kb" | tail -1)
    size=$(stat -c %s "$OUT")
    awk -v t="$T" -v ab="$1" -v am="$2" -v cb="$3" -v cm="$4" -v rss="$rss" -v sz="$size" 'BEGIN {
        printf "%s: %.0f MiB out; amn %.1f ms best, %.1f median; cp %.1f / %.1f; rate vs cp %.2fx best, %.2fx median; peak RSS %.1f MiB\n",
            t, sz / 1048576, ab, am, cb, cm, cb / ab, cm / am, rss / 1024 }'
    rm -f "$OUT" "$COPY" "$D/rss.1"
done
