#!/usr/bin/env bash
# Split GGUF files (NAME-0000K-of-0000N.gguf) against llama.cpp's own tools
# (fixtures/gguf_split/expected.sha256, made by its gen.sh from
# fixtures/gguf_imatrix/model.gguf): `convert --to gguf --split-max-tensors
# / --split-max-size` is llama-gguf-split --split, a convert of a shard to one
# file is --merge, `forget --keep-split` is llama-quantize --keep-split (and
# without it llama-quantize of the split input), at 1 and 3 threads. Any
# shard opens the whole model for inspect, parse, remember. Then hostile
# splits: a missing shard, a shard of another split, split.count or
# split.tensors.count that disagree, a tensor in two shards, a misnamed shard;
# each refused before any output exists.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-split "$1" "$2"
fix=$src/fixtures/gguf_split
model=$src/fixtures/gguf_imatrix/model.gguf
want() { awk -v c="$1" -v n="$2" '$2 == c && $3 == n {print $1}' "$fix/expected.sha256"; }
# same CASE DIR NAME...: each DIR/NAME has llama.cpp's bytes for CASE NAME
same() {
    local c=$1 d=$2; shift 2
    for n in "$@"; do
        local w got
        w=$(want "$c" "$n")
        [ -n "$w" ] || { fail "no expected sha256 for $c $n"; continue; }
        [ -f "$d/$n" ] || { fail "$c: no $n written"; ls "$d"; continue; }
        got=$(sha256sum <"$d/$n" | cut -d' ' -f1)
        [ "$got" = "$w" ] || fail "$c $n: bytes differ from llama.cpp's"
    done
}
run() { "$amn" "$@" --no-sync >"$work/log" 2>&1 || { fail "amn $*"; cat "$work/log"; }; }
three=(sh-00001-of-00003.gguf sh-00002-of-00003.gguf sh-00003-of-00003.gguf)
q3=(q-00001-of-00003.gguf q-00002-of-00003.gguf q-00003-of-00003.gguf)

for t in 1 3; do
    d=$work/t$t && mkdir -p "$d"
    # llama-gguf-split --split: shard 1 holds the metadata, all hold split.*
    run convert "$model" --to gguf --out-dtype keep --split-max-tensors 10 -o "$d/sh.gguf" --threads "$t"
    same tensors10 "$d" "${three[@]}"
    run convert "$model" --to gguf --out-dtype keep --split-max-size 1M -o "$d/sz" --threads "$t"
    same size1M "$d" sz-00001-of-00001.gguf
    # llama-gguf-split --merge, from any shard
    run convert "$d/sh-00002-of-00003.gguf" --to gguf --out-dtype keep -o "$d/merged.gguf" --threads "$t"
    same merge "$d" merged.gguf
    # llama-quantize --keep-split, and without it
    for ty in Q4_K_M Q8_0; do
        mkdir -p "$d/$ty"
        run forget "$d/sh-00001-of-00003.gguf" --to "$ty" --keep-split -o "$d/$ty/q.gguf" --threads "$t"
        same "keep_$ty" "$d/$ty" "${q3[@]}"
    done
    mkdir -p "$d/im"
    (cd "$src/fixtures/gguf_imatrix" && run forget "$d/sh-00003-of-00003.gguf" --to Q4_K_M \
        --keep-split --imatrix imatrix.gguf -o "$d/im/q" --threads "$t")
    same keep_imatrix_Q4_K_M "$d/im" "${q3[@]}"
    run forget "$d/sh-00001-of-00003.gguf" --to Q4_K_M -o "$d/one.gguf" --threads "$t"
    same nosplit_Q4_K_M "$d" one.gguf
    run forget "$model" --to Q8_0 --keep-split -o "$d/k1" --threads "$t"
    same keep1_Q8_0 "$d" k1-00001-of-00001.gguf
    # a quantized split: merged and split again with its blocks copied (a
    # split input or --split-max-* implies --out-dtype keep, a copy)
    run convert "$d/Q4_K_M/q-00003-of-00003.gguf" --to gguf -o "$d/qmerged.gguf" --threads "$t"
    same qmerge "$d" qmerged.gguf
    run convert "$d/qmerged.gguf" --to gguf --split-max-tensors 5 -o "$d/qs" --threads "$t"
    same qtensors5 "$d" qs-0000{1,2,3,4,5}-of-00005.gguf
done
s=$work/t1

# A larger model split by size into 4 (the shared reference model; skipped
# without it), and llama-quantize --keep-split of that split.
l4=${AMN_REFERENCE_DIR:-$src/../shared/fixtures}/gguf_quant_reference/model_l4_f16.gguf
if [ -f "$l4" ]; then
    four=(l4-00001-of-00004.gguf l4-00002-of-00004.gguf l4-00003-of-00004.gguf l4-00004-of-00004.gguf)
    run convert "$l4" --to gguf --out-dtype keep --split-max-size 2M -o "$work/l4" --threads 3
    same l4_size2M "$work" "${four[@]}"
    run forget "$work/l4-00004-of-00004.gguf" --to Q4_K_M --keep-split -o "$work/lq" --threads 3
    same l4_keep_Q4_K_M "$work" "${four[@]/l4/lq}"
else
    echo "note: no $l4; the split by size into several shards is not checked"
fi

# Any shard is the whole model, for every command.
for k in 1 2 3; do
    f=$s/sh-0000$k-of-00003.gguf
    n=$("$amn" inspect "$f" --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["tensor_count"])' 2>/dev/null)
    [ "$n" = 22 ] || fail "inspect shard $k: $n tensors, wanted 22"
    n=$("$amn" parse "$f" --json | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)["tensors"]))' 2>/dev/null)
    [ "$n" = 22 ] || fail "parse shard $k: $n tensors, wanted 22"
done
# remember writes safetensors (whose header names the input): compared
# through npz, which keeps only the tensors; a build without the
# safetensors plugin converts to npz directly.
if have "format safetensors"; then
    run remember "$s/sh-00003-of-00003.gguf" --to f32 -o "$work/split.safetensors"
    run remember "$model" --to f32 -o "$work/whole.safetensors"
    run convert "$work/split.safetensors" --to npz -o "$work/split.npz"
    run convert "$work/whole.safetensors" --to npz -o "$work/whole.npz"
else
    run convert "$s/sh-00003-of-00003.gguf" --to npz --out-dtype f32 -o "$work/split.npz"
    run convert "$model" --to npz --out-dtype f32 -o "$work/whole.npz"
fi
cmp -s "$work/split.npz" "$work/whole.npz" || fail "remember of the split model differs from the model's"

# Hostile splits: refused (exit 1, a message naming the problem), no output.
refused() { # refused WORD DIR: amn on DIR's shard 1 and 3 fails saying WORD, writes nothing
    local word=$1 d=$2
    for k in 1 3; do
        for cmd in "inspect" "convert --to gguf --out-dtype keep -o $work/bad.gguf" \
            "forget --to Q8_0 --keep-split -o $work/bad.gguf"; do
            # shellcheck disable=SC2086
            "$amn" $cmd "$d/sh-0000$k-of-00003.gguf" >"$work/log" 2>&1
            local rc=$?
            [ $rc -eq 1 ] || { fail "$word ($cmd, shard $k): exit $rc, wanted 1"; cat "$work/log"; }
            grep -qi -- "$word" "$work/log" || { fail "$word ($cmd, shard $k): not said:"; cat "$work/log"; }
            nothing_left "$word ($cmd)"
        done
    done
}
other=$work/other && mkdir -p "$other"
run convert "$model" --to gguf --out-dtype keep --split-max-tensors 8 -o "$other/sh"
mk() { rm -rf "$work/h" && mkdir -p "$work/h" && cp "$s"/sh-0000?-of-00003.gguf "$work/h/"; }
mk; rm "$work/h/sh-00002-of-00003.gguf"
refused "shard 2 of the split GGUF is missing" "$work/h"
mk; cp "$other/sh-00002-of-00003.gguf" "$work/h/"          # tensors of shards 1 and 2 overlap
refused "is also in shard" "$work/h"
mk; cp "$other/sh-00001-of-00003.gguf" "$work/h/"          # 8 + 10 + 2 tensors
refused "hold 20 tensors" "$work/h"
mk; mv "$work/h/sh-00002-of-00003.gguf" "$work/h/x" && mv "$work/h/sh-00003-of-00003.gguf" \
    "$work/h/sh-00002-of-00003.gguf" && mv "$work/h/x" "$work/h/sh-00003-of-00003.gguf"
refused "named" "$work/h"
# patch one u16 / i32 value of shard 2 after its key (GGUF v3: key, u32 type, value)
patch() { # patch FILE KEY BYTES
    local off
    off=$(grep -obUa "$2" "$1" | head -1 | cut -d: -f1)
    printf "$3" | dd of="$1" bs=1 seek=$((off + ${#2} + 4)) conv=notrunc status=none
}
mk; patch "$work/h/sh-00002-of-00003.gguf" split.count '\x04\x00'
refused "a split in 4 files, not 3" "$work/h"
mk; patch "$work/h/sh-00002-of-00003.gguf" split.tensors.count '\x17\x00\x00\x00'
refused "another model" "$work/h"
# a shard not named -0000K-of-0000N.gguf cannot find the others
cp "$s/sh-00002-of-00003.gguf" "$work/renamed.gguf"
"$amn" inspect "$work/renamed.gguf" >"$work/log" 2>&1
[ $? -eq 1 ] && grep -q "not named" "$work/log" || { fail "misnamed shard"; cat "$work/log"; }
# --keep-split refusals
"$amn" forget "$s/sh-00001-of-00003.gguf" --to Q8_0 --keep-split --prune-layers 1 -o "$work/bad" >"$work/log" 2>&1
[ $? -eq 2 ] || fail "--keep-split --prune-layers not refused"
"$amn" convert "$model" --to gguf --split-max-tensors 0 -o "$work/bad" >"$work/log" 2>&1
[ $? -eq 2 ] || fail "--split-max-tensors 0 not refused"
"$amn" convert "$model" --to gguf --split-max-size 5K -o "$work/bad" >"$work/log" 2>&1
[ $? -eq 2 ] || fail "--split-max-size 5K not refused"
# the writer's split option (what each shard is written with) refuses bad values
for v in 3/3/22 0/0/22 0/70000/22 0/3/-1 x 1/3 0/3/22x; do
    "$amn" convert "$model" --to gguf --opt "split=$v" -o "$work/bad.gguf" >"$work/log" 2>&1
    [ $? -eq 2 ] && grep -q "NO/COUNT/TENSORS" "$work/log" || { fail "--opt split=$v"; cat "$work/log"; }
done
[ -e "$work/bad.gguf" ] && fail "--opt split: left an output"
# an existing shard is kept without --force
run convert "$model" --to gguf --out-dtype keep --split-max-tensors 10 -o "$work/ex.gguf"
"$amn" convert "$model" --to gguf --out-dtype keep --split-max-tensors 10 -o "$work/ex.gguf" >"$work/log" 2>&1
[ $? -eq 2 ] && grep -q "already exists" "$work/log" || { fail "existing shards overwritten"; cat "$work/log"; }
ls -a "$work" | grep -q "amn-" && fail "a temporary folder was left"

[ $fails -eq 0 ] && echo "gguf_split: all passed"
exit $((fails > 0))
