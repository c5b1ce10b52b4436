#!/usr/bin/env bash
# gpt-oss's experts (gate and up alternating, each expert transposed) at a
# size read in spans rather than whole groups: hf_gpt_oss.py.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-gpt-oss "$1" "$2"
need_plugin hf "scheme hf "
need_python torch
if /usr/bin/python3 "$src/tests/hf/hf_gpt_oss.py" "$amn" "$src" "$work" >"$work/log" 2>&1; then
  pass
else
  indent "$work/log"
  fail "gpt-oss experts differ from the converter's expressions"
fi
finish hf-gpt-oss
