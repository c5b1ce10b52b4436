#!/usr/bin/env bash
# --resume and --dedup-tied (issue #14, items 3 and 6). A GPTQ folder (made
# by folders.py, six output shards at --shard-size 5KB) is converted with
# AMN_TEST_FOLDER_KILL_AFTER=N — a test-only hook that SIGKILLs amn once N
# shards are complete and in the manifest (past the last shard: just before
# the rename) — then `--resume` must finish it with the bytes of an
# uninterrupted run (diff -r) and nothing left beside it. Also: a shard
# truncated or with a flipped byte is rewritten, a stray partial file goes,
# an input changed or other options start over (the old folder removed), a
# manifest that is not ours (garbage, wrong types, huge, a symlink, deep
# nesting) is left alone and the run starts over, a folder another amn holds
# locked is not taken, --resume with nothing to resume just runs, and bad
# combinations are usage errors. --dedup-tied: lm_head.weight left out only
# when config.json ties it and its bytes equal the embeddings (also a .bin
# with one storage under both names).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init resume "$1" "$2"
gen=$src/tests/folders/folders.py
for p in safetensors gptq; do
  need_plugin "$p" "\(format\|scheme\) $p "
done
need_python numpy
leftovers() { find "$work" -maxdepth 1 -name '.outd.amn-*' | sort; }
same_as_ref() { # same_as_ref WHAT: $work/out-dir equals the uninterrupted run, nothing left beside it
  diff -r "$work/ref" "$work/outd" >/dev/null && pass || { fail "$1: output differs"; diff -r "$work/ref" "$work/outd" | head -5; }
  [ -z "$(leftovers)" ] && pass || fail "$1: temporaries left: $(leftovers)"
  rm -rf "$work/outd"
}
"$py" "$gen" make "$work/in" >/dev/null || { echo "FAIL: folders.py make"; exit 1; }
in=$work/in/gptq
conv=("$amn" remember --no-sync "$in" -o "$work/outd" --shard-size 5KB)
run_rc "reference" 0 "${conv[@]}" -q
mv "$work/outd" "$work/ref"
[ "$(ls "$work/ref" | grep -c '^model-.*-of-00006')" -eq 6 ] && pass || fail "reference: not 6 shards"
killed() { # killed N [OPTIONS]: a run SIGKILLed after N shards, its folder left
  AMN_TEST_FOLDER_KILL_AFTER=$1 "${conv[@]}" -q "${@:2}" >/dev/null 2>&1
  local rc=$?
  [ "$rc" -eq 137 ] && pass || fail "kill after $1: exit $rc, wanted 137 (SIGKILL)"
  [ -n "$(leftovers)" ] && [ ! -e "$work/outd" ] && pass || fail "kill after $1: no temporary folder"
}

# Killed after 1, 3 and 6 shards and before the rename; resumed.
for n in 1 3 6 7; do
  killed $n
  run_rc "resume after $n" 0 "${conv[@]}" --resume
  kept=$((n > 6 ? 6 : n))
  matches "resume after $n" "$kept shards\? kept from the interrupted run"
  same_as_ref "resume after $n"
done
# Without --resume a leftover is kept and named; the run does not use it.
killed 2
run_rc "no --resume" 0 "${conv[@]}"
matches "no --resume" "is left from an interrupted conversion; --resume would continue it"
[ -n "$(leftovers)" ] && pass || fail "no --resume: the leftover was removed"
diff -r "$work/ref" "$work/outd" >/dev/null && pass || fail "no --resume: output differs"
run_rc "then --resume with the target there" 2 "${conv[@]}" --resume
matches "then --resume with the target there" "already exists"
rm -rf "$work/outd"
run_rc "then --resume" 0 "${conv[@]}" --resume
matches "then --resume" "2 shards kept"
same_as_ref "then --resume"

# SIGINT (handled): without --resume the folder goes, with it it stays.
AMN_TEST_FOLDER_KILL_AFTER=2 AMN_TEST_FOLDER_KILL_SIGNAL=2 "${conv[@]}" -q >/dev/null 2>&1
[ $? -eq 130 ] && [ -z "$(leftovers)" ] && pass || fail "SIGINT without --resume: $(leftovers)"
AMN_TEST_FOLDER_KILL_AFTER=2 AMN_TEST_FOLDER_KILL_SIGNAL=2 "${conv[@]}" -q --resume >/dev/null 2>&1
[ $? -eq 130 ] && [ -n "$(leftovers)" ] && pass || fail "SIGINT with --resume: nothing kept"
run_rc "resume after SIGINT" 0 "${conv[@]}" --resume
matches "resume after SIGINT" "2 shards kept"
same_as_ref "resume after SIGINT"

# Damaged shards are written again; stray files go.
killed 3
tmp=$(leftovers)
truncate -s -1 "$tmp/model-00002-of-00006.safetensors"
printf 'partial' >"$tmp/.model-00004-of-00006.safetensors.amn-abcdefghij"
printf 'junk' >"$tmp/model.safetensors.index.json"
run_rc "resume, a shard truncated" 0 "${conv[@]}" --resume
matches "resume, a shard truncated" "2 shards kept"
same_as_ref "resume, a shard truncated"
killed 3
tmp=$(leftovers)
"$py" -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[-3] ^= 0x40; open(p, 'wb').write(b)" \
  "$tmp/model-00003-of-00006.safetensors"
run_rc "resume, a byte flipped" 0 "${conv[@]}" --resume
matches "resume, a byte flipped" "2 shards kept"
same_as_ref "resume, a byte flipped"

# The input or the options changed: the old folder removed, started over.
killed 3
touch -d '2001-01-01' "$in/tokenizer.json"
run_rc "resume, input changed" 0 "${conv[@]}" --resume
matches "resume, input changed" "left by a conversion with other inputs or options"
matches "resume, input changed" "no interrupted conversion of .* to resume; starting it"
same_as_ref "resume, input changed"
killed 3
run_rc "resume, other options" 0 "${conv[@]}" --resume --to f16
matches "resume, other options" "left by a conversion with other inputs or options"
[ -z "$(leftovers)" ] && pass || fail "other options: leftover kept"
rm -rf "$work/outd"
run_rc "resume, nothing to resume" 0 "${conv[@]}" --resume
matches "resume, nothing to resume" "no interrupted conversion"
same_as_ref "resume, nothing to resume"

# Manifests that are not ours: the folder left alone, the run starts over.
hostile() { # hostile WHAT: after writing $tmp/.amn-resume.json
  run_rc "hostile manifest: $1" 0 "${conv[@]}" --resume
  matches "hostile manifest: $1" "no interrupted conversion"
  diff -r "$work/ref" "$work/outd" >/dev/null && pass || fail "hostile manifest $1: output differs"
  [ "$(leftovers)" = "$tmp" ] && pass || fail "hostile manifest $1: leftovers: $(leftovers)"
  rm -rf "$work/outd" "$tmp"
}
m=.amn-resume.json
killed 3
mv "$(leftovers)" "$work/saved"
h=0
copy() { h=$((h + 1)); tmp=$work/.outd.amn-hostl$h; cp -a "$work/saved" "$tmp"; }
copy && printf '\x00\xff{garbage' >"$tmp/$m" && hostile garbage
copy && echo '{"amn_resume": 1, "identity": 7, "shards": []}' >"$tmp/$m" && hostile types
copy && echo '{"amn_resume": 1, "identity": "x", "shards": {"../../x": {"size": -1, "xxh64": "zz"}}}' >"$tmp/$m" && hostile "bad shard"
copy && "$py" -c "print('[' * 100000 + ']' * 100000)" >"$tmp/$m" && hostile deep
copy && truncate -s 20M "$tmp/$m" && hostile huge
copy && mv "$tmp/$m" "$work/elsewhere.json" && ln -s "$work/elsewhere.json" "$tmp/$m" && hostile symlink
copy && : >"$tmp/$m" && hostile empty
copy && sed -i 's/}$/} trailing/' "$tmp/$m" && hostile "trailing text"
rm -rf "$work/saved"
# The right identity with a shard's record changed: that shard written again.
killed 3
tmp=$(leftovers)
"$py" -c "import json, sys; p = sys.argv[1]; m = json.load(open(p)); e = m['shards']['model-00001-of-00006.safetensors']; e['xxh64'] = '%016x' % (int(e['xxh64'], 16) ^ 1); json.dump(m, open(p, 'w'))" "$tmp/$m"
run_rc "resume, a hash changed" 0 "${conv[@]}" --resume
matches "resume, a hash changed" "2 shards kept"
same_as_ref "resume, a hash changed"

# A folder another amn holds locked is not taken.
killed 3
tmp=$(leftovers)
"$py" -c "import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_EX)
open(sys.argv[2], 'w').close()
time.sleep(60)" "$tmp" "$work/locked" &
holder=$!
for _ in $(seq 50); do [ -e "$work/locked" ] && break; sleep 0.1; done
run_rc "resume, locked" 0 "${conv[@]}" --resume
matches "resume, locked" "no interrupted conversion"
[ "$(leftovers)" = "$tmp" ] && pass || fail "locked: leftovers: $(leftovers)"
kill "$holder" 2>/dev/null
wait "$holder" 2>/dev/null
rm -rf "$work/outd"
run_rc "resume after the lock" 0 "${conv[@]}" --resume
matches "resume after the lock" "3 shards kept"
same_as_ref "resume after the lock"

# Bad combinations.
run_rc "--resume with --only-shards" 2 "${conv[@]}" --resume --only-shards 1
matches "--resume with --only-shards" "--resume continues a whole folder"
run_rc "--resume to one file" 2 "$amn" remember "$in" -o "$work/one.safetensors" --resume
matches "--resume to one file" "write a model folder"
run_rc "--dedup-tied to one file" 2 "$amn" remember "$in" -o "$work/one.safetensors" --dedup-tied
[ ! -e "$work/one.safetensors" ] && pass || fail "usage error wrote a file"

# forget into a folder, interrupted and resumed.
if have "encode bnb"; then
  fconv=("$amn" forget --no-sync "$work/in/plain" --to bnb-nf4 -o "$work/nf4" --shard-size 5KB -q)
  run_rc "forget reference" 0 "${fconv[@]}"
  mv "$work/nf4" "$work/nf4-ref"
  AMN_TEST_FOLDER_KILL_AFTER=2 "${fconv[@]}" >/dev/null 2>&1
  run_rc "forget resume" 0 "${fconv[@]}" --resume
  diff -r "$work/nf4-ref" "$work/nf4" >/dev/null && pass || fail "forget resume: output differs"
  # Every shard kept: quantization_config still in config.json.
  AMN_TEST_FOLDER_KILL_AFTER=99 "${fconv[@]}" >/dev/null 2>&1
  rm -rf "$work/nf4"
  run_rc "forget resume, all kept" 0 "${fconv[@]}" --resume
  diff -r "$work/nf4-ref" "$work/nf4" >/dev/null && pass || fail "forget resume all kept: differs"
  [ -z "$(find "$work" -maxdepth 1 -name '.nf4.amn-*')" ] && pass || fail "forget: leftovers"
fi

# --dedup-tied.
"$py" "$gen" make-tied "$work/t" || fail "folders.py make-tied"
names() { "$py" -c "import sys; sys.path.insert(0, sys.argv[2]); from folders import read_st; print(' '.join(sorted(read_st(sys.argv[1]))))" "$1" "$src/tests/folders"; }
run_rc "tied" 0 "$amn" remember --no-sync "$work/t/tied" -o "$work/t-out/" --dedup-tied
matches "tied" "lm_head.weight left out (tied to model.embed_tokens.weight)"
[ "$(names "$work/t-out/model.safetensors")" = "model.embed_tokens.weight model.norm.weight" ] && pass ||
  fail "tied: tensors $(names "$work/t-out/model.safetensors")"
run_rc "tied, without the flag" 0 "$amn" remember --no-sync "$work/t/tied" -o "$work/t-all/"
[ "$(names "$work/t-all/model.safetensors")" = "lm_head.weight model.embed_tokens.weight model.norm.weight" ] && pass ||
  fail "tied without --dedup-tied: tensors $(names "$work/t-all/model.safetensors")"
"$py" - "$work/t-out/model.safetensors" "$work/t-all/model.safetensors" "$src/tests/folders" <<'EOF' && pass || fail "tied: kept tensors differ"
import sys
sys.path.insert(0, sys.argv[3])
from folders import read_st
a, b = read_st(sys.argv[1]), read_st(sys.argv[2])
assert all(a[k] == b[k] for k in a), "bytes differ"
EOF
run_rc "tied, --shard-size (index)" 0 "$amn" remember --no-sync "$work/t/tied" -o "$work/t-idx/" --dedup-tied --shard-size 4100
[ -f "$work/t-idx/model.safetensors.index.json" ] && ! grep -q lm_head "$work/t-idx/model.safetensors.index.json" &&
  pass || fail "tied: no index, or lm_head in it"
run_rc "tied-diff" 0 "$amn" remember --no-sync "$work/t/tied-diff" -o "$work/t-diff/" --dedup-tied
matches "tied-diff" "lm_head.weight differs from model.embed_tokens.weight; kept"
[ "$(names "$work/t-diff/model.safetensors" | wc -w)" -eq 3 ] && pass || fail "tied-diff: lm_head dropped"
run_rc "tied-off" 0 "$amn" remember --no-sync "$work/t/tied-off" -o "$work/t-off/" --dedup-tied
matches "tied-off" "does not say \"tie_word_embeddings\": true"
[ "$(names "$work/t-off/model.safetensors" | wc -w)" -eq 3 ] && pass || fail "tied-off: lm_head dropped"
if [ -f "$work/t/tied-bin/pytorch_model.bin" ] && have "format pth "; then
  run_rc "tied .bin" 0 "$amn" remember --no-sync "$work/t/tied-bin/pytorch_model.bin" -o "$work/t-bin/" --dedup-tied
  matches "tied .bin" "left out (tied to model.embed_tokens.weight)"
  [ "$(names "$work/t-bin/model.safetensors")" = "model.embed_tokens.weight model.norm.weight" ] && pass ||
    fail "tied .bin: tensors $(names "$work/t-bin/model.safetensors")"
fi

finish folders_resume
