#!/usr/bin/env bash
# Outputs appear whole or not at all: conversions killed with SIGINT, SIGTERM,
# SIGHUP, SIGPIPE and SIGKILL at many points of the write, with O_TMPFILE and
# with the named-temporary fallback (AMN_NO_TMPFILE=1), fresh and replacing
# (--force) an existing output; and a full file system (a small tmpfs when
# this machine lets us mount one, and always the sink's injected ENOSPC).
# After each: no temporary file, and the output is absent, the old file, or
# byte-identical to a complete run.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init interrupt "$1" "$2"
# Every check here reads or writes safetensors: a build without that plugin
# (AMN_PLUGINS) reports the test as skipped.
need_plugin safetensors
mnt=
at_exit '[ -n "$mnt" ] && umount "$mnt" 2>/dev/null'

# 96 MiB of F32 (random bits) -> 48 MiB of BF16: long enough to be caught mid-write.
/usr/bin/python3 - "$work/in.safetensors" <<'PY'
import json, os, struct, sys
n = 32 << 20
hdr = json.dumps({"w%d" % i: {"dtype": "F32", "shape": [n // 4], "data_offsets": [i * n, (i + 1) * n]} for i in range(3)}).encode()
hdr += b" " * (-len(hdr) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(hdr)) + hdr)
    for i in range(3):
        f.write(os.urandom(n))
PY
"$amn" convert "$work/in.safetensors" --to safetensors -o "$work/ref.safetensors" -q || fail "reference run"
printf 'old output\n' >"$work/old"

leftovers() { # leftovers DIR: temporary files left in DIR
  find "$1" -maxdepth 1 -name '.*.amn-*' | wc -l
}

# A temporary exists: a named one in the directory, or an O_TMPFILE inode
# among the process's descriptors ("/dir/#123 (deleted)").
writing() { # writing PID DIR
  [ "$(leftovers "$2")" -gt 0 ] && return 0
  ls -l "/proc/$1/fd" 2>/dev/null | grep -q "$2/#[0-9]* (deleted)"
}

kills=0 midway=0
run_kill() { # run_kill SIG MODE(tmpfile|named) FORCE(0|1) DELAY_MS
  local sig=$1 mode=$2 force=$3 delay=$4 dir=$work/k out
  rm -rf "$dir"; mkdir "$dir"; out=$dir/out.safetensors
  local args=(convert "$work/in.safetensors" --to safetensors -o "$out" -q --threads 1)
  if [ "$force" = 1 ]; then cp "$work/old" "$out"; args+=(--force); fi
  if [ "$mode" = named ]; then export AMN_NO_TMPFILE=1; else unset AMN_NO_TMPFILE; fi
  "$amn" "${args[@]}" 2>/dev/null &
  local pid=$! waited=0 caught=0
  # The conversion is stopped while it is looked at, so on a loaded machine
  # it cannot finish between seeing the temporary and sending the signal.
  while kill -STOP "$pid" 2>/dev/null && [ $waited -le 2000 ]; do
    if writing "$pid" "$dir"; then caught=1; break; fi
    kill -CONT "$pid"; sleep 0.001; waited=$((waited + 1))
  done
  midway=$((midway + caught))
  if [ "$delay" -gt 0 ]; then kill -CONT "$pid" 2>/dev/null; sleep "0.$(printf '%03d' "$delay")"; fi
  kill -s "$sig" "$pid" 2>/dev/null
  kill -CONT "$pid" 2>/dev/null
  wait "$pid"; local rc=$?
  unset AMN_NO_TMPFILE
  kills=$((kills + 1))
  local what="SIG$sig $mode force=$force +${delay}ms"
  if [ "$rc" -ne 0 ] && [ "$rc" -ne $((128 + $(kill -l "$sig"))) ]; then
    fail "$what: exit $rc, wanted $((128 + $(kill -l "$sig"))) or 0"; return
  fi
  local left; left=$(leftovers "$dir")
  # SIGKILL cannot be caught: with a named temporary it is expected to stay.
  if [ "$left" -ne 0 ] && ! { [ "$sig" = KILL ] && [ "$mode" = named ]; }; then
    fail "$what: temporary file left: $(ls -a "$dir")"; return
  fi
  if [ -e "$out" ]; then
    if cmp -s "$out" "$work/ref.safetensors"; then pass
    elif [ "$force" = 1 ] && cmp -s "$out" "$work/old"; then pass
    else fail "$what: partial output ($(stat -c %s "$out") bytes)"; fi
  elif [ "$force" = 1 ]; then fail "$what: the old output is gone"
  else pass; fi
}

for sig in INT TERM HUP PIPE KILL; do
  for mode in tmpfile named; do
    for force in 0 1; do
      for delay in 0 5; do run_kill $sig $mode $force $delay; done
    done
  done
done
echo "$kills kills, $midway caught while the temporary existed"
[ "$midway" -ge $((kills / 2)) ] && pass || fail "too few kills landed during the write ($midway of $kills)"

# An input truncated while it is read through its mapping (AMN_INPUT=map:
# the cast reads the mapped F32 in user space) at a moment no hook chooses:
# the library's size check before each chunk reports "file shrank", or, when
# the cut lands between that check and the read, SIGBUS, which the CLI turns
# into the same I/O error (exit 6, a message), with no output and no
# temporary left (truncate.sh covers every read path deterministically).
# A run that finished before the truncation proves nothing: at least one of
# the tries must land while the output is being written.
bus_landed=0
for try in 1 2 3 4 5 6; do
  dir=$work/b; rm -rf "$dir"; mkdir "$dir"
  cp "$work/in.safetensors" "$dir/in.safetensors"
  AMN_INPUT=map "$amn" convert "$dir/in.safetensors" --to safetensors --out-dtype bf16 \
    -o "$dir/out.safetensors" -q --threads 1 2>"$work/buslog" &
  pid=$! waited=0
  until writing "$pid" "$dir" || ! kill -0 "$pid" 2>/dev/null || [ $waited -gt 2000 ]; do
    sleep 0.001; waited=$((waited + 1))
  done
  landed=0; writing "$pid" "$dir" && landed=1
  truncate -s 4096 "$dir/in.safetensors"
  wait "$pid"; rc=$?
  if [ $rc -eq 0 ] && [ $landed -eq 0 ]; then continue; fi
  if [ $rc -eq 0 ]; then continue; fi # the last bytes were read before the cut
  if [ $rc -ne 6 ]; then fail "truncated input (try $try): exit $rc, wanted 6"; cat "$work/buslog"; continue; fi
  if ! grep -qE "SIGBUS|shrank" "$work/buslog"; then fail "truncated input: message: $(cat "$work/buslog")"; continue; fi
  bus_landed=$((bus_landed + 1))
  grep -q SIGBUS "$work/buslog" && echo "  try $try: ended by SIGBUS"
  if [ -e "$dir/out.safetensors" ] || [ "$(leftovers "$dir")" -ne 0 ]; then
    fail "truncated input: left $(ls -a "$dir")"
  else pass; fi
done
echo "truncated inputs: $bus_landed of 6 tries cut while converting"
[ "$bus_landed" -ge 1 ] && pass || fail "no truncation landed during the conversion"

# The named fallback really registers what it creates, and SIGKILL is the
# one case it cannot clean (documented): check that claim is what happens.
export AMN_NO_TMPFILE=1
"$amn" convert "$work/in.safetensors" --to safetensors -o "$work/n.safetensors" -q --threads 1 &
pid=$!
until [ "$(leftovers "$work")" -gt 0 ] || ! kill -0 $pid 2>/dev/null; do sleep 0.001; done
kill -KILL $pid; wait $pid
find "$work" -maxdepth 1 -name '.*.amn-*' -delete
unset AMN_NO_TMPFILE

# Injected ENOSPC at several points: exit 6, nothing left, the old file kept.
size=$(stat -c %s "$work/ref.safetensors")
for mode in tmpfile named; do
  for at in 0 1 4096 $((1 << 20)) $((size - 1)); do
    dir=$work/f; rm -rf "$dir"; mkdir "$dir"
    [ "$mode" = named ] && export AMN_NO_TMPFILE=1
    AMN_TEST_ENOSPC_AFTER=$at "$amn" convert "$work/in.safetensors" --to safetensors -o "$dir/out" -q >"$work/log" 2>&1
    rc=$?
    cp "$work/old" "$dir/kept"
    AMN_TEST_ENOSPC_AFTER=$at "$amn" convert "$work/in.safetensors" --to safetensors -o "$dir/kept" -q --force >>"$work/log" 2>&1
    rc2=$?
    unset AMN_NO_TMPFILE
    if [ $rc -ne 6 ] || [ $rc2 -ne 6 ] || ! grep -q "No space left on device" "$work/log"; then
      fail "ENOSPC after $at ($mode): exits $rc/$rc2"; cat "$work/log"
    elif [ -e "$dir/out" ] || [ "$(leftovers "$dir")" -ne 0 ] || ! cmp -s "$dir/kept" "$work/old"; then
      fail "ENOSPC after $at ($mode): left $(ls -a "$dir")"
    else pass; fi
  done
  # Exactly the output's size fits.
  [ "$mode" = named ] && export AMN_NO_TMPFILE=1
  AMN_TEST_ENOSPC_AFTER=$size "$amn" convert "$work/in.safetensors" --to safetensors -o "$work/f/fits" -q \
    && cmp -s "$work/f/fits" "$work/ref.safetensors" && pass || fail "ENOSPC hook at the exact size ($mode)"
  unset AMN_NO_TMPFILE
done

# A real full file system, where mounting one is allowed (root, not in every container).
mkdir -p "$work/mnt"
if mount -t tmpfs -o size=8m tmpfs "$work/mnt" 2>/dev/null; then
  mnt=$work/mnt
  for mode in tmpfile named; do
    [ "$mode" = named ] && export AMN_NO_TMPFILE=1
    "$amn" convert "$work/in.safetensors" --to safetensors -o "$mnt/out" -q >"$work/log" 2>&1; rc=$?
    cp "$work/old" "$mnt/kept"
    "$amn" convert "$work/in.safetensors" --to safetensors -o "$mnt/kept" -q --force >>"$work/log" 2>&1; rc2=$?
    unset AMN_NO_TMPFILE
    if [ $rc -ne 6 ] || [ $rc2 -ne 6 ]; then fail "full tmpfs ($mode): exits $rc/$rc2"; cat "$work/log"
    elif [ -e "$mnt/out" ] || [ "$(leftovers "$mnt")" -ne 0 ] || ! cmp -s "$mnt/kept" "$work/old"; then
      fail "full tmpfs ($mode): left $(ls -a "$mnt")"
    elif [ "$(df --output=used -k "$mnt" | tail -1)" -gt 64 ]; then fail "full tmpfs ($mode): space not freed"
    else pass; fi
    rm -f "$mnt/kept"
  done
else
  echo "SKIP: cannot mount a tmpfs here; the injected ENOSPC above stands in for it"
fi

# Permissions: those of open(..., 0666) under the umask, on both paths.
for mode in tmpfile named; do
  for mask in 022 027 077; do
    [ "$mode" = named ] && export AMN_NO_TMPFILE=1
    rm -f "$work/p"
    (umask $mask; "$amn" convert "$src/fixtures/example/tiny-f32.safetensors" --to safetensors -o "$work/p" -q)
    unset AMN_NO_TMPFILE
    want=$(printf '%o' $((0666 & ~8#$mask)))
    got=$(stat -c %a "$work/p")
    [ "$got" = "$want" ] && pass || fail "mode under umask $mask ($mode): $got, wanted $want"
  done
done

finish interrupt
