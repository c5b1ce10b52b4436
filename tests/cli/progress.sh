#!/usr/bin/env bash
# Progress: drawn in place on a terminal (a pseudo-terminal from script(1)),
# never on pipes (no escape codes), plain lines with --progress, nothing with
# --quiet; hostile tensor names cannot reach the terminal raw.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init progress "$1" "$2"
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
need_plugin safetensors
has() { grep -aq -- "$2" "$1"; }
esc=$'\033'

# A tensor named with a terminal title escape, and a plain one.
/usr/bin/python3 - "$work/in.safetensors" <<'PY'
import json, os, struct, sys
n = 4 << 20
names = ["plain.weight", "evil\u001b]0;pwned\u0007.weight"]
hdr = json.dumps({k: {"dtype": "F32", "shape": [n // 4], "data_offsets": [i * n, (i + 1) * n]} for i, k in enumerate(names)}).encode()
hdr += b" " * (-len(hdr) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr)
    f.write(os.urandom(2 * n))
PY
in=$work/in.safetensors
onpty() { # onpty TYPESCRIPT COMMAND: run under a pseudo-terminal
  script -qec "$2" /dev/null >"$1" 2>&1 </dev/null
}

onpty "$work/tty" "'$amn' convert '$in' --to safetensors -o '$work/a.safetensors' --threads 1"
[ $? -eq 0 ] && pass || fail "convert under a pty"
has "$work/tty" "${esc}\[K" && pass || fail "terminal: no line redraw (ESC [K)"
has "$work/tty" "% .* / .*/s  ETA " && pass || { fail "terminal: no percent / rate / ETA"; cat -v "$work/tty"; }
has "$work/tty" "Wrote 2 tensors" && pass || fail "terminal: no summary"
has "$work/tty" "${esc}]0;pwned" && fail "terminal: raw escape from a tensor name" || pass

# stdout redirected, stderr still the terminal: progress stays on stderr.
onpty "$work/tty2" "'$amn' remember '$in' -o '$work/b.safetensors' >'$work/stdout'"
has "$work/stdout" "$esc" && fail "stdout got escape codes" || pass
has "$work/stdout" "Wrote 2 tensors" && pass || fail "stdout: no summary"
has "$work/tty2" "${esc}\[K" && pass || fail "stderr on a terminal: no progress"

# --quiet: nothing at all on the terminal.
onpty "$work/quiet" "'$amn' remember '$in' -o '$work/c.safetensors' --quiet"
[ -s "$work/c.safetensors" ] && pass || fail "--quiet: no output file"
[ "$(tr -d '\r\n' <"$work/quiet" | wc -c)" -eq 0 ] && pass || { fail "--quiet printed:"; cat -v "$work/quiet"; }

# Pipes: no progress, no escape codes.
"$amn" remember "$in" -o "$work/d.safetensors" 2>&1 | cat >"$work/pipe"
has "$work/pipe" "$esc" && fail "pipe got escape codes" || pass
has "$work/pipe" "amn: progress" && fail "pipe got progress without --progress" || pass
has "$work/pipe" "Wrote 2 tensors" && pass || fail "pipe: no summary"

# --progress: plain lines for logs, the last one at 100 %, no escapes, names made safe.
"$amn" remember "$in" -o "$work/e.safetensors" --progress 2>"$work/lines" >/dev/null
has "$work/lines" "$esc" && fail "--progress wrote escape codes" || pass
has "$work/lines" "^amn: progress 100% " && pass || { fail "--progress: no final line"; cat "$work/lines"; }
[ "$(grep -c '^amn: progress' "$work/lines")" -le 4 ] && pass || fail "--progress: too many lines for a short run"
"$amn" remember "$in" -o "$work/f.safetensors" --progress --quiet 2>"$work/lines2" >/dev/null
[ -s "$work/lines2" ] && fail "--quiet must win over --progress" || pass

finish progress
