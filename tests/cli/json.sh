#!/usr/bin/env bash
# --json on every command parses (python3 -m json.tool) for inputs whose
# names hold quotes, backslashes, newlines and non-ASCII; errors under --json
# are one JSON object on stderr; every exit-code class of the README table.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init json "$1" "$2"
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
need_plugin safetensors
ex=$src/fixtures/example

valid_json() { # valid_json WHAT FILE
  if $py -m json.tool "$2" >/dev/null 2>&1; then pass; else fail "$1: not JSON:"; indent "$2"; fi
}
run_json() { # run_json WHAT WANT_RC ARGS...: stdout JSON on success, stderr JSON on failure
  local what=$1 want=$2; shift 2
  "$amn" "$@" >"$work/out" 2>"$work/err"; local rc=$?
  [ $rc -eq "$want" ] && pass || { fail "$what: exit $rc, wanted $want"; cat "$work/err"; return; }
  if [ "$want" -eq 0 ]; then valid_json "$what" "$work/out"
  else
    valid_json "$what (error)" "$work/err"
    [ "$(field "$work/err" 'd["error"]["exit_code"]')" = "$want" ] && pass || fail "$what: exit_code field"
    [ -s "$work/out" ] && fail "$what: stdout not empty on error" || pass
  fi
}

names=('q"uote' $'new\nline' 'ünïcødé-模型' $'all"\\\n\xc3\xa9\t')
inputs=("$ex/tiny-f32.safetensors:safetensors")
have format gguf && inputs+=("$src/fixtures/gguf/tiny-quant.gguf:gguf")
have format npz && inputs+=("$src/fixtures/npz/stored.npz:npz")
have format pth && inputs+=("$src/fixtures/pth/state_dict.pth:pth")
i=0
for entry in "${inputs[@]}"; do
  f=${entry%:*} ext=${f##*.}
  for n in "${names[@]}"; do
    i=$((i + 1)); d="$work/d$i/$n"; mkdir -p "$d"
    in="$d/$n.$ext"; cp "$f" "$in"
    run_json "parse $ext '$n'" 0 parse --json "$in"
    [ "$(field "$work/out" 'd["file"]')" = "$in" ] && pass || fail "parse $ext: file name not kept"
    run_json "inspect $ext '$n'" 0 inspect --json "$in"
    run_json "remember $ext '$n'" 0 remember --json "$in"
    out=$(field "$work/out" 'd["output"]')
    [ -f "$out" ] && pass || fail "remember $ext: output '$out' does not exist"
    run_json "convert $ext '$n'" 0 convert --json "$in" --to safetensors --out-dtype f32 -o "$d/$n-out.safetensors"
    [ "$(field "$work/out" 'd["output"]')" = "$d/$n-out.safetensors" ] && pass || fail "convert: output field"
    run_json "error $ext '$n'" 2 remember --json "$in" -o "$d/$n-out.safetensors"
    run_json "missing '$n'" 6 inspect --json "$d/$n.missing"
  done
done
run_json "plugins" 0 plugins --json
[ "$(field "$work/out" 'len(d["matrix"]["targets"]) > 0')" = True ] && pass || fail "plugins: no targets"
# remember of a quantized file: per-group labels and counts.
if have format gguf; then
  run_json "remember gguf groups" 0 remember --json "$src/fixtures/gguf/tiny-quant.gguf" -o "$work/g.safetensors"
  [ "$(field "$work/out" 'd["dequantized"] == len(d["groups"]) == sum(d["labels"].values()) > 0')" = True ] \
    && pass || fail "remember gguf: groups / labels / dequantized disagree"
  [ "$(field "$work/out" 'd["bytes"] > 0 and d["seconds"] >= 0 and d["tensors"] > 0')" = True ] && pass || fail "remember gguf: counts"
fi
# A tensor name that is not UTF-8 (GGUF names are bytes) still gives valid JSON.
if have format gguf; then
  $py - "$work/bad-name.gguf" <<'PY'
import struct, sys
def s(b): return struct.pack("<Q", len(b)) + b
name = b"w\xff\xfe\"\\\n\x01"
h = b"GGUF" + struct.pack("<IQQ", 3, 1, 0)
h += s(name) + struct.pack("<I", 1) + struct.pack("<Q", 4) + struct.pack("<I", 0) + struct.pack("<Q", 0)
h += b"\0" * (-len(h) % 32)
open(sys.argv[1], "wb").write(h + struct.pack("<4f", 1, 2, 3, 4))
PY
  run_json "parse non-UTF-8 name" 0 parse --json "$work/bad-name.gguf"
  [ "$(field "$work/out" 'd["tensors"][0]["name"]')" = $'w\xef\xbf\xbd\xef\xbf\xbd"\\\n\x01' ] && pass || fail "non-UTF-8 name not replaced by U+FFFD"
fi

# Every exit-code class of the README table, as text and as JSON.
printf 'garbage!' >"$work/junk.dat"
cp "$ex/tiny-f32.safetensors" "$work/t.safetensors"
classes=(
  "0 ok: inspect $work/t.safetensors"
  "1 parse: inspect $work/junk.dat"
  "2 invalid_argument: inspect $work/t.safetensors --bogus"
  "2 invalid_argument: remember $work/t.safetensors -o $work/t.safetensors --force"
  "3 unsupported: convert $work/t.safetensors --to nosuchformat -o $work/x"
  "4 limit_exceeded: inspect $work/t.safetensors --max-items 1"
  "6 io: inspect $work/nope.safetensors"
)
have format pth && classes+=("5 disallowed: parse $src/fixtures/pth/hostile_system.pth")
if have format npz; then
  # 256 MiB to inflate under a 160 MiB address-space cap: out of memory.
  $py - "$work/big.npz" <<'PY'
import io, struct, sys, zipfile
n = 256 << 20
hdr = b"{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % n
hdr += b" " * (-(len(hdr) + 11) % 64) + b"\n"
npy = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("a.npy", "w", force_zip64=True) as f:
        f.write(npy)
        chunk = bytes(range(256)) * 4096  # 1 MiB, compresses about 100:1
        for _ in range(n // len(chunk)):
            f.write(chunk)
PY
  # A sanitizer build cannot start under an address-space cap at all.
  if (ulimit -v 163840; exec "$amn" --version) >/dev/null 2>&1; then
    classes+=("7 out_of_memory: parse $work/big.npz")
  else
    echo "SKIP: class out_of_memory: amn does not start under ulimit -v (sanitizer build)"
  fi
fi
for c in "${classes[@]}"; do
  want=${c%% *} rest=${c#* } cls=${rest%%:*} args=${rest#*: }
  # shellcheck disable=SC2086
  if [ "$want" = 7 ]; then (ulimit -v 163840; exec "$amn" $args) >"$work/out" 2>&1; else "$amn" $args >"$work/out" 2>&1; fi
  rc=$?
  [ $rc -eq "$want" ] && pass || { fail "class $cls: exit $rc, wanted $want"; cat "$work/out"; }
  if [ "$want" = 7 ]; then (ulimit -v 163840; exec "$amn" $args --json) >/dev/null 2>"$work/err"; else "$amn" $args --json >/dev/null 2>"$work/err"; fi
  rc=$?
  [ $rc -eq "$want" ] && pass || fail "class $cls --json: exit $rc"
  if [ "$want" != 0 ]; then
    valid_json "class $cls" "$work/err"
    [ "$(field "$work/err" 'd["error"]["class"] + " " + str(d["error"]["exit_code"])')" = "$cls $want" ] \
      && pass || { fail "class $cls: JSON error object"; cat "$work/err"; }
  fi
done
# Usage errors before any command, under --json.
run_json "unknown command" 2 frobnicate --json
run_json "bad limit" 2 inspect "$work/t.safetensors" --json --max-items 9T

finish json
