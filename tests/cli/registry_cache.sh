#!/usr/bin/env bash
# The registry cache (doc/plugins.md, "Registry cache"): written on the first run,
# used on the next (only the plugins a file needs are loaded), refreshed when
# a plugin file is touched, replaced, removed or added, ignored and rewritten
# when damaged; outputs identical with and without it.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init regcache "$1" "$2"
plugdir=$build/lib/amn/plugins
has() { [ -e "$plugdir/amn-$1.so" ]; }

shopt -s nullglob
mods=("$plugdir"/amn-*.so)
[ ${#mods[@]} -gt 0 ] || skip "no plugin modules (static build)"
mkdir -p "$work/plugins" "$work/cache"
cp "${mods[@]}" "$work/plugins/"
export AMN_PLUGIN_SYSTEM_PATH=$work/plugins AMN_REGISTRY_CACHE_DIR=$work/cache
unset AMN_PLUGIN_PATH AMN_REGISTRY_CACHE
traced() { AMN_REGISTRY_TRACE=1 "$@"; }
# A run that makes a registry but needs no plugin: no probe signature matches
# a text file (it is "unrecognised").
printf 'hello\n' >"$work/plain.txt"
noop() { "$amn" inspect "$work/plain.txt"; }
cachefile() { set -- "$work/cache"/registry-*.cache; echo "${1:-}"; }

st=$src/fixtures/example/tiny-f32.safetensors
fp8=$src/fixtures/example/tiny-fp8.safetensors

# 1. First run: no cache, every module loaded, the cache written.
traced noop >/dev/null 2>"$work/t1"
if grep -q "absent or invalid" "$work/t1" && grep -q "written" "$work/t1" && [ -s "$(cachefile)" ]; then pass; else fail "first run did not write the cache"; cat "$work/t1"; fi
n_mods=$(grep -c "not in the cache" "$work/t1")
[ "$n_mods" -eq ${#mods[@]} ] && pass || fail "first run loaded $n_mods of ${#mods[@]} modules"

# 2. Second run: read, nothing loaded for a file no plugin claims, nothing rewritten.
traced noop >/dev/null 2>"$work/t2"
if grep -q "read (${#mods[@]} plugins)" "$work/t2" && ! grep -q "load \|written" "$work/t2"; then pass; else fail "second run did not use the cache"; cat "$work/t2"; fi

# 3. inspect loads the plugin that claims the file and no other.
if has safetensors; then
  traced "$amn" inspect "$st" >"$work/o-cached" 2>"$work/t3"
  loads=$(grep -c "load " "$work/t3")
  if grep -q "load safetensors: a probe signature matches" "$work/t3" && [ "$loads" -eq 1 ]; then pass; else fail "inspect of a plain file loaded: $(grep 'load ' "$work/t3" | tr '\n' ';')"; fi
  AMN_REGISTRY_CACHE=0 "$amn" inspect "$st" >"$work/o-plain"
  cmp -s "$work/o-cached" "$work/o-plain" && pass || fail "inspect output differs with the cache"
  AMN_REGISTRY_CACHE=0 traced noop >/dev/null 2>"$work/t3b"
  grep -q "cache disabled" "$work/t3b" && [ "$(grep -c 'not in the cache' "$work/t3b")" -eq ${#mods[@]} ] && pass || fail "AMN_REGISTRY_CACHE=0 did not disable it"
else
  skips=$((skips + 1))
fi

# 4. Outputs identical with and without the cache: inspect (text and JSON) of
# a quantized file, remember, plugins, and the missing-plugin messages.
if has safetensors && has fp8; then
  for args in "inspect $fp8" "inspect --json $fp8" "inspect $st $fp8" "plugins"; do
    # shellcheck disable=SC2086
    "$amn" $args >"$work/a" 2>&1; ra=$?
    # shellcheck disable=SC2086
    AMN_REGISTRY_CACHE=0 "$amn" $args >"$work/b" 2>&1; rb=$?
    if [ $ra -eq $rb ] && cmp -s "$work/a" "$work/b"; then pass; else fail "amn $args differs with the cache"; diff "$work/a" "$work/b" | head; fi
  done
  traced "$amn" inspect "$fp8" >/dev/null 2>"$work/t4"
  grep -q "load fp8: a detect key matches" "$work/t4" && ! grep -q "load gptq" "$work/t4" && pass || fail "inspect of an FP8 file: $(grep 'load ' "$work/t4" | tr '\n' ';')"
  "$amn" remember "$fp8" -o "$work/r1.safetensors" >/dev/null 2>&1; ra=$?
  AMN_REGISTRY_CACHE=0 "$amn" remember "$fp8" -o "$work/r2.safetensors" >/dev/null 2>&1; rb=$?
  if [ $ra -eq 0 ] && [ $rb -eq 0 ] && cmp -s "$work/r1.safetensors" "$work/r2.safetensors"; then pass; else fail "remember differs with the cache ($ra/$rb)"; fi
  # `amn plugins` loads and checks every plugin.
  traced "$amn" plugins >/dev/null 2>"$work/t5"
  [ "$(grep -c 'load ' "$work/t5")" -eq ${#mods[@]} ] && pass || fail "plugins did not load every module"
else
  skips=$((skips + 1))
fi

# A format the cache says another plugin must probe: files of every format.
for f in "$src/fixtures/npz/stored.npz" "$src/fixtures/pth/checkpoint.pth" "$src/fixtures/gguf/tiny-v3.gguf" /etc/hostname; do
  [ -e "$f" ] || continue
  "$amn" inspect "$f" >"$work/a" 2>&1; ra=$?
  AMN_REGISTRY_CACHE=0 "$amn" inspect "$f" >"$work/b" 2>&1; rb=$?
  if [ $ra -eq $rb ] && cmp -s "$work/a" "$work/b"; then pass; else fail "inspect $f differs with the cache"; diff "$work/a" "$work/b" | head -5; fi
done

# Every quantized fixture model (the broken ones included: their errors come
# from detect) and a few files of every other format: inspect gives the same
# report, messages and exit code with and without the cache.
fixtures=()
for f in "$src"/fixtures/*/*/model.safetensors; do fixtures+=("$f"); done
for d in npz pth gguf; do
  k=0
  for f in "$src/fixtures/$d"/*.np? "$src/fixtures/$d"/*.pth "$src/fixtures/$d"/*.gguf; do
    [ $k -lt 6 ] || break
    fixtures+=("$f"); k=$((k + 1))
  done
done
differ=0
for f in "${fixtures[@]}"; do
  "$amn" inspect "$f" >"$work/a" 2>&1; ra=$?
  AMN_REGISTRY_CACHE=0 "$amn" inspect "$f" >"$work/b" 2>&1; rb=$?
  if [ $ra -ne $rb ] || ! cmp -s "$work/a" "$work/b"; then
    differ=$((differ + 1)); echo "differs: $f"; diff "$work/a" "$work/b" | head -4
  fi
done
[ $differ -eq 0 ] && [ ${#fixtures[@]} -gt 0 ] && pass || fail "$differ of ${#fixtures[@]} fixtures inspect differently with the cache"

# 4b. convert asks whether its --to names an encode target: the cache answers
# for every plugin that does not encode it (it is not loaded), and loads the
# one that does; the outputs are those of a run without the cache.
if has safetensors; then
  traced "$amn" convert "$st" --to safetensors -o "$work/c1.safetensors" --quiet 2>"$work/t4b"
  loads=$(grep -c "load " "$work/t4b")
  [ "$loads" -eq 1 ] && pass || fail "convert --to safetensors loaded: $(grep 'load ' "$work/t4b" | tr '\n' ';')"
  AMN_REGISTRY_CACHE=0 "$amn" convert "$st" --to safetensors -o "$work/c2.safetensors" --quiet
  cmp -s "$work/c1.safetensors" "$work/c2.safetensors" && pass || fail "convert differs with the cache"
  for t in bnb:bnb-nf4:safetensors gguf:gguf-F16:gguf; do
    IFS=: read -r plug target ext <<<"$t"
    has "$plug" || { skips=$((skips + 1)); continue; }
    traced "$amn" convert "$st" --to "$target" -o "$work/e1.$ext" --quiet 2>"$work/t4c"; ra=$?
    AMN_REGISTRY_CACHE=0 "$amn" convert "$st" --to "$target" -o "$work/e2.$ext" --quiet; rb=$?
    if grep -q "load $plug: it encodes the target" "$work/t4c" &&
       [ "$(grep -c 'it encodes the target' "$work/t4c")" -eq 1 ] && [ $ra -eq 0 ] && [ $rb -eq 0 ] &&
       cmp -s "$work/e1.$ext" "$work/e2.$ext"; then pass; else fail "convert --to $target: $(grep 'load ' "$work/t4c" | tr '\n' ';') ($ra/$rb)"; fi
  done
  "$amn" convert "$st" --to no-such-target -o "$work/n1" >"$work/a" 2>&1; ra=$?
  AMN_REGISTRY_CACHE=0 "$amn" convert "$st" --to no-such-target -o "$work/n2" >"$work/b" 2>&1; rb=$?
  [ $ra -eq $rb ] && [ $ra -ne 0 ] && cmp -s "$work/a" "$work/b" && pass || fail "an unknown target is reported differently with the cache"
else
  skips=$((skips + 1))
fi

# 5. A touched plugin file is loaded again and the cache rewritten.
victim=$(basename "${mods[0]}" .so); victim=${victim#amn-}
sleep 0.01
touch "$work/plugins/amn-$victim.so"
traced noop >/dev/null 2>"$work/t6"
if grep -q "load $victim: not in the cache" "$work/t6" && grep -q "written" "$work/t6"; then pass; else fail "touched plugin not reloaded"; cat "$work/t6"; fi
traced noop >/dev/null 2>"$work/t7"
! grep -q "load " "$work/t7" && pass || fail "cache not refreshed after the touch"

# 6. Replaced (new inode, same bytes and time) is a change too.
cp -p "$work/plugins/amn-$victim.so" "$work/new.so" && mv "$work/new.so" "$work/plugins/amn-$victim.so"
traced noop >/dev/null 2>"$work/t8"
grep -q "load $victim: not in the cache" "$work/t8" && pass || fail "replaced plugin not reloaded"

# 7. Removed: gone from `plugins` and from the cache; added back: loaded.
mv "$work/plugins/amn-$victim.so" "$work/away.so"
traced "$amn" plugins >"$work/p" 2>"$work/t9"
if ! grep -q "^  $victim " "$work/p" && grep -q "written ($(( ${#mods[@]} - 1 )) plugins)" "$work/t9"; then pass; else fail "removed plugin still seen"; cat "$work/t9"; fi
mv "$work/away.so" "$work/plugins/amn-$victim.so"
traced noop >/dev/null 2>"$work/t10"
grep -q "load $victim: not in the cache" "$work/t10" && pass || fail "added plugin not loaded"

# 8. A broken plugin replacing a good one is reported, not trusted.
cp "$work/plugins/amn-$victim.so" "$work/keep.so"
printf 'not an ELF file' >"$work/plugins/amn-$victim.so"
"$amn" plugins >"$work/p" 2>&1
grep -q "$victim.*rejected\|rejected.*$victim" "$work/p" && pass || fail "a broken module was not reported"; 
mv "$work/keep.so" "$work/plugins/amn-$victim.so"
noop >/dev/null 2>&1

# 9. Damaged caches: ignored (everything loads as without a cache), rewritten.
good=$work/good.cache
cp "$(cachefile)" "$good"
size=$(stat -c %s "$good")
damage() { # damage NAME: leave a damaged copy of the good cache in place
  local c; c=$(cachefile)
  case $1 in
    empty) : >"$c" ;;
    half) head -c $((size / 2)) "$good" >"$c" ;;
    no-newline) head -c $((size - 1)) "$good" >"$c" ;;
    flip) cp "$good" "$c"; printf 'X' | dd of="$c" bs=1 seek=$((size / 3)) conv=notrunc status=none ;;
    garbage) head -c 4096 /dev/urandom >"$c" ;;
    huge) head -c $((2 << 20)) /dev/zero >"$c" ;;
    nul) cp "$good" "$c"; printf '\0' | dd of="$c" bs=1 seek=40 conv=notrunc status=none ;;
    dir) rm -f "$c"; mkdir "$c" ;;
  esac
}
for d in empty half no-newline flip garbage huge nul; do
  damage $d
  if has safetensors; then
    traced "$amn" inspect "$st" >"$work/a" 2>"$work/t"; rc=$?
    AMN_REGISTRY_CACHE=0 "$amn" inspect "$st" >"$work/b" 2>&1
  else
    traced noop >"$work/a" 2>"$work/t"; rc=$?
    AMN_REGISTRY_CACHE=0 noop >"$work/b" 2>/dev/null; [ $? -eq $rc ] && rc=0
  fi
  if [ $rc -eq 0 ] && cmp -s "$work/a" "$work/b" && grep -q "absent or invalid" "$work/t" &&
     grep -q "written" "$work/t" && cmp -s "$(cachefile)" "$good"; then pass; else fail "damaged cache ($d) not ignored and rewritten"; cat "$work/t"; fi
done
# A cache that cannot be written (a directory in its place) means no cache.
damage dir
traced noop >"$work/a" 2>"$work/t"; rc=$?
AMN_REGISTRY_CACHE=0 noop >"$work/b" 2>/dev/null; rb=$?
[ $rc -eq $rb ] && cmp -s "$work/a" "$work/b" && grep -q "not written" "$work/t" && pass || fail "an unwritable cache broke the run"
rm -rf "$(cachefile)"
# A read-only cache directory: no cache, no failure.
if [ "$(id -u)" != 0 ]; then
  chmod 500 "$work/cache"
  noop >/dev/null 2>&1; [ $? -eq "$(AMN_REGISTRY_CACHE=0 noop >/dev/null 2>&1; echo $?)" ] && pass || fail "read-only cache directory broke the run"
  chmod 700 "$work/cache"
fi

finish registry_cache
