#!/bin/sh
# Benchmark `amn forget model.gguf --to TYPE` (issue #16) on a ~1 GiB F16
# llama-shaped GGUF, 2 threads by default (not a test).
#
#   cmake --build BUILD && tests/bench/gguf_forget_bench.sh BUILD [DIR]
#
# The model is generated once in DIR (default /tmp/amn-forget-bench):
# llama architecture, 9 layers, n_embd 2048, n_ff 5632, 32 heads, 4 KV heads
# (GQA 8), vocabulary 32000, untied output: 528 M parameters, 1.06 GB of F16
# (normal values, sd 0.02), norms F32; written by the Python below, streamed
# tensor by tensor. LAYERS and VOCAB (default 9 and 32000) change the layer
# count and vocabulary (LAYERS=2 VOCAB=8000: 240 MB, for the slow types). For each TYPE (default "Q4_K_M Q6_K IQ4_XS", or TYPES)
# ROUNDS runs (default 3) of
#   amn forget MODEL --to TYPE -o OUT --force --no-sync --quiet --threads T
# print the best and median wall seconds, the CPU seconds of the best run,
# and ns per quantized element (best wall time / elements of the tensors
# the file type quantizes, read back from the output with amn parse --json)
# and the output's SHA-256 (identical at any thread count: compare THREADS=1).
# With LLAMA_QUANTIZE=/path/to/llama-quantize, each round also runs
#   llama-quantize MODEL OUT TYPE T
# right after amn (same rounds, same input), prints both wall and CPU
# (user + sys) seconds each round, its best and median and amn's speed
# ratio by wall and by CPU time (best runs), and checks that both outputs
# are the same bytes.
# With IMATRIX=FILE both get --imatrix FILE; IMATRIX=auto writes (once) a
# synthetic legacy importance matrix for the model beside it (positive
# random weights for every matrix but token_embd) and uses that, e.g.
#   IMATRIX=auto TYPES="Q4_K_M IQ2_XXS" LLAMA_QUANTIZE=... gguf_forget_bench.sh BUILD
set -eu
B=${1:?usage: gguf_forget_bench.sh BUILD_DIR [DIR]}
D=${2:-/tmp/amn-forget-bench}
R=${ROUNDS:-3}
T=${THREADS:-2}
TYPES=${TYPES:-"Q4_K_M Q6_K IQ4_XS"}
AMN="$B/bin/amn"
mkdir -p "$D"
NL=${LAYERS:-9} NV=${VOCAB:-32000}
M="$D/llama-1g-f16.gguf"
[ "$NL.$NV" = 9.32000 ] || M="$D/llama-${NL}l-${NV}v-f16.gguf"
if [ ! -f "$M" ]; then
    /usr/bin/python3 - "$M" "$NL" "$NV" <<'PY'
import struct, sys
import numpy as np
L, E, F, H, HKV, V = int(sys.argv[2]), 2048, 5632, 32, 4, int(sys.argv[3])
def s(x):
    b = x.encode(); return struct.pack("<Q", len(b)) + b
kv = [("general.architecture", 8, "llama"), ("general.name", 8, "bench"),
      ("llama.block_count", 4, L), ("llama.context_length", 4, 4096),
      ("llama.embedding_length", 4, E), ("llama.feed_forward_length", 4, F),
      ("llama.attention.head_count", 4, H), ("llama.attention.head_count_kv", 4, HKV),
      ("llama.rope.dimension_count", 4, E // H),
      ("llama.attention.layer_norm_rms_epsilon", 6, 1e-5), ("general.file_type", 4, 1)]
kvd = E // H * HKV
ts = [("token_embd.weight", [E, V], 1), ("output_norm.weight", [E], 0), ("output.weight", [E, V], 1)]
for i in range(L):
    p = "blk.%d." % i
    ts += [(p + "attn_norm.weight", [E], 0), (p + "attn_q.weight", [E, E], 1),
           (p + "attn_k.weight", [E, kvd], 1), (p + "attn_v.weight", [E, kvd], 1),
           (p + "attn_output.weight", [E, E], 1), (p + "ffn_norm.weight", [E], 0),
           (p + "ffn_gate.weight", [E, F], 1), (p + "ffn_up.weight", [E, F], 1),
           (p + "ffn_down.weight", [F, E], 1)]
head = b"GGUF" + struct.pack("<IQQ", 3, len(ts), len(kv))
for k, t, v in kv:
    val = s(v) if t == 8 else struct.pack("<f", v) if t == 6 else struct.pack("<I", v)
    head += s(k) + struct.pack("<I", t) + val
off, sizes = 0, []
for n, ne, t in ts:
    nb = int(np.prod(ne)) * (4 if t == 0 else 2)
    head += s(n) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
    head += struct.pack("<IQ", t, off)
    sizes.append(nb); off += (nb + 31) // 32 * 32
head += b"\0" * (-len(head) % 32)
rng = np.random.default_rng(1)
with open(sys.argv[1] + ".tmp", "wb") as f:
    f.write(head)
    for (n, ne, t), nb in zip(ts, sizes):
        if t == 0:
            f.write((1 + 0.1 * rng.standard_normal(ne[0])).astype(np.float32).tobytes())
        else:
            rows = ne[1]
            for r0 in range(0, rows, 4096):
                k = min(4096, rows - r0)
                f.write((0.02 * rng.standard_normal((k, ne[0]), np.float32)).astype(np.float16).tobytes())
        f.write(b"\0" * (-nb % 32))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
PY
fi
IM=""
if [ -n "${IMATRIX:-}" ]; then
    IM=$IMATRIX
    if [ "$IM" = auto ]; then
        IM="${M%.gguf}.imatrix.dat"
        [ -f "$IM" ] || /usr/bin/python3 - "$M" "$IM" "$(dirname "$0")/../gguf" <<'PY'
import struct, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
from check_gguf_expect import parse
_, _, infos, _ = parse(sys.argv[1])
ents = [(n, ne) for n, ne, t, off in infos if len(ne) >= 2 and n != "token_embd.weight"]
rng = np.random.default_rng(2)
with open(sys.argv[2] + ".tmp", "wb") as f:
    f.write(struct.pack("<i", len(ents)))
    for n, ne in ents:
        nval = ne[0] * (ne[2] if len(ne) > 2 else 1)
        v = np.exp(rng.standard_normal(nval)).astype(np.float32)
        f.write(struct.pack("<i", len(n)) + n.encode() + struct.pack("<ii", 1, nval) + v.tobytes())
import os; os.rename(sys.argv[2] + ".tmp", sys.argv[2])
PY
    fi
fi
echo "model: $M ($(stat -c %s "$M") bytes), threads $T, rounds $R${IM:+, imatrix $IM}"
for ty in $TYPES; do
    out="$D/out-$ty.gguf"
    times=""
    best="" bcpu=""
    i=0
    while [ $i -lt "$R" ]; do
        /usr/bin/time -f "%e %U %S" -o "$D/time" "$AMN" forget "$M" --to "$ty" -o "$out" --force \
            --no-sync --quiet --threads "$T" ${IM:+--imatrix "$IM"}
        read -r w u s <"$D/time"
        times="$times $w"
        if [ -z "$best" ] || [ "$(echo "$w < $best" | bc)" = 1 ]; then
            best=$w bcpu=$(echo "$u + $s" | bc)
        fi
        if [ -n "${LLAMA_QUANTIZE:-}" ]; then
            /usr/bin/time -f "%e %U %S" -o "$D/time" "$LLAMA_QUANTIZE" ${IM:+--imatrix "$IM"} "$M" "$D/lq-$ty.gguf" "$ty" "$T" \
                >"$D/lq.log" 2>&1 || { cat "$D/lq.log"; exit 1; }
            read -r lw lu ls <"$D/time"
            ltimes="${ltimes:-} $lw"
            if [ -z "${lbest:-}" ] || [ "$(echo "$lw < $lbest" | bc)" = 1 ]; then
                lbest=$lw lbcpu=$(echo "$lu + $ls" | bc)
            fi
            # Both in one line a round: wall and CPU (user + sys) seconds.
            echo "$ty round $((i + 1)): amn $w s wall, $(echo "$u + $s" | bc) s CPU; llama-quantize $lw s wall, $(echo "$lu + $ls" | bc) s CPU"
        fi
        i=$((i + 1))
    done
    med=$(echo "$times" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    elems=$("$AMN" parse --json "$out" | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
n = 0
for t in d["tensors"]:
    if t["dtype"] not in ("F32", "F16", "BF16"):
        p = 1
        for x in t["shape"]: p *= x
        n += p
print(n)')
    ns=n/a # a plain file type (F16, BF16, F32) quantizes nothing
    [ "$elems" -gt 0 ] && ns=$(echo "scale=2; $best * 1000000000 / $elems" | bc)
    sha=$(sha256sum "$out" | cut -c1-16)
    echo "$ty: best ${best} s (median ${med} s, CPU ${bcpu} s), $elems quantized elements, ${ns} ns/element, sha256 $sha"
    if [ -n "${LLAMA_QUANTIZE:-}" ]; then
        lmed=$(echo "$ltimes" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
        same=different
        cmp -s "$out" "$D/lq-$ty.gguf" && same=identical
        echo "$ty: llama-quantize best ${lbest} s (median ${lmed} s, CPU ${lbcpu} s); amn $(echo "scale=2; $lbest / $best" | bc)x its speed by wall time, $(echo "scale=2; $lbcpu / $bcpu" | bc)x by CPU time; outputs $same"
        [ $same = identical ] || exit 1
    fi
    ltimes="" lbest="" lbcpu=""
done
