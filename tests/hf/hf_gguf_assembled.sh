#!/usr/bin/env bash
# Model folders too large to commit (fixtures/hf/assembled: config.json and
# the name of the vocabulary fixture whose tokenizer files complete it; the
# weights from fixtures/hf/splitmix_weights.py, the same bytes everywhere),
# assembled here as gen_fixtures.py --assembled assembled them: `amn convert
# DIR --to gguf --out-dtype T` must have the sha256 of llama.cpp's
# convert_hf_to_gguf.py --outtype T output (fixtures/hf/assembled.sha256),
# with one thread and with several; and the one pass `--to gguf-TYPE` what
# llama-quantize makes of the converter's f16 output (the lines gguf-TYPE).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-asm "$1" "$2"
bpe=$build/tests/hf/vocab-bpe
need_plugin hf "scheme hf "
need_python numpy

# assemble CASE: $work/CASE, as gen_fixtures.py does
assemble() {
  local c=$1 d=$work/$1 v
  [ -d "$d" ] && return 0
  v=$(cat "$src/fixtures/hf/assembled/$c/vocab")
  [ -d "$bpe/$v" ] || { fail "$c: $bpe/$v not unpacked"; return 1; }
  mkdir -p "$d"
  for f in "$bpe/$v"/*; do [ "$(basename "$f")" = config.json ] || cp "$f" "$d/"; done
  cp "$src/fixtures/hf/assembled/$c/config.json" "$d/"
  $py "$src/fixtures/hf/splitmix_weights.py" "$d" || { fail "$c: no weights"; return 1; }
}

while read -r want case_type; do
  c=${case_type%/*} t=${case_type#*/}
  assemble "$c" || continue
  case $t in
    gguf-*) args=(--to "$t") ;;
    *) args=(--to gguf --out-dtype "$t") ;;
  esac
  for threads in 1 3; do
    out=$work/$c-$t-$threads.gguf
    if ! "$amn" convert "$work/$c" "${args[@]}" --threads "$threads" -o "$out" --quiet \
        >"$work/log" 2>&1; then
      fail "$c $t (threads $threads): amn failed"; indent "$work/log"; continue
    fi
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$got" = "$want" ] && pass ||
      fail "$c $t (threads $threads): sha256 $got, the reference's $want"
    rm -f "$out"
  done
done <"$src/fixtures/hf/assembled.sha256"
finish hf_gguf_assembled need-passes
