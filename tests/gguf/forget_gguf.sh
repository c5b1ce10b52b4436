#!/usr/bin/env bash
# End to end: `amn forget model.gguf --to FTYPE` against llama-quantize's
# output for the reference model (gguf_quant_reference/model_l4_f16): tensor
# order, per-tensor types, data SHA-256 and metadata, at 1 and 2 threads
# (IQ3_S and IQ3_M also on the scalar path, AMN_SIMD=scalar);
# the refusals llama-quantize makes. Exit 77 without the reference corpus.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-forget "$1" "$2"
ref=${AMN_REFERENCE_DIR:-$src/../shared/fixtures}/gguf_quant_reference
model=$ref/model_l4_f16.gguf expect=$ref/model_l4_f16.expect.json
[ -f "$model" ] && [ -f "$expect" ] || skip "no $model"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
check() { # check FTYPE SPELLING THREADS [OUTPUT-SUFFIX]
    local out=$work/$1-$3${4:-}.gguf
    if ! "$amn" forget "$model" --to "$2" --threads "$3" -o "$out" >"$work/log" 2>&1; then
        fail "$1 (threads $3): amn forget failed"; cat "$work/log"
        return
    fi
    /usr/bin/python3 "$src/tests/gguf/check_gguf_expect.py" "$out" "$expect" "$1" "$model" ||
        fails=$((fails + 1))
}
for t in 1 2; do
    for f in Q4_K_M Q6_K IQ4_XS Q8_0 IQ3_S; do check "$f" "$f" "$t"; done
done
# IQ3_S / IQ3_M on the scalar path too (the vector search must give its bytes).
for f in IQ3_S IQ3_M; do AMN_SIMD=scalar check "$f" "$f" 2 -scalar; done
# Lower case, the other families, and the unquantized file types.
for f in q4_0:Q4_0 q5_1:Q5_1 Q3_K_S:Q3_K_S q2_k:Q2_K IQ3_M:IQ3_M TQ1_0:TQ1_0 MXFP4_MOE:MXFP4_MOE \
         Q1_0:Q1_0 Q2_0:Q2_0 bf16:BF16 F16:F16 F32:F32; do
    check "${f#*:}" "${f%%:*}" 2
done
# Refusals: an importance-matrix type, with llama-quantize's reason; a
# quantized input (requantizing). Non-GGUF inputs: forget_gguf_options.sh.
expect_fail any "importance matrix" -- forget "$model" --to IQ2_XXS -o "$work/x.gguf"
[ -e "$work/x.gguf" ] && fail "refused output exists"
expect_fail any "requantizing" "disabled" -- forget "$work/Q8_0-1.gguf" --to Q4_K_M -o "$work/y.gguf"
[ $fails -eq 0 ] && echo "forget gguf: all passed"
exit $((fails > 0))
