#!/usr/bin/env bash
# amn inspect FILE...: one file is reported as before; several files each get
# their report (text: "File:" first; --json: {"files": [...]}, an error entry
# for a file that fails), the rest still run after a failure, and the exit
# code is the first failure's.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init inspect-many "$1" "$2"
need_plugin safetensors
ex=$src/fixtures/example
a=$ex/tiny-f32.safetensors b=$ex/tiny-fp8.safetensors
printf 'not a model' >"$work/junk.dat"
run() { # run WANT_RC ARGS... (stdout in $work/out, stderr in $work/err)
  local want=$1; shift
  "$amn" "$@" >"$work/out" 2>"$work/err"; local rc=$?
  [ "$rc" -eq "$want" ] && pass || { fail "amn $*: exit $rc, wanted $want"; cat "$work/err"; }
}

# One file: exactly the single-file report (no File: line, a bare document).
run 0 inspect "$a"
grep -q '^File:' "$work/out" && fail "one file printed File:" || pass
"$amn" inspect "$a" --json >"$work/one.json" && pass || fail "one file --json"
[ "$(field "$work/one.json" 'd["file"]')" = "$a" ] && pass || fail "one file --json: not the bare document"

# Several files, all good: each report, in order, each the one-file report.
run 0 inspect "$a" "$b"
[ "$(grep -c '^File:' "$work/out")" -eq 2 ] && pass || fail "two File: lines"
[ "$(grep '^File:' "$work/out" | sed 's/^File: *//' | tr '\n' ' ')" = "$a $b " ] && pass ||
  fail "File: lines out of order"
"$amn" inspect "$b" >"$work/single"
sed -n '/^File: *.*tiny-fp8/,$p' "$work/out" | tail -n +2 | diff - "$work/single" >/dev/null && pass ||
  fail "second report differs from a one-file run"

# A failure in the middle: reported, the rest still run, exit = first failure.
run 1 inspect "$a" "$work/junk.dat" "$work/missing" "$b"
[ "$(grep -c '^Format:' "$work/out")" -eq 2 ] && pass || fail "files after a failure not inspected"
grep -q 'junk.dat: unrecognised file format' "$work/err" && pass || fail "parse error not reported"
grep -q 'missing: no such file' "$work/err" && pass || fail "i/o error not reported"
run 6 inspect "$work/missing" "$work/junk.dat"

# --json: {"files": [...]}, one entry per FILE, errors inside; nothing on stderr.
run 1 inspect --json "$a" "$work/junk.dat" "$work/missing" "$b"
[ ! -s "$work/err" ] && pass || fail "--json wrote to stderr"
[ "$(field "$work/out" 'len(d["files"])')" = 4 ] && pass || fail "--json: not 4 entries"
[ "$(field "$work/out" 'd["files"][0]["tensor_count"]')" = 4 ] && pass || fail "--json: first entry"
[ "$(field "$work/out" 'd["files"][1]["error"]["class"]')" = parse ] && pass || fail "--json: parse entry"
[ "$(field "$work/out" 'd["files"][2]["error"]["exit_code"]')" = 6 ] && pass || fail "--json: io entry"
[ "$(field "$work/out" 'd["files"][3]["file"]')" = "$b" ] && pass || fail "--json: last entry"
"$amn" inspect --json "$b" >"$work/b.json"
[ "$(field "$work/out" 'd["files"][3] == json.load(open("'"$work/b.json"'"))')" = True ] && pass ||
  fail "--json: an entry differs from the one-file document"

# Many files in one run (the batch the option exists for).
for i in $(seq 1 200); do cp "$a" "$work/m$i.safetensors"; done
"$amn" inspect "$work"/m*.safetensors >"$work/out" 2>"$work/err" && pass ||
  { fail "200 files: exit $?"; head -3 "$work/err"; }
[ "$(grep -c '^Tensors: *4' "$work/out")" -eq 200 ] && pass || fail "200 files: not 200 reports"

# Only inspect takes several files.
run 2 parse "$a" "$b"

finish inspect_many
