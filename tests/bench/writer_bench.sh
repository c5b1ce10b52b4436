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
# pth), ROUNDS (default 7) interleaved rounds of two like-for-like pairs:
#   amn convert IN --to T -o OUT            (default: fsyncs the output)
#   cp OUT COPY && sync COPY                (coreutils sync FILE fsyncs it)
#   amn convert IN --to T -o OUT --no-sync
#   cp OUT COPY                             (Debian's cp: copy_file_range)
# (whole processes: start, plugins, write), each starting from `sync` with
# the previous outputs unlinked (untimed). Prints per pair best and median
# wall times, their ratio as a rate (cp time / amn time: 1.0 = cp's rate),
# CPU times (user + sys: what a loaded machine divides among processes),
# and amn's peak resident set (GNU time; the input is mapped, and only the
# chunks read through the mapping, if any, count: the rest is amn's own
# memory, which must stay O(one chunk)). amn also fsyncs the directory
# after linking the output in; cp + sync does not: a few ms at most.
# BASE=OTHER_BUILD_DIR also times that build's amn in every round, both
# ways, and prints its times against this build's (before/after in one run).
# Also printed: minor page faults (best / median; each costs 10-13 us on the
# project's VM, so they show where CPU goes beyond the copy). AMN_INPUT=pread
# (or map, splice, copy) pins the way amn reads its input instead of its
# probe choosing one per input; the header line says which was used.
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

# time_to FILE CMD...: append "wall user sys maxrss minor-faults" of CMD to FILE.
time_to() {
    f=$1
    shift
    /usr/bin/time -f "%e %U %S %M %R" -a -o "$f" "$@" >/dev/null
}

report() { # report LABEL SIZE AMN_TIMES CP_TIMES
    awk -v t="$1" -v sz="$2" '
        function sort(a, n,   i, j, x) { for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x } }
        FNR == NR { aw[++na] = $1 * 1000; ac[na] = ($2 + $3) * 1000; if ($4 > rss) rss = $4; af[na] = $5; next }
        { cw[++nc] = $1 * 1000; cc[nc] = ($2 + $3) * 1000; cf[nc] = $5 }
        END {
            sort(aw, na); sort(ac, na); sort(cw, nc); sort(cc, nc); sort(af, na); sort(cf, nc)
            m = int((na + 1) / 2)
            printf "%s: %.0f MiB out. wall: amn %.0f ms best, %.0f median; cp %.0f / %.0f; rate vs cp %.2fx best, %.2fx median. cpu (user+sys): amn %.0f / %.0f ms, cp %.0f / %.0f. minor faults: amn %d / %d, cp %d / %d. amn peak RSS %.1f MiB\n",
                t, sz / 1048576, aw[1], aw[m], cw[1], cw[m], cw[1] / aw[1], cw[m] / aw[m],
                ac[1], ac[m], cc[1], cc[m], af[1], af[m], cf[1], cf[m], rss / 1024
        }' "$3" "$4"
}

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $R rounds; $D; AMN_INPUT=${AMN_INPUT:-auto}"
for T in ${TARGETS:-safetensors npz pth}; do
    OUT="$D/out.$T" COPY="$D/copy.$T"
    rm -f "$D"/*.t
    i=0
    while [ "$i" -lt "$R" ]; do
        rm -f "$OUT" "$COPY"
        sync
        time_to "$D/amn-sync.t" "$AMN" convert "$IN" --to "$T" --out-dtype keep -o "$OUT"
        sync
        time_to "$D/cp-sync.t" sh -c 'cp "$1" "$2" && sync "$2"' sh "$OUT" "$COPY"
        rm -f "$OUT" "$COPY"
        sync
        time_to "$D/amn.t" "$AMN" convert "$IN" --to "$T" --out-dtype keep -o "$OUT" --no-sync
        sync
        time_to "$D/cp.t" cp "$OUT" "$COPY"
        if [ -n "${BASE:-}" ]; then
            rm -f "$OUT" "$COPY"
            sync
            time_to "$D/base-sync.t" "$BASE/bin/amn" convert "$IN" --to "$T" --out-dtype keep -o "$OUT"
            rm -f "$OUT"
            sync
            time_to "$D/base.t" "$BASE/bin/amn" convert "$IN" --to "$T" --out-dtype keep -o "$OUT" --no-sync
        fi
        i=$((i + 1))
    done
    size=$(stat -c %s "$OUT")
    report "$T, fsync (amn default / cp + sync FILE)" "$size" "$D/amn-sync.t" "$D/cp-sync.t"
    report "$T, no fsync (amn --no-sync / cp)" "$size" "$D/amn.t" "$D/cp.t"
    if [ -n "${BASE:-}" ]; then # "cp" below is this build, "amn" the base build
        report "$T, fsync: BASE build / this build (as amn / cp)" "$size" "$D/base-sync.t" "$D/amn-sync.t"
        report "$T, no fsync: BASE build / this build (as amn / cp)" "$size" "$D/base.t" "$D/amn.t"
    fi
    rm -f "$OUT" "$COPY" "$D"/*.t
done
