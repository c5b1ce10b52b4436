#!/bin/sh
# Benchmark model archives against the unpacked folder (doc/archives.md).
#
#   cmake --build BUILD && tests/bench/archive_bench.sh BUILD [DIR]
#
# Input (made once in DIR, default /tmp/amn-archive-bench): a model folder of
# one safetensors file of MIB MiB (default 512) of F32 (random mantissas,
# small exponents: gzip/zstd/xz gain little, as on real weights) with a
# config.json, packed as .tar, .tar.gz (gzip -6), .tar.zst (zstd -3) and
# .zip (deflate -6). For the folder and each archive, ROUNDS (default 1)
# runs of each command, after `sync`, outputs removed (untimed):
#   amn convert IN --to safetensors --out-dtype keep -o OUT --no-sync
#                                                      (bytes passed through)
#   amn convert IN --to safetensors -o OUT --no-sync   (cast to BF16: a kernel)
# and, for the compressed ones, what the archive replaces: unpacking it
# (tar xf / unzip) and converting the folder. Then `amn parse IN` (headers
# only: no temporary file). ONLY=parse runs that part alone. Reports wall and CPU seconds
# and VmHWM (GNU time's %M: the peak resident set, mapped pages of the
# inputs included) of the best round. Temporary files go to TMPDIR
# (default DIR/tmp).
set -eu
B=${1:?usage: archive_bench.sh BUILD_DIR [DIR]}
D=${2:-/tmp/amn-archive-bench}
R=${ROUNDS:-1}
MIB=${MIB:-512}
AMN=$(cd "$B" && pwd)/bin/amn
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$D/tmp"
export TMPDIR=${TMPDIR:-$D/tmp}
cd "$D"
if [ ! -f model/model.safetensors ] || [ "$(cat made 2>/dev/null)" != "$MIB" ]; then
    rm -rf model ./*.tar* ./*.zip
    mkdir -p model
    /usr/bin/python3 "$src/tests/lib/big_safetensors.py" model/model.safetensors "$MIB" \
        --seed 3 --near-one
    echo '{"model_type": "bench"}' > model/config.json
    tar cf model.tar model
    tar -I 'gzip -6' -cf model.tar.gz model
    tar -I 'zstd -3 -q' -cf model.tar.zst model
    /usr/bin/python3 -c '
import zipfile
with zipfile.ZipFile("model.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
    for n in ("model/model.safetensors", "model/config.json"):
        z.write(n)'
    echo "$MIB" >made
fi
echo "input: $(du -m model/model.safetensors | cut -f1) MiB model file; archives (MiB):" \
    "$(for a in model.tar model.tar.gz model.tar.zst model.zip; do
        printf '%s %s  ' "$a" "$(du -m $a | cut -f1)"; done)"

best() { # best LABEL CMD...: the fastest of R rounds
    label=$1
    shift
    bw= bline=
    i=0
    while [ $i -lt "$R" ]; do
        rm -rf out.safetensors out-unpacked
        sync
        /usr/bin/time -f '%e %U %S %M' -o t.txt sh -c "$*" >/dev/null 2>t.err ||
            { echo "$label: failed"; cat t.err; exit 1; }
        read -r w u s m <t.txt
        if [ -z "$bw" ] || [ "$(echo "$w < $bw" | bc)" = 1 ]; then
            bw=$w
            bline=$(printf '%-38s wall %6.2f s  cpu %6.2f s  VmHWM %7d KiB' "$label" "$w" \
                "$(echo "$u + $s" | bc)" "$m")
        fi
        i=$((i + 1))
    done
    echo "$bline"
}

verb=convert
[ "${ONLY:-}" = parse ] || for args in "--to safetensors --out-dtype keep" "--to safetensors"; do
    echo "amn convert IN $args:"
    best "  folder" "$AMN $verb model $args -o out.safetensors --no-sync --quiet"
    for a in model.tar model.tar.gz model.tar.zst model.zip; do
        best "  $a" "$AMN $verb $a $args -o out.safetensors --no-sync --quiet"
    done
    for a in model.tar.gz model.tar.zst model.zip; do
        case $a in
        *.zip) unpack="mkdir out-unpacked && cd out-unpacked && unzip -q ../$a && cd .." ;;
        *) unpack="mkdir out-unpacked && tar xf $a -C out-unpacked" ;;
        esac
        command -v unzip >/dev/null || case $a in *.zip) continue ;; esac
        best "  unpack $a, then the folder" \
            "$unpack && $AMN $verb out-unpacked/model $args -o out.safetensors --no-sync --quiet"
    done
done
echo "amn parse IN:"
for a in model model.tar model.tar.gz model.tar.zst model.zip; do
    best "  $a" "$AMN parse $a"
done
rm -rf out.safetensors out-unpacked t.txt t.err
