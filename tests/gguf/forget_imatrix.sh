#!/usr/bin/env bash
# `amn forget model.gguf --imatrix FILE --to TYPE` against llama-quantize
# with the same importance matrix (fixtures/gguf_imatrix, made by its
# gen.py): whole-file SHA-256 for each file type and both imatrix formats,
# at 1 and 3 threads and on the scalar and vector paths; then malformed and
# mismatched importance matrices, each refused with a message naming what
# is wrong and no output left behind.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-imatrix "$1" "$2"
fix=$src/fixtures/gguf_imatrix
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
# Run where the inputs are: llama-quantize recorded the file name as given.
cd "$fix" || exit 1
# A line may end with llama-quantize options given to both (word-split).
while read -r hash im type opts; do
    for run in "1:" "3:" "3:scalar"; do
        t=${run%%:*} level=${run#*:}
        out=$work/$type-$t$level.gguf
        # shellcheck disable=SC2086
        if ! AMN_SIMD=${level:-${AMN_SIMD:-}} "$amn" forget model.gguf --imatrix "$im" --to "$type" \
            $opts --threads "$t" -o "$out" >"$work/log" 2>&1; then
            fail "$im $type $opts (threads $t ${level:-default}): amn failed"; cat "$work/log"
            continue
        fi
        got=$(sha256sum "$out" | cut -d' ' -f1)
        if [ "$got" != "$hash" ]; then
            fail "$im $type $opts (threads $t ${level:-default}): sha256 $got, llama-quantize $hash"
        fi
        rm -f "$out"
    done
done <"$fix/expected.sha256"

# convert --to gguf-TYPE takes it too.
"$amn" convert model.gguf --imatrix imatrix.gguf --to gguf-Q4_K_M -o "$work/c.gguf" >"$work/log" 2>&1 &&
    [ "$(sha256sum "$work/c.gguf" | cut -d' ' -f1)" = "$(grep ' imatrix.gguf Q4_K_M$' expected.sha256 | cut -d' ' -f1)" ] ||
    { fail "convert --to gguf-Q4_K_M --imatrix"; cat "$work/log"; }

# The one-pass Hugging Face path takes it as the two-step one does.
# (needs the hf and safetensors plugins: skipped in a build without them)
hf=$src/fixtures/hf/Llama-2-Tiny-SPM
plugins=$("$amn" plugins 2>/dev/null)
if ! printf '%s\n' "$plugins" | grep -q "scheme hf " ||
    ! printf '%s\n' "$plugins" | grep -q "format safetensors"; then
    echo "skipped: the Hugging Face check (no hf or safetensors plugin)"
elif "$amn" convert "$hf" --to gguf -o "$work/hf16.gguf" >"$work/log" 2>&1 &&
    /usr/bin/python3 - "$work" "$src" <<'PY'
import struct, sys, os
work, src = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(src, "tests", "gguf"))
from check_gguf_expect import parse
_, _, infos, _ = parse(os.path.join(work, "hf16.gguf"))
ents = [(n, ne[0]) for n, ne, t, off in infos if len(ne) >= 2 and n != "token_embd.weight"]
b = struct.pack("<i", len(ents))
for k, (n, ne0) in enumerate(ents):
    v = [1.0 + ((i * 7 + k * 13) % 17) / 4.0 for i in range(ne0)]
    b += struct.pack("<i", len(n)) + n.encode() + struct.pack("<ii", 4, ne0) + struct.pack("<%df" % ne0, *v)
open(os.path.join(work, "hf.dat"), "wb").write(b)
PY
then
    "$amn" convert "$hf" --to gguf-Q4_K_M --imatrix "$work/hf.dat" -o "$work/hf1.gguf" >"$work/log" 2>&1 &&
        "$amn" forget "$work/hf16.gguf" --to Q4_K_M --imatrix "$work/hf.dat" -o "$work/hf2.gguf" >>"$work/log" 2>&1 &&
        "$amn" forget "$work/hf16.gguf" --to Q4_K_M -o "$work/hf3.gguf" >>"$work/log" 2>&1 &&
        cmp -s "$work/hf1.gguf" "$work/hf2.gguf" && ! cmp -s "$work/hf2.gguf" "$work/hf3.gguf" ||
        { fail "Hugging Face folder --to gguf-Q4_K_M --imatrix"; cat "$work/log"; }
else
    fail "could not prepare the Hugging Face check"; cat "$work/log"
fi

refuse() { # refuse IMATRIX TYPE WORDS...: amn refuses, naming each word, no output
    local im=$1 type=$2; shift 2
    rm -f "$work/r.gguf"
    if "$amn" forget model.gguf --imatrix "$im" --to "$type" -o "$work/r.gguf" >"$work/log" 2>&1; then
        fail "$im --to $type accepted"; return
    fi
    for w in "$@"; do
        grep -qF -- "$w" "$work/log" || { fail "$im --to $type: no '$w' in:"; cat "$work/log"; }
    done
    [ -e "$work/r.gguf" ] && { fail "$im --to $type left an output"; }
}
/usr/bin/python3 - "$work" "$fix" <<'PY'
import struct, sys, os
work, fix = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(fix, "..", "gguf"))
def w(name, b): open(os.path.join(work, name), "wb").write(b)
def ent(name, vals, ncall=8, nval=None, ln=None):
    nb = name.encode()
    return (struct.pack("<i", len(nb) if ln is None else ln) + nb +
            struct.pack("<ii", ncall, len(vals) if nval is None else nval) +
            struct.pack("<%df" % len(vals), *vals))
q = "blk.0.attn_q.weight"
w("trunc.dat", struct.pack("<i", 3) + ent(q, [1.0] * 256))
w("neglen.dat", struct.pack("<i", 1) + ent(q, [1.0] * 256, ln=-5))
w("hugelen.dat", struct.pack("<i", 1) + ent(q, [1.0] * 256, ln=0x7fffffff))
w("hugenval.dat", struct.pack("<i", 1) + ent(q, [1.0] * 256, nval=0x7fffffff))
w("zero.dat", struct.pack("<i", 0))
w("nan.dat", struct.pack("<i", 1) + ent(q, [1.0] * 255 + [float("nan")]))
w("short.dat", struct.pack("<i", 1) + ent(q, [1.0] * 128))
w("dup.dat", struct.pack("<i", 2) + ent(q, [1.0] * 256) + ent(q, [1.0] * 256))
# GGUF imatrix files, written by the standard-library writer of fixtures/gguf.
import make_gguf as mg
def gg(name, kvs, tensors):
    g = mg.Writer(3)
    for k, t, v, item in kvs:
        g.add(k, t, v, item)
    for n, shape, vals in tensors:
        g.add_tensor(n, shape, mg.GGML_F32, mg.f32s(vals))
    w(name, g.bytes())
meta = [("imatrix.datasets", mg.ARR, ["d"], mg.STR), ("imatrix.chunk_count", mg.U32, 1, None),
        ("imatrix.chunk_size", mg.U32, 512, None)]
gg("nocounts.gguf", meta, [(q + ".in_sum2", [256, 1], [1.0] * 256)])
gg("nometa.gguf", meta[:1], [(q + ".in_sum2", [256, 1], [1.0] * 256), (q + ".counts", [1, 1], [1.0])])
gg("baddiv.gguf", meta, [(q + ".in_sum2", [256, 1], [1.0] * 256), (q + ".counts", [3, 1], [1.0] * 3)])
gg("badcount.gguf", meta, [(q + ".in_sum2", [256, 1], [1.0] * 256), (q + ".counts", [1, 1], [float("inf")])])
PY
[ -f "$work/zero.dat" ] || { echo "FAIL: could not write the malformed files"; exit 1; }
refuse "$work/trunc.dat" Q4_K_M "bad name length"
refuse "$work/neglen.dat" Q4_K_M "bad name length"
refuse "$work/hugelen.dat" Q4_K_M "bad name length"
refuse "$work/hugenval.dat" Q4_K_M "value count"
refuse "$work/zero.dat" Q4_K_M "no data"
refuse "$work/nan.dat" Q4_K_M "non-finite" "blk.0.attn_q.weight"
refuse "$work/short.dat" Q4_K_M "imatrix size 128 is different from tensor size 256 for blk.0.attn_q.weight"
refuse "$work/dup.dat" Q4_K_M "appears twice"
refuse "$work/nocounts.gguf" Q4_K_M "mismatched sums and counts" "blk.0.attn_q.weight"
refuse "$work/nometa.gguf" Q4_K_M "missing imatrix metadata"
refuse "$work/baddiv.gguf" Q4_K_M "do not divide"
refuse "$work/badcount.gguf" Q4_K_M "bad count"
refuse "$work/absent.dat" Q4_K_M "absent.dat"
# A tensor without an entry in a type that needs one (Q2_K in Q2_K_S):
# llama-quantize stops at it leaving a partial file; amn refuses first.
refuse imatrix.gguf Q2_K_S "blk.1.attn_k.weight" "very low-bit"
# --pure IQ2_XXS where token_embd has no entry: ggml aborts in
# llama-quantize; amn refuses naming it.
rm -f "$work/r.gguf"
"$amn" forget model.gguf --imatrix imatrix.gguf --pure --to IQ2_XXS -o "$work/r.gguf" >"$work/log" 2>&1 &&
    { fail "--pure IQ2_XXS without a token_embd entry accepted"; }
grep -q "token_embd.weight" "$work/log" && [ ! -e "$work/r.gguf" ] ||
    { fail "--pure IQ2_XXS refusal:"; cat "$work/log"; }
# Without an importance matrix, its types are refused as before.
rm -f "$work/r.gguf"
"$amn" forget model.gguf --to IQ2_XXS -o "$work/r.gguf" >"$work/log" 2>&1 &&
    { fail "IQ2_XXS without an imatrix accepted"; }
grep -q "importance matrix" "$work/log" || { fail "IQ2_XXS refusal:"; cat "$work/log"; }
[ $fails -eq 0 ] && echo "forget --imatrix: all passed"
exit $((fails > 0))
