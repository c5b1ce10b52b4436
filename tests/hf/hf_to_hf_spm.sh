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
build=$1 src=$2
amn=$(cd "$build" && pwd)/bin/amn
py=/usr/bin/python3
"$amn" plugins 2>/dev/null | grep -q "scheme hfdir " ||
  { echo "SKIP: needs the hf plugin, not built"; exit 77; }
$py -c "import sentencepiece" 2>/dev/null || { echo "SKIP: needs python3-sentencepiece"; exit 77; }
work=$(mktemp -d /tmp/amn-hf2-spm.XXXXXX)
trap 'rm -rf "$work"' EXIT
fails=0 passes=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
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
    fail "$n: amn failed"; sed 's/^/    /' "$work/log"; continue
  fi
  cmp -s "$a" "$b" && passes=$((passes + 1)) || fail "$n: the GGUF made again differs"
  if [ "$n" = bare ]; then
    $py "$src/tests/hf/hf_spm_encode.py" "$c/tokenizer.model" "$out/tokenizer.model" &&
      passes=$((passes + 1)) || fail "$n: tokenizer.model encodes differently"
  else
    $py -c "import sentencepiece as s, sys; p = s.SentencePieceProcessor(model_file=sys.argv[1]); \
assert p.get_piece_size() == 400 and p.unk_id() == 0 and p.encode('hi there')" "$out/tokenizer.model" &&
      passes=$((passes + 1)) || fail "$n: tokenizer.model does not load as 400 pieces"
  fi
done
echo "hf_to_hf_spm: $passes passed, $fails failed"
[ $fails -eq 0 ] && [ $passes -gt 0 ]
