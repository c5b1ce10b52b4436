#!/usr/bin/env bash
# llama-quantize's options on `amn forget model.gguf --to FTYPE`, the
# `convert --to gguf-TYPE` spelling, non-GGUF inputs, 1-D tensors F32 in
# every GGUF output, and forget's --max-* limits.
#
# Per-tensor expectations come from llama.cpp src/llama-quant.cpp
# (EAddario/llama.cpp 3af988fab, "lq:N" = line N) applied to the reference
# model (gguf_quant_reference/model_l4_f16: 4 layers, n_embd 256, n_ff 768,
# GQA 4, untied output), starting from the types llama-quantize gave each
# tensor for Q4_K_M (its .expect.json). Exit 77 without the corpus.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-opts "$1" "$2"
ref=${AMN_REFERENCE_DIR:-$src/../shared/fixtures}/gguf_quant_reference
model=$ref/model_l4_f16.gguf expect=$ref/model_l4_f16.expect.json
[ -f "$model" ] && [ -f "$expect" ] || skip "no $model"
[ -x $py ] || skip "no $py"
need_plugin safetensors
types=$src/tests/gguf/check_gguf_types.py
run() { # run OUT ARGS...: amn forget ARGS -o OUT, quietly
    local out=$1; shift
    "$amn" forget "$@" -o "$out" --force --no-sync >"$work/log" 2>&1 || { fail "forget $*"; cat "$work/log"; }
}
check() { # check OUT RULES...
    $py "$types" "$1" "$expect" Q4_K_M "${@:2}" || fails=$((fails + 1))
}

# --pure: lq:712 skips llama_tensor_get_type_impl, so every quantizable
# tensor (lq:288-330: 2-D, *weight, not *_norm.weight) takes the file
# type's default type, Q4_K for Q4_K_M (lq:833), output.weight included.
run "$work/pure.gguf" "$model" --to Q4_K_M --pure
check "$work/pure.gguf" '^(?!.*_norm).*weight$=Q4_K'

# --output-tensor-type / --token-embedding-type: lq:683-688 return them
# before any other rule; everything else stays as Q4_K_M has it.
run "$work/ot.gguf" "$model" --to Q4_K_M --output-tensor-type q8_0 --token-embedding-type Q5_0
check "$work/ot.gguf" '^output\.weight$=Q8_0' '^token_embd\.weight$=Q5_0'

# --leave-output-tensor: lq:304 does not quantize output.weight (F16 kept).
run "$work/lo.gguf" "$model" --to Q4_K_M --leave-output-tensor
check "$work/lo.gguf" '^output\.weight$=F16'

# --tensor-type, first matching pattern wins (lq:697-709, lowered by
# quantize.cpp parse_tensor_type). A manual type skips the impl (lq:712), so
# a manual blk.0.attn_v does not advance i_attention_wv (lq:566): blk.1..3
# see counters 0..2 and use_more_bits(i, 4) (lq:430-432, 552-553) is true
# for i = 2 only: blk.3 Q6_K, blk.2 back to Q4_K.
run "$work/tt.gguf" "$model" --to Q4_K_M --tensor-type 'ATTN_Q=q8_0' \
    --tensor-type 'blk\.0\.attn_v=Q5_K' --tensor-type 'ffn_(up|gate)=q5_0' --tensor-type 'ffn_up=q8_0'
check "$work/tt.gguf" 'attn_q=Q8_0' 'blk\.0\.attn_v=Q5_K' 'blk\.2\.attn_v=Q4_K' 'ffn_(up|gate)=Q5_0'

# Bad values are refused before any output exists.
expect_fail 2 "invalid ggml_type" -- forget "$model" --to Q4_K_M --output-tensor-type q9_9 \
    -o "$work/bad.gguf"
expect_fail 2 "PATTERN=TYPE" -- forget "$model" --to Q4_K_M --tensor-type attn_q -o "$work/bad.gguf"
expect_fail 2 "needs a value" -- forget "$model" --to Q4_K_M --token-embedding-type
expect_fail 2 "GGUF file types only" -- forget "$model" --to bnb-nf4 --pure -o "$work/bad.st"
[ -e "$work/bad.gguf" ] && fail "a refused output exists"

# --allow-requantize: a quantized input is refused without it (lq:1234-1235)
# and dequantized with it: to F32 every tensor must be numpy's Q8_0 decode
# (ggml dequantize_row_q8_0: x = q * d, d from f16) of the Q8_0 input.
run "$work/q8.gguf" "$model" --to Q8_0
expect_fail 3 "requantizing from type Q8_0 is disabled" -- forget "$work/q8.gguf" --to Q4_K_M \
    -o "$work/bad.gguf"
run "$work/rq.gguf" "$work/q8.gguf" --to F32 --allow-requantize
$py - "$work/rq.gguf" "$work/q8.gguf" "$src/tests/gguf" <<'PY' || fails=$((fails + 1))
import sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from check_gguf_expect import parse
out, q8 = parse(sys.argv[1]), parse(sys.argv[2])
qt = {n: (ne, t, off) for n, ne, t, off in q8[2]}
bad = 0
for name, ne, t, off in out[2]:
    n = int(np.prod(ne))
    got = np.frombuffer(out[0], np.float32, n, out[3] + off)
    ne_q, t_q, off_q = qt[name]
    if t_q == 8:
        b = np.frombuffer(q8[0], np.uint8, n // 32 * 34, q8[3] + off_q).reshape(-1, 34)
        d = b[:, :2].copy().view(np.float16).astype(np.float32)
        want = (b[:, 2:].copy().view(np.int8).astype(np.float32) * d).reshape(-1)
    else:
        want = np.frombuffer(q8[0], np.float32, n, q8[3] + off_q)
    if t != 0 or got.tobytes() != want.tobytes():
        print("FAIL requantize %s: not the Q8_0 decode" % name)
        bad += 1
print("requantize: %d tensors checked" % len(out[2]))
sys.exit(bad > 0)
PY
# Requantizing to the type a tensor already has copies it (lq: quantize is
# false when the type does not change): Q8_0 -> Q8_0 is llama-quantize's Q8_0.
run "$work/rq8.gguf" "$work/q8.gguf" --to Q8_0 --allow-requantize
$py "$src/tests/gguf/check_gguf_expect.py" "$work/rq8.gguf" "$expect" Q8_0 "$model" ||
    fails=$((fails + 1))

# convert --to gguf-TYPE is forget --to TYPE; convert --to bf16 still means
# safetensors (not the GGUF file type BF16).
"$amn" convert "$model" --to gguf-Q4_K_M -o "$work/cv.gguf" --no-sync >/dev/null 2>&1 || fail "convert gguf-Q4_K_M"
run "$work/fg.gguf" "$model" --to Q4_K_M
cmp -s "$work/cv.gguf" "$work/fg.gguf" || fail "convert --to gguf-Q4_K_M differs from forget"

# Non-GGUF input: one type for every quantizable tensor (2-D and up, *weight,
# no "norm"), the fallback of lq:374-395 for rows that are not whole blocks
# (rows of 96: Q4_K -> Q5_0), 1-D tensors F32; Q8_0 bytes checked by numpy.
gen=$src/tests/gguf/gen_plain_model.py
$py "$gen" write "$work/p.safetensors" || fail "gen_plain_model"
run "$work/p8.gguf" "$work/p.safetensors" --to Q8_0
$py "$gen" q8_0 "$work/p8.gguf" "$work/p.safetensors" || fails=$((fails + 1))
run "$work/p4.gguf" "$work/p.safetensors" --to q4_k_m --tensor-type 'lm_head=q6_k'
$py "$types" --dump "$work/p4.gguf" | cut -d' ' -f1,2 | sort >"$work/p4.types"
cat >"$work/p4.want" <<'EOF'
lm_head.weight Q6_K
model.embed_tokens.weight Q4_K
model.layers.0.extra_norm.weight F16
model.layers.0.input_layernorm.weight F32
model.layers.0.mlp.down_proj.weight Q5_0
model.layers.0.self_attn.q_proj.bias F32
model.layers.0.self_attn.q_proj.weight Q4_K
model.rotary.inv_freq F32
EOF
diff "$work/p4.want" "$work/p4.types" || fail "non-GGUF Q4_K_M types"
expect_fail 2 "need a GGUF input" -- forget "$work/p.safetensors" --to Q4_K_M \
    --output-tensor-type q8_0 -o "$work/bad.gguf"
# A quantized safetensors (FP8 blocks) is dequantized first (its activation
# scale dropped, as remember drops it).
run "$work/f8.gguf" "$src/fixtures/example/tiny-fp8.safetensors" --to Q4_K_M
$py "$types" --dump "$work/f8.gguf" | cut -d' ' -f1,2 | sort >"$work/f8.types"
printf "%s\n" \
    "model.layers.0.mlp.down_proj.weight Q5_0" "model.norm.weight F32" >"$work/f8.want"
diff "$work/f8.want" "$work/f8.types" || fail "FP8 input types"

# convert --to gguf --out-dtype f16: 1-D tensors stay F32.
"$amn" convert "$work/p.safetensors" --to gguf --out-dtype f16 -o "$work/cf.gguf" --no-sync >/dev/null 2>&1 ||
    fail "convert --to gguf"
$py "$types" --dump "$work/cf.gguf" | cut -d' ' -f1,2 | sort >"$work/cf.types"
sed 's/ .*//' "$work/p4.want" | while read -r n; do
    case $n in *bias | *input_layernorm.weight) echo "$n F32" ;; *) echo "$n F16" ;; esac
done | sort >"$work/cf.want"
diff "$work/cf.want" "$work/cf.types" || fail "convert --to gguf --out-dtype f16 types"
"$amn" convert "$work/p.safetensors" --to bf16 -o "$work/cb.safetensors" --no-sync >/dev/null 2>&1 ||
    fail "convert --to bf16"
head -c 8 "$work/cb.safetensors" | od -An -tu8 | grep -q '[1-9]' || fail "--to bf16 not safetensors"

# forget reads its input under the --max-* limits.
expect_fail 4 "exceed the cap" -- forget "$model" --to Q8_0 --max-items 3 -o "$work/bad.gguf"

# --quiet prints nothing (the output is still written); the folder-only
# flags are refused when the output is one file; -o naming a folder for a
# GGUF file type is refused before anything is written.
"$amn" forget "$model" --to Q8_0 -o "$work/q.gguf" --quiet --no-sync >"$work/qlog" 2>&1 ||
    fail "forget --quiet"
[ -s "$work/qlog" ] && { fail "forget --quiet printed:"; cat "$work/qlog"; }
[ -s "$work/q.gguf" ] || fail "forget --quiet wrote nothing"
expect_fail 2 "write a model folder" -- forget "$model" --to Q8_0 --only-shards 1 -o "$work/os.gguf"
mkdir "$work/dir"
expect_fail 2 "writes one gguf file" "names a folder" -- forget "$model" --to Q8_0 -o "$work/dir/"
[ -z "$(ls -A "$work/dir")" ] || fail "forget -o DIR/ left files"

[ $fails -eq 0 ] && echo "forget gguf options: all passed"
exit $((fails > 0))
