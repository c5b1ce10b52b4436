#!/usr/bin/env bash
# Whole-program speed of a model folder to GGUF: amn convert DIR --to gguf
# (f16) against llama.cpp's convert_hf_to_gguf.py --outtype f16 on a ~1 GB
# BF16 Llama-shaped folder, wall time and peak memory of each, and that the
# two files are the same bytes. Not run by CI (needs torch and llama.cpp).
#
#   tests/bench/hf_gguf_bench.sh BUILD_DIR LLAMA_CPP_DIR [WORK_DIR]
set -euo pipefail
build=$(cd "$1" && pwd) llama=$2 work=${3:-/tmp/amn-hf-bench}
src=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
mkdir -p "$work"
[ -f "$work/model/config.json" ] || $py "$src/fixtures/hf/gen_fixtures.py" --llama-cpp "$llama" \
  --make-bench "$work/model"
du -sh "$work/model"
measure() { # measure LABEL CMD...: wall seconds and peak RSS
  local label=$1; shift
  /usr/bin/time -f "$label: %e s wall, %M KB peak RSS" "$@" >/dev/null 2>"$work/$label.time" ||
    { cat "$work/$label.time"; exit 1; }
  tail -1 "$work/$label.time"
}
sync
cat "$work"/model/*.safetensors >/dev/null # both runs start from a warm page cache
measure converter $py "$src/fixtures/hf/gen_fixtures.py" --llama-cpp "$llama" \
  --run-converter "$work/model" f16 "$work/converter.gguf"
measure amn "$build/bin/amn" convert "$work/model" --to gguf -o "$work/amn.gguf" --force --quiet
measure amn-1-thread "$build/bin/amn" convert "$work/model" --to gguf -o "$work/amn1.gguf" \
  --force --quiet --threads 1
cmp "$work/converter.gguf" "$work/amn.gguf" && cmp "$work/amn.gguf" "$work/amn1.gguf" &&
  echo "identical: $(sha256sum "$work/amn.gguf" | cut -c1-16)"
