#!/usr/bin/env bash
# Big-endian GGUF (llama.cpp on s390x; gguf-py's GGUFEndian.BIG). The pairs in
# fixtures/gguf_be were written by gguf-py itself (make_gguf_be.py): the same
# values little- and big-endian. amn reads either to the same listing and the
# same output bytes, refuses a block type with no big-endian layout by name,
# and its --opt endian=big output is gguf-py's big-endian file byte for byte
# (make_gguf_be.py --amn also wrote forget-*.gguf from amn's own output).
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init gguf-endian "$1" "$2"
fx=$src/fixtures/gguf_be
need_plugin gguf
need_plugin safetensors

# The listing, without the two lines that name the file and its byte order.
listing() { "$amn" parse --json "$1" | grep -v '^  "file": \|^  "label": '; }

for f in plain quant; do
  le=$fx/$f-le.gguf be=$fx/$f-be.gguf
  cmp -s "$le" "$be" && fail "$f: the fixtures are the same bytes"
  "$amn" inspect "$be" | grep -q "GGUF v3 big-endian" && pass || fail "$f: inspect label"
  "$amn" inspect "$le" | grep -q "big-endian" && fail "$f: little-endian labelled big" || pass
  listing "$le" >"$work/le.json" && listing "$be" >"$work/be.json" &&
    cmp -s "$work/le.json" "$work/be.json" && pass || fail "$f: parse --json differs"
  grep -q '"test.u64": 81985529216486895' "$work/be.json" && pass || fail "$f: u64 value"
  for cmd in "convert --to safetensors --out-dtype keep" "convert --to safetensors" \
    "convert --to gguf --out-dtype keep" "remember --to f32" "convert --to npz --out-dtype keep"; do
    for e in le be; do
      "$amn" $cmd "$fx/$f-$e.gguf" -o "$work/$e.out" --force >/dev/null 2>"$work/err" ||
        { fail "$f $e: $cmd: $(cat "$work/err")"; continue 2; }
    done
    cmp -s "$work/le.out" "$work/be.out" && pass || fail "$f: $cmd: outputs differ"
  done
done

# Quantized blocks kept as they are (llama-quantize's copy) or requantized.
for e in le be; do
  "$amn" forget "$fx/quant-$e.gguf" --to Q8_0 --allow-requantize -o "$work/f-$e.gguf" \
    >/dev/null 2>"$work/err" || fail "forget $e: $(cat "$work/err")"
done
cmp -s "$work/f-le.gguf" "$work/f-be.gguf" && pass || fail "forget: outputs differ"

# Q5_0 has no big-endian layout (gguf_convert_endian.py refuses it): listed,
# not converted.
"$amn" parse "$fx/refused-be.gguf" >/dev/null && pass || fail "refused: parse"
"$amn" convert "$fx/refused-be.gguf" --to safetensors -o "$work/r.safetensors" >/dev/null \
  2>"$work/err"
rc=$?
[ $rc = 3 ] && grep -q "unsupported: tensor q.q5_0: GGUF type Q5_0 has no big-endian layout" \
  "$work/err" && [ ! -e "$work/r.safetensors" ] && pass ||
  fail "refused: exit $rc: $(cat "$work/err")"

# Writing: --opt endian=big gives gguf-py's big-endian file, from either
# input; endian=little (the default) its little-endian one.
for e in le be; do
  for order in big little; do
    "$amn" convert "$fx/plain-$e.gguf" --to gguf --out-dtype keep --opt endian=$order \
      -o "$work/w.gguf" --force >/dev/null 2>"$work/err" || fail "write $e $order: $(cat "$work/err")"
    want=$fx/plain-le.gguf
    [ $order = big ] && want=$fx/plain-be.gguf
    cmp -s "$work/w.gguf" "$want" && pass || fail "write plain-$e endian=$order: not gguf-py's bytes"
  done
  # Blocks kept and requantized (llama-quantize's policy): amn's own
  # little-endian output, converted by gguf_convert_endian.py, is what
  # endian=big writes.
  for order in big little; do
    "$amn" forget "$fx/quant-$e.gguf" --to Q8_0 --allow-requantize --opt endian=$order \
      -o "$work/w.gguf" --force >/dev/null 2>"$work/err" || fail "forget $e $order: $(cat "$work/err")"
    want=$fx/forget-le.gguf
    [ $order = big ] && want=$fx/forget-be.gguf
    cmp -s "$work/w.gguf" "$want" && pass || fail "forget quant-$e endian=$order: wrong bytes"
  done
done
"$amn" convert "$fx/plain-le.gguf" --to gguf --opt endian=middle -o "$work/bad.gguf" \
  >/dev/null 2>"$work/err"
rc=$?
[ $rc = 2 ] && grep -q "option endian middle: expected big or little" "$work/err" &&
  [ ! -e "$work/bad.gguf" ] && pass || fail "endian=middle: exit $rc: $(cat "$work/err")"
"$amn" forget "$src/fixtures/gguf/tiny-v3.gguf" --to Q5_0 --pure --opt endian=big \
  -o "$work/q5.gguf" >/dev/null 2>"$work/err"
rc=$?
[ $rc = 3 ] && grep -q "tensor token_embd.weight: GGUF type Q5_0 has no big-endian layout" \
  "$work/err" && [ ! -e "$work/q5.gguf" ] && pass || fail "Q5_0 big-endian: exit $rc: $(cat "$work/err")"

finish gguf_endian
