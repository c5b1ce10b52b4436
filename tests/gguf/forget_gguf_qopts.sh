#!/usr/bin/env bash
# llama-quantize's file-shaping options on `amn forget model.gguf --to TYPE`:
# --override-kv, --prune-layers, --tensor-type-file, --include-weights /
# --exclude-weights, --dry-run. Expected bytes (sha256) and --dry-run lines
# are llama-quantize's own (3af988fab), made by
# fixtures/gguf/qopts/gen_qopts_reference.sh from the shared reference model
# (gguf_quant_reference/model_l4_f16: 4 layers, llama). Exit 77 without it.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-qopts "$1" "$2"
model=${AMN_REFERENCE_DIR:-$src/../shared/fixtures}/gguf_quant_reference/model_l4_f16.gguf
fx=$src/fixtures/gguf/qopts
[ -f "$model" ] || skip "no $model"
same() { # same CASE ARGS...: amn forget IN ARGS gives llama-quantize's bytes for CASE (IN: $in, else the model)
    local name=$1; shift
    local want
    want=$(awk -v n="$name" '$2 == n {print $1}' "$fx/expected.sha256")
    [ -n "$want" ] || { fail "no expected sha256 for $name"; return; }
    "$amn" forget "${in:-$model}" "$@" -o "$work/$name.gguf" --force --no-sync >"$work/log" 2>&1 ||
        { fail "$name: forget $*"; cat "$work/log"; return; }
    local got
    got=$(sha256sum <"$work/$name.gguf" | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "$name: bytes differ from llama-quantize's"
}
refused() { # refused CODE WORDS... -- ARGS...: expect_fail, and nothing written
    expect_fail "$@"
    [ -e "$work/bad.gguf" ] && { fail "${*#* -- }: left an output"; rm -f "$work/bad.gguf"; }
}

# --override-kv: llama-quantize's gguf_set_val_* (the key removed and
# appended after general.file_type; int as u32 |v| mod 2^32, float as f32).
same plain --to Q4_K_M
same override_kv --to Q4_K_M --override-kv general.name=str:renamed \
    --override-kv llama.context_length=int:-70000 --override-kv amn.test.flag=bool:true \
    --override-kv amn.test.scale=float:0.1 --override-kv amn.test.text=str:
# llama-quantize's loader reads an int override of block_count (the
# mixture's layer count) and ignores one of another type (still written).
same override_count --to Q4_K_M --override-kv llama.block_count=int:8
same override_count_str --to Q4_K_M --override-kv llama.block_count=str:x
# --prune-layers among the last layers (where llama-quantize works):
# dropped, llama.block_count set last.
same prune_last --to Q4_K_M --prune-layers 3
same prune_last2 --to Q4_K_M --prune-layers 2,3,2
# --prune-layers of middle layers (llama-quantize crashes): every tensor as
# llama-quantize makes it from the model gguf-py pruned (prune_ref.py), in
# its order, and llama.block_count the layers kept.
for p in 1 0,2; do
    "$amn" forget "$model" --to Q4_K_M --prune-layers "$p" -o "$work/pm.gguf" --force --no-sync \
        >"$work/log" 2>&1 || { fail "prune $p"; cat "$work/log"; continue; }
    $py "$src/tests/gguf/check_gguf_types.py" --dump "$work/pm.gguf" >"$work/pm.tensors"
    diff "$fx/prune-${p/,/_}.tensors" "$work/pm.tensors" >"$work/diff" ||
        { fail "prune $p: tensors differ"; head "$work/diff"; }
    $py - "$work/pm.gguf" "$src/tests/gguf" "$p" <<'PY' || fail "prune $p: block_count"
import sys
sys.path.insert(0, sys.argv[2])
from check_gguf_expect import parse
kv = parse(sys.argv[1])[1]
want = 4 - len(sys.argv[3].split(","))
got = [(k, t, v) for k, t, v in kv if k == "llama.block_count"]
# u32 (type 4), set last as llama-quantize's gguf_set_val_u32 leaves it
if got != [("llama.block_count", 4, want)] or kv[-1][0] != "llama.block_count":
    print("block_count", got, "want", want, "last:", kv[-1][0])
    sys.exit(1)
PY
done
# --tensor-type-file: its words take its place among the --tensor-type.
same type_file --to Q4_K_M --tensor-type ATTN_K=q6_k --tensor-type-file "$fx/types.txt" \
    --tensor-type attn_q=q4_0
# Without an importance matrix these change nothing (they filter it).
same exclude --to Q4_K_M --exclude-weights output.weight
same include --to Q4_K_M --include-weights blk.0
# llama-quantize's aliases Q3_K / Q4_K / Q5_K (any case), and COPY: every
# tensor as it is (a quantized input's too, without --allow-requantize),
# general.file_type the input's, or llama.cpp's loader's guess (the type
# most tensors have, GUESSED bit set) when the input has none.
same alias_q3_k --to Q3_K
same alias_q4_k --to q4_k
same alias_q5_k --to Q5_K
same copy --to COPY
same copy_opts --to COPY --prune-layers 3 --override-kv general.name=str:copied
in=$work/plain.gguf same copy_quantized --to COPY
$py "$fx/drop_kv.py" "$model" "$work/no-file-type.gguf" general.file_type ||
    fail "drop_kv.py"
in=$work/no-file-type.gguf same copy_guessed --to COPY
"$amn" convert "$model" --to gguf-COPY -o "$work/cv-copy.gguf" --no-sync >/dev/null 2>&1 ||
    fail "convert --to gguf-COPY"
cmp -s "$work/cv-copy.gguf" "$work/copy.gguf" || fail "convert --to gguf-COPY differs from forget"
# convert --to gguf-TYPE takes them too.
"$amn" convert "$model" --to gguf-Q4_K_M --prune-layers 3 -o "$work/cv.gguf" --no-sync \
    >/dev/null 2>&1 || fail "convert --prune-layers"
cmp -s "$work/cv.gguf" "$work/prune_last.gguf" || fail "convert --prune-layers differs from forget"

# --dry-run: llama-quantize's lines, nothing written.
dry() { # dry NAME ARGS...
    local name=$1; shift
    "$amn" forget "$model" "$@" --dry-run -o "$work/dry.gguf" >"$work/$name.txt" 2>"$work/log" ||
        { fail "dry run $name"; cat "$work/log"; }
    diff "$fx/dry-run-$name.txt" "$work/$name.txt" >"$work/diff" || { fail "dry run $name:"; cat "$work/diff"; }
    [ -e "$work/dry.gguf" ] && fail "dry run $name wrote a file"
}
dry q4_k_m --to Q4_K_M
dry q4_k_m_types --to Q4_K_M --tensor-type-file "$fx/types.txt" --leave-output-tensor
dry prune_last2 --to Q8_0 --prune-layers 2,3

# Refusals, before any output exists.
for bad in 'general.name' '=str:x' 'general.name=string:x' 'a.b=bool:yes' 'a.b=int:12x' \
    'a.b=float:' "a.b=str:$(printf 'x%.0s' $(seq 128))"; do
    refused 2 "override-kv" -- forget "$model" --to Q4_K_M --override-kv "$bad" -o "$work/bad.gguf"
done
for bad in '' '1,,2' '-1' 'x' '1.5' '99999999999'; do
    refused 2 "prune-layers" "invalid layer id" -- forget "$model" --to Q4_K_M \
        --prune-layers "$bad" -o "$work/bad.gguf"
done
refused 6 "tensor-type-file" "cannot open" -- forget "$model" --to Q4_K_M \
    --tensor-type-file "$work/none.txt" -o "$work/bad.gguf"
printf 'attn_q=q8_0 attn_k\n' >"$work/t1.txt"
refused 2 "tensor-type-file" "attn_k" "PATTERN=TYPE" -- forget "$model" --to Q4_K_M \
    --tensor-type-file "$work/t1.txt" -o "$work/bad.gguf"
printf 'attn_q=q9_9\n' >"$work/t2.txt"
refused 2 "invalid ggml_type" "q9_9" -- forget "$model" --to Q4_K_M \
    --tensor-type-file "$work/t2.txt" -o "$work/bad.gguf"
printf 'attn_q=q8_0\0\n' >"$work/t3.txt"
refused 1 "NUL" -- forget "$model" --to Q4_K_M --tensor-type-file "$work/t3.txt" \
    -o "$work/bad.gguf"
refused 2 "cannot be used together" -- forget "$model" --to Q4_K_M \
    --include-weights blk.0 --exclude-weights output -o "$work/bad.gguf"
refused 2 "needs a value" -- forget "$model" --to Q4_K_M --prune-layers
if have "encode bnb"; then
    refused 2 "GGUF file types only" -- forget "$model" --to bnb-nf4 --override-kv a=int:1 \
        -o "$work/bad.gguf"
fi
st=$src/fixtures/example/tiny-f32.safetensors
if have "format safetensors"; then
    refused 2 "dry-run needs a GGUF input" -- forget "$st" --to Q8_0 --dry-run
    refused 2 "prune-layers needs a GGUF input" -- forget "$st" --to Q8_0 --prune-layers 0 \
        -o "$work/bad.gguf"
    refused 2 "COPY" "needs a GGUF input" -- forget "$st" --to COPY -o "$work/bad.gguf"
fi

[ $fails -eq 0 ] && echo "forget gguf qopts: all passed"
exit $((fails > 0))
