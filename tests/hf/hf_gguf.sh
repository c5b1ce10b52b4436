#!/usr/bin/env bash
# Every folder of fixtures/hf converted with `amn convert DIR --to gguf
# --out-dtype T` must have the sha256 llama.cpp's convert_hf_to_gguf.py
# --outtype T output has (fixtures/hf/expected.sha256), with one thread and
# with several; no --out-dtype is f16, as the converter's default. Lines
# NAME/gguf-TYPE hold llama-quantize's output of the converter's f16 file:
# what the one pass `--to gguf-TYPE` must write, or "refused" where
# llama-quantize refuses (no fallback type for a tensor's rows; MXFP4
# experts, which it does not requantize unless asked to, and the one pass
# does not read back).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf "$1" "$2"
need_plugin hf "scheme hf "
while read -r want case_type; do
  c=${case_type%/*} t=${case_type#*/}
  case $t in
    gguf-*) args=(--to "$t") ;; # llama-quantize's output of the converter's f16
    *) args=(--to gguf --out-dtype "$t") ;;
  esac
  if [ "$want" = refused ]; then # llama-quantize refuses it: so must amn
    "$amn" convert "$src/fixtures/hf/$c" "${args[@]}" -o "$work/refused.gguf" >"$work/log" 2>&1
    rc=$?
    [ $rc -eq 3 ] && grep -Eq "no tensor type fallback|is MXFP4; a chained encoder" "$work/log" &&
      [ ! -e "$work/refused.gguf" ] &&
      pass || { fail "$c $t: exit $rc, llama-quantize refuses it"; indent "$work/log"; }
    continue
  fi
  for threads in 1 3; do
    out=$work/$c-$t-$threads.gguf
    if ! "$amn" convert "$src/fixtures/hf/$c" "${args[@]}" --threads "$threads" \
        -o "$out" --quiet >"$work/log" 2>&1; then
      fail "$c $t (threads $threads): amn failed"; indent "$work/log"; continue
    fi
    got=$(sha256sum "$out" | cut -d' ' -f1)
    [ "$got" = "$want" ] && pass ||
      fail "$c $t (threads $threads): sha256 $got, the converter's $want"
  done
  if [ "$t" = f16 ]; then
    "$amn" convert "$src/fixtures/hf/$c" --to gguf -o "$work/default.gguf" --force --quiet >/dev/null 2>&1
    got=$(sha256sum "$work/default.gguf" 2>/dev/null | cut -d' ' -f1)
    [ "$got" = "$want" ] && pass || fail "$c: the default is not f16"
  fi
done <"$src/fixtures/hf/expected.sha256"
finish hf_gguf need-passes
