#!/bin/bash
# Six workloads in four states of the input, each against `cp` of its output
# in the same run (issue 17: speed that does not depend on how the input
# sits in memory).
#
#   cmake --build BUILD && tests/bench/input_states_bench.sh BUILD [DIR] [SHMDIR]
#
# Workloads (inputs from input_states_gen.py, made once into DIR/master):
#   st    safetensors 4 x F32 4096^2 -> BF16 safetensors   (256 MiB in, 128 out)
#   pth   torch.save 4 x F32 4096^2 -> safetensors         (256 MiB pass-through)
#   npz   numpy.savez 4 x F32 4096^2 -> safetensors        (256 MiB pass-through)
#   gguf  GGUF 2 x Q4_K 4096^2 -> BF16 safetensors         (18 MiB in, 64 out)
#   fp8   FP8 E4M3 128x128 blocks, 4 x 4096^2 -> BF16      (64 MiB in, 128 out)
#   awq   AWQ 4-bit GEMM g128, 4 x 4096^2 -> BF16          (33 MiB in, 128 out)
# States of the input (the output is written beside it):
#   cold   on DIR's file system, written in 4 MiB blocks, synced, then
#          evicted before every amn run (COLD=file, default: fadvise
#          DONTNEED of that one file, `dd iflag=nocache`, so other processes'
#          cache and amn's own binary stay warm; COLD=drop: `echo 3 >
#          /proc/sys/vm/drop_caches`, everything cold, needs root). The
#          output is evicted the same way before its `cp`.
#   large  warm, written with 4 MiB writes (the page cache holds large folios)
#   small  warm, written with 4 KiB writes (4 KiB folios: a file copied by a
#          tool that writes small blocks)
#   tmpfs  in SHMDIR (default /dev/shm/amn-isb): every page 4 KiB
# Each cell: ROUNDS (default 5) interleaved rounds of
#   amn ... -o OUT --no-sync --quiet    (whole process, default threads)
#   cp OUT COPY                         (Debian's cp: copy_file_range)
# each after `sync` with the previous outputs unlinked (untimed). Prints best
# and median wall seconds and the rate ratio cp time / amn time (1.0 = the
# rate of cp), best and median. BASE=OTHER_BUILD_DIR also times that build's
# amn in every round (before/after in one run): its best and median and the
# ratio base time / this build's time (> 1: this build is faster). Extra
# arguments to amn: AMN_ARGS. Only some
# workloads or states: WORKLOADS="st pth", STATES="tmpfs small".
# On a machine shared with other jobs only the same-run ratios mean anything.
# The last column, KiB/fault: how the page cache holds each warm input, as
# BUILD/bin/folio_probe measures it just before the cell's rounds (64 or
# less: 4 KiB folios; up to 2048: 2 MiB folios), so that "large folios" is
# checked, not assumed: a file system or kernel without large folios for
# the file gives 64 there too, and memory reclaim splits them over time.
set -eu
B=${1:?usage: input_states_bench.sh BUILD_DIR [DIR] [SHMDIR]}
D=${2:-/tmp/amn-isb}
S=${3:-/dev/shm/amn-isb}
R=${ROUNDS:-5}
COLD=${COLD:-file}
AMN="$(cd "$B" && pwd)/bin/amn"
HERE=$(cd "$(dirname "$0")" && pwd)
M="$D/master"
mkdir -p "$D" "$S"
/usr/bin/python3 "$HERE/input_states_gen.py" "$M"

declare -A FILE=([st]=st.safetensors [pth]=pth.pth [npz]=npz.npz [gguf]=q4k.gguf
    [fp8]=fp8.safetensors [awq]=awq.safetensors)
declare -A CMD=([st]="convert --to safetensors" [pth]="convert --to safetensors"
    [npz]="convert --to safetensors" [gguf]="convert --to safetensors"
    [fp8]="remember" [awq]="remember")

evict() { # the page cache of one file, or all of it
    sync
    if [ "$COLD" = drop ]; then
        echo 3 >/proc/sys/vm/drop_caches
    else
        dd if="$1" iflag=nocache count=0 status=none
    fi
}

place() { # state master dest: make dest in the state
    rm -f "$3"
    case $1 in
    small) dd if="$2" of="$3" bs=4k status=none ;;
    *) dd if="$2" of="$3" bs=4M status=none ;;
    esac
    sync
}

us() { # microseconds since the epoch
    local t=${EPOCHREALTIME/./}
    echo "$t"
}

summarize() { # one cell: "w state a... / c... / b..." -> one line of the table; $1: KiB/fault
    awk -v kib="$1" '
    function sort(x, n,   i, j, v) { for (i = 2; i <= n; i++) { v = x[i]; for (j = i - 1; j > 0 && x[j] > v; j--) x[j + 1] = x[j]; x[j + 1] = v } }
    NF {
        na = nc = nb = 0; side = 0
        for (k = 3; k <= NF; k++) {
            if ($k == "/") { side++; continue }
            if (side == 0) a[++na] = $k; else if (side == 1) c[++nc] = $k; else b[++nb] = $k
        }
        sort(a, na); sort(c, nc); sort(b, nb); m = int((na + 1) / 2)
        printf "%-5s %-6s %9.3f %9.3f %9.3f %9.3f %7.2f %7.2f", $1, $2, a[1] / 1e6, a[m] / 1e6,
            c[1] / 1e6, c[m] / 1e6, c[1] / a[1], c[m] / a[m]
        if (nb) printf " %9.3f %9.3f %7.2f %7.2f", b[1] / 1e6, b[m] / 1e6, b[1] / a[1], b[m] / a[m]
        printf " %9s\n", kib
        fflush()
    }'
}

printf '%-5s %-6s %9s %9s %9s %9s %7s %7s' work state amn_best amn_med cp_best cp_med "x_best" "x_med"
[ -n "${BASE:-}" ] && printf ' %9s %9s %7s %7s' base_best base_med "b_best" "b_med"
printf ' %9s\n' KiB/fault
PROBE="$(cd "$B" && pwd)/bin/folio_probe"
BAMN=
[ -n "${BASE:-}" ] && BAMN="$(cd "$BASE" && pwd)/bin/amn"
for w in ${WORKLOADS:-st pth npz gguf fp8 awq}; do
    for st in ${STATES:-cold large small tmpfs}; do
        dir="$D/run"
        [ "$st" = tmpfs ] && dir="$S/run"
        mkdir -p "$dir"
        in="$dir/${FILE[$w]}"
        out="$dir/out.safetensors"
        copy="$dir/copy.safetensors"
        place "$st" "$M/${FILE[$w]}" "$in"
        [ "$st" = cold ] || cat "$in" >/dev/null
        kib=-
        [ "$st" != cold ] && [ -x "$PROBE" ] && kib=$("$PROBE" "$in")
        a=() c=() b=()
        for ((i = 0; i < R; i++)); do
            rm -f "$out" "$copy"
            [ "$st" = cold ] && evict "$in"
            sync
            t0=$(us)
            # shellcheck disable=SC2086
            "$AMN" ${CMD[$w]} "$in" -o "$out" --no-sync --quiet ${AMN_ARGS:-} >/dev/null
            t1=$(us)
            a+=($((t1 - t0)))
            if [ -n "$BAMN" ]; then
                rm -f "$out"
                [ "$st" = cold ] && evict "$in"
                sync
                t0=$(us)
                # shellcheck disable=SC2086
                "$BAMN" ${CMD[$w]} "$in" -o "$out" --no-sync --quiet >/dev/null
                t1=$(us)
                b+=($((t1 - t0)))
            fi
            [ "$st" = cold ] && evict "$out"
            sync
            t0=$(us)
            cp "$out" "$copy"
            t1=$(us)
            c+=($((t1 - t0)))
        done
        echo "$w $st ${a[*]} / ${c[*]} / ${b[*]}" | summarize "$kib"
        rm -f "$in" "$out" "$copy"
    done
done
