#!/usr/bin/env bash
# GGUF -> Hugging Face folder with a SentencePiece vocabulary: the
# tokenizer.model written loads in sentencepiece and encodes strings as the
# original tokenizer.model does (hf_spm_encode.py), and the folder made a
# GGUF again equals the first GGUF byte for byte. Two folders: the
# Llama-2-Tiny-SPM fixture (pieces replaced through added_tokens_decoder,
# added tokens, [PAD] filler; it loses a byte piece, so only the round trip
# and loading are checked), and its weights with the plain 400-piece
# tokenizer.model of fixtures/hf/vocab/spm_bare.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf2-spm "$1" "$2"
need_plugin hf "scheme hfdir "
need_python sentencepiece
mkdir -p "$work/bare"
cp "$src/fixtures/hf/Llama-2-Tiny-SPM/config.json" "$src/fixtures/hf/Llama-2-Tiny-SPM/model.safetensors" \
  "$src/fixtures/hf/vocab/spm_bare/tokenizer.model" "$work/bare/"
for c in "$src/fixtures/hf/Llama-2-Tiny-SPM" "$work/bare"; do
  n=$(basename "$c")
  mkdir -p "$work/$n-out"
  a=$work/$n-a.gguf b=$work/$n-b.gguf out=$work/$n-out/$n
  if ! "$amn" convert "$c" --to gguf --out-dtype f32 -o "$a" --quiet >"$work/log" 2>&1 ||
      ! "$amn" convert "$a" --to hf -o "$out/" --quiet >>"$work/log" 2>&1 ||
      ! "$amn" convert "$out" --to gguf --out-dtype f32 -o "$b" --quiet >>"$work/log" 2>&1; then
    fail "$n: amn failed"; indent "$work/log"; continue
  fi
  cmp -s "$a" "$b" && pass || fail "$n: the GGUF made again differs"
  if [ "$n" = bare ]; then
    $py "$src/tests/hf/hf_spm_encode.py" "$c/tokenizer.model" "$out/tokenizer.model" &&
      pass || fail "$n: tokenizer.model encodes differently"
  else
    $py -c "import sentencepiece as s, sys; p = s.SentencePieceProcessor(model_file=sys.argv[1]); \
assert p.get_piece_size() == 400 and p.unk_id() == 0 and p.encode('hi there')" "$out/tokenizer.model" &&
      pass || fail "$n: tokenizer.model does not load as 400 pieces"
  fi
done
finish hf_to_hf_spm need-passes
