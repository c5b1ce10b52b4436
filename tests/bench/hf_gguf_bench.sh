#!/usr/bin/env bash
# Whole-program speed of a model folder to GGUF: amn convert DIR --to gguf
# (f16) against llama.cpp's convert_hf_to_gguf.py --outtype f16 on a ~1 GB
# BF16 Llama-shaped folder, wall time and peak memory of each, and that the
# two files are the same bytes; then the one-pass `--to gguf-Q4_K_M` against
# the two-step pipeline it stands for (amn convert --to gguf f16, then amn
# forget Q4_K_M), and that both give the same bytes. Not run by CI (needs
# NumPy; the converter's run needs torch and llama.cpp: LLAMA_CPP_DIR "-"
# skips it).
#
#   tests/bench/hf_gguf_bench.sh BUILD_DIR LLAMA_CPP_DIR|- [WORK_DIR]
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
if [ "$llama" != - ]; then
  measure converter $py "$src/fixtures/hf/gen_fixtures.py" --llama-cpp "$llama" \
    --run-converter "$work/model" f16 "$work/converter.gguf"
  measure amn "$build/bin/amn" convert "$work/model" --to gguf -o "$work/amn.gguf" --force --quiet
  measure amn-1-thread "$build/bin/amn" convert "$work/model" --to gguf -o "$work/amn1.gguf" \
    --force --quiet --threads 1
  cmp "$work/converter.gguf" "$work/amn.gguf" && cmp "$work/amn.gguf" "$work/amn1.gguf" &&
    echo "identical: $(sha256sum "$work/amn.gguf" | cut -c1-16)"
fi
# One pass against two steps (f16 then Q4_K_M), the intermediate file on
# the same disk as the output.
measure two-step-f16 "$build/bin/amn" convert "$work/model" --to gguf -o "$work/step1.gguf" \
  --force --quiet
measure two-step-q4km "$build/bin/amn" forget "$work/step1.gguf" --to Q4_K_M \
  -o "$work/two-step.gguf" --force --quiet
measure one-pass "$build/bin/amn" convert "$work/model" --to gguf-Q4_K_M \
  -o "$work/one-pass.gguf" --force --quiet
measure one-pass-1-thread "$build/bin/amn" convert "$work/model" --to gguf-Q4_K_M \
  -o "$work/one-pass1.gguf" --force --quiet --threads 1
cmp "$work/two-step.gguf" "$work/one-pass.gguf" && cmp "$work/one-pass.gguf" "$work/one-pass1.gguf" &&
  echo "one pass = two steps: $(sha256sum "$work/one-pass.gguf" | cut -c1-16)"
rm -f "$work/step1.gguf"
