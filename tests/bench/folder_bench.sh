#!/bin/sh
# Benchmark a model folder conversion (issue #14: "a 2 GB sharded GPTQ
# folder -> BF16 folder at >= 0.9x the rate of cp of the output, peak
# anonymous memory < 64 MiB, same run").
#
#   cmake --build BUILD && tests/bench/folder_bench.sh BUILD [DIR]
#
# Input (made once in DIR, default /tmp/amn-folder-bench): a Llama-8B-shaped
# GPTQ 4-bit, group 128 folder of LAYERS (default 18) decoder layers — q, k,
# v, o, gate, up, down with qweight, qzeros, scales (F16, from a small
# random table), g_idx, and BF16 norms — in two input shards of about 1 GB
# with model.safetensors.index.json, config.json (quantization_config) and a
# tokenizer.json: 2.0 GB at the default. Output: the BF16 folder (about
# 7.8 GB, two shards at the default --shard-size 5GB).
# ROUNDS (default 1) rounds of, each after `sync` with the previous outputs
# removed (untimed):
#   amn remember IN -o OUT --threads THREADS (default 2) --no-sync
#                                  (a whole process; SYNC=1: with its fsyncs)
#   cp -r OUT COPY                 (Debian's cp, which does not fsync either)
# Reports wall and CPU (user + sys) times, the rate against cp (cp time /
# amn time: 1.0 = cp's rate) and two memory figures for amn:
#   peak RssAnon: anonymous resident memory (heap, thread stacks, buffers;
#     not the mapped input nor the page cache), read from /proc/PID/status
#     every 10 ms while amn runs — a sampled peak;
#   VmHWM: the kernel's peak resident set, which also counts the pages of
#     the mapped input amn touched (file-backed, reclaimable).
set -eu
B=${1:?usage: folder_bench.sh BUILD_DIR [DIR]}
D=${2:-/tmp/amn-folder-bench}
R=${ROUNDS:-1}
T=${THREADS:-2}
AMN="$B/bin/amn"
nosync=--no-sync
[ "${SYNC:-0}" = 1 ] && nosync=
IN="$D/Bench-8B-GPTQ-Int4"
mkdir -p "$D"
if [ ! -f "$IN/model.safetensors.index.json" ]; then
    /usr/bin/python3 - "$IN" "${LAYERS:-18}" <<'PY'
import json, os, struct, sys
import numpy as np
d, layers = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
H, I, KV, G = 4096, 14336, 1024, 128
mods = [("self_attn.q_proj", H, H), ("self_attn.k_proj", H, KV), ("self_attn.v_proj", H, KV),
        ("self_attn.o_proj", H, H), ("mlp.gate_proj", H, I), ("mlp.up_proj", H, I),
        ("mlp.down_proj", I, H)]
rng = np.random.default_rng(14)
scale_tab = rng.uniform(0.001, 0.01, 1 << 16).astype(np.float16).tobytes()
def scales(n):  # F16 scales from a small table: no NaN or Inf
    return (scale_tab * (n // len(scale_tab) + 1))[:n]
tensors = []  # (name, dtype, shape, nbytes, fill)
for l in range(layers):
    p = f"model.layers.{l}."
    tensors.append((p + "input_layernorm.weight", "BF16", [H], 2 * H, None))
    tensors.append((p + "post_attention_layernorm.weight", "BF16", [H], 2 * H, None))
    for m, k, n in mods:
        q = p + m
        tensors += [(q + ".g_idx", "I32", [k], 4 * k, "gidx"),
                    (q + ".qweight", "I32", [k // 8, n], 4 * k // 8 * n, None),
                    (q + ".qzeros", "I32", [k // G, n // 8], 4 * k // G * n // 8, None),
                    (q + ".scales", "F16", [k // G, n], 2 * k // G * n, "scales")]
tensors.sort(key=lambda t: t[0])
half = len(tensors) // 2
wm = {}
for s, part in enumerate((tensors[:half], tensors[half:])):
    fn = f"model-{s + 1:05d}-of-00002.safetensors"
    hdr, off = {}, 0
    for name, dt, shape, nb, _ in part:
        hdr[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
        wm[name] = fn
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, fn), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for name, dt, shape, nb, fill in part:
            if fill == "gidx":
                f.write((np.arange(shape[0], dtype=np.int32) // G).tobytes())
            elif fill == "scales":
                f.write(scales(nb))
            elif dt == "BF16":
                f.write(b"\x80\x3f" * (nb // 2))
            else:
                for o in range(0, nb, 64 << 20):
                    f.write(os.urandom(min(64 << 20, nb - o)))
total = sum(t[3] for t in tensors)
with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2, sort_keys=True)
qc = {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": False, "sym": True}
with open(os.path.join(d, "config.json"), "w") as f:
    json.dump({"architectures": ["LlamaForCausalLM"], "hidden_size": H, "num_hidden_layers": layers,
               "torch_dtype": "float16", "quantization_config": qc}, f, indent=2)
with open(os.path.join(d, "tokenizer.json"), "w") as f:
    f.write('{"model": {"type": "BPE"}}\n')
PY
fi
cat "$IN"/*.safetensors >/dev/null
insz=$(du -sb "$IN" | cut -f1)

OUT="$D/out" COPY="$D/copy"
: >"$D/amn.t"
: >"$D/cp.t"
: >"$D/mem.t"
i=0
while [ "$i" -lt "$R" ]; do
    rm -rf "$OUT" "$COPY"
    sync
    /usr/bin/time -f "%e %U %S %M" -a -o "$D/amn.t" \
        "$AMN" remember "$IN" -o "$OUT" --threads "$T" $nosync -q &
    tp=$!
    # The amn process is the child of time: sample its RssAnon until it ends.
    pid=""
    while [ -z "$pid" ] && kill -0 "$tp" 2>/dev/null; do
        pid=$(pgrep -P "$tp" || true)
        [ -n "$pid" ] || sleep 0.005
    done
    peak=0 hwm=0
    while [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; do
        a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        h=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
        [ -n "$a" ] && [ "$a" -gt "$peak" ] && peak=$a
        [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
        sleep 0.01
    done
    wait "$tp"
    echo "$peak $hwm" >>"$D/mem.t"
    sync
    /usr/bin/time -f "%e %U %S %M" -a -o "$D/cp.t" cp -r "$OUT" "$COPY"
    i=$((i + 1))
done
outsz=$(du -sb "$OUT" | cut -f1)
shards=$(ls "$OUT" | grep -c '\.safetensors$')
awk -v insz="$insz" -v outsz="$outsz" -v sh="$shards" -v thr="$T" -v sync="${SYNC:-0}" \
    -v load="$(cut -d' ' -f1-3 /proc/loadavg)" '
    function best(a, n,   i, m) { m = a[1]; for (i = 2; i <= n; i++) if (a[i] < m) m = a[i]; return m }
    FILENAME ~ /amn.t$/ { na++; aw[na] = $1; ac[na] = $2 + $3 }
    FILENAME ~ /cp.t$/ { nc++; cw[nc] = $1; cc[nc] = $2 + $3 }
    FILENAME ~ /mem.t$/ { if ($1 > pk) pk = $1; if ($2 > hw) hw = $2 }
    END {
        a = best(aw, na); c = best(cw, nc)
        printf "folder: %.2f GB in -> %.2f GB out (%d shards), %d round(s), --threads %d%s, load average %s\n",
               insz / 1e9, outsz / 1e9, sh, na, thr, sync == 1 ? "" : " --no-sync", load
        printf "wall: amn %.2f s (%.0f MB/s out), cp -r %.2f s; rate vs cp %.2fx. cpu (user+sys): amn %.2f s, cp %.2f s\n",
               a, outsz / a / 1e6, c, c / a, best(ac, na), best(cc, nc)
        printf "amn memory: peak RssAnon %.1f MiB (sampled every 10 ms), VmHWM %.1f MiB (counts the mapped input)\n",
               pk / 1024, hw / 1024
    }' "$D/amn.t" "$D/cp.t" "$D/mem.t"
rm -rf "$OUT" "$COPY"
