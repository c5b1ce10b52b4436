#!/usr/bin/env bash
# Third-party plugin test: install amn into a scratch prefix (and check its
# run paths), build a plugin
# there as an outside project would (CMake package, then pkg-config), and
# check the installed amn finds it through AMN_PLUGIN_PATH, parses a file of
# its format and converts it.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init third-party "$1" "$2"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
amn=$prefix/bin/amn
# The installed binaries' run paths: absolute or $ORIGIN-relative only.
bash "$src/tests/runpath/check_runpath.sh" "$prefix"

# 1. find_package(amn)
cmake -S "$src/tests/third_party/toy" -B "$work/toy-cmake" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/toy-cmake" >/dev/null
# 2. pkg-config
mkdir -p "$work/toy-pc"
libdir=$(dirname "$(find "$prefix" -name amn.pc | head -n1)")
PKG_CONFIG_PATH=$libdir "${CC:-cc}" -std=c17 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden \
  $(PKG_CONFIG_PATH=$libdir pkg-config --cflags amn) "$src/tests/third_party/toy/toy.c" \
  -o "$work/toy-pc/amn-toy.so" $(PKG_CONFIG_PATH=$libdir pkg-config --libs amn) \
  -Wl,-z,defs -Wl,-z,now -Wl,-rpath,"$(PKG_CONFIG_PATH=$libdir pkg-config --variable=libdir amn)"

# A toy file: two tensors, "w" [2,2] and "b" [3].
f=$work/sample.toy
{
  printf 'AMNTOY01\x02\x00\x00\x00'
  printf '\x01w\x02\x02\x00\x00\x00\x02\x00\x00\x00'
  printf '\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40'   # 1 2 3 4
  printf '\x01b\x01\x03\x00\x00\x00'
  printf '\x00\x00\x80\xbf\x00\x00\x00\x00\x00\x00\x00\x3f'                   # -1 0 0.5
} >"$f"

# The conversion writes safetensors: skipped in a build without that plugin.
have_st=$("$amn" plugins | grep -q "format safetensors" && echo yes || true)
for dir in "$work/toy-cmake" "$work/toy-pc"; do
  out=$(AMN_PLUGIN_PATH=$dir "$amn" plugins)
  grep -q 'toy .*loaded\|toy  *0.1' <<<"$out" || { echo "toy plugin not loaded from $dir"; echo "$out"; exit 1; }
  out=$(AMN_PLUGIN_PATH=$dir "$amn" parse "$f")
  grep -q 'Toy tensors' <<<"$out" && grep -q '^  w  *F32  *\[2, 2\]' <<<"$out" \
    || { echo "parse output unexpected:"; echo "$out"; exit 1; }
  if [ -n "$have_st" ]; then
    AMN_PLUGIN_PATH=$dir "$amn" convert "$f" --to safetensors -o "$work/out.safetensors" --force >/dev/null
    out=$("$amn" parse "$work/out.safetensors")
    grep -q '^  w  *BF16  *\[2, 2\]' <<<"$out" || { echo "converted file unexpected:"; echo "$out"; exit 1; }
    # BF16 of 1 2 3 4 is 3f80 4000 4040 4080 (little-endian in the file).
    bytes=$(tail -c 14 "$work/out.safetensors" | od -An -tx1 | tr -d ' \n')
    [ "$bytes" = "80bf0000003f803f004040408040" ] || { echo "converted bytes: $bytes"; exit 1; }
  fi
  # Without the plugin, a clear message names it.
  set +e
  msg=$("$amn" parse "$f" 2>&1); rc=$?
  set -e
  [ $rc -ne 0 ] && grep -q 'unrecognised' <<<"$msg" || { echo "without the plugin: $rc $msg"; exit 1; }
done
if [ -z "$have_st" ]; then
  echo "third-party plugin: both builds found and parsed; SKIP: converting needs the safetensors plugin"
  exit 77
fi
echo "third-party plugin: CMake package and pkg-config builds both found, parsed and converted"
