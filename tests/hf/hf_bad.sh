#!/usr/bin/env bash
# amn-hf refuses bad model folders before any output exists: an
# architecture without a table (unsupported, naming it and the supported
# ones), a config.json contradicting the tensors (a parse error naming
# both), hostile config.json files (deep, huge, wrong types, not JSON), an
# output type the converter does not have.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init hf-bad "$1" "$2"
need_plugin hf "scheme hf "
base=$src/fixtures/hf/Mistral-Tiny-v0.3

# case NAME PYTHON-EDIT: a copy of the base folder whose config.json the
# Python statement rewrites (c is the parsed config; raw text in `text`
# replaces the file when set).
case_dir() {
  local d=$work/$1
  cp -r "$base" "$d"
  $py - "$d/config.json" "$2" <<'PY'
import json, sys
path, edit = sys.argv[1], sys.argv[2]
c = json.load(open(path))
text = None
exec(edit)
open(path, "w").write(text if text is not None else json.dumps(c))
PY
  echo "$d"
}

# refused NAME DIR RC PATTERN [ARGS...]: exit RC, PATTERN in the message
# ($work/out), no output file.
refused() {
  local name=$1 dir=$2 want=$3 pat=$4
  shift 4
  expect "$name" "$want" convert "$dir" --to gguf -o "$work/$name.gguf" "$@"
  matches "$name" "$pat"
  absent "$name: output left behind" "$work/$name.gguf"
  ls "$work" | grep -q "^\.$name" && fail "$name: temporary left" || pass
}

d=$(case_dir arch 'c["architectures"] = ["FrobnicatorForCausalLM"]')
refused arch "$d" 3 "FrobnicatorForCausalLM"
grep -q "LlamaForCausalLM" "$work/out" && grep -q "Qwen3ForCausalLM" "$work/out" && pass ||
  fail "arch: the supported architectures are not listed"

d=$(case_dir heads 'c["num_attention_heads"] = 3; c["num_key_value_heads"] = 1')
refused heads "$d" 1 "3 attention heads"
grep -q "q_proj" "$work/out" && pass || fail "heads: the tensor is not named"

d=$(case_dir kvheads 'c["num_key_value_heads"] = 3; c["num_attention_heads"] = 6')
refused kvheads "$d" 1 "k_proj"

d=$(case_dir hidden 'c["hidden_size"] = 96')
refused hidden "$d" 1 "hidden_size 96"
grep -q "embed_tokens" "$work/out" && pass || fail "hidden: the tensor is not named"

d=$(case_dir type 'c["num_hidden_layers"] = "two"')
refused type "$d" 1 "num_hidden_layers"

d=$(case_dir noarch 'del c["architectures"]')
refused noarch "$d" 1 "architectures"

d=$(case_dir deep 'text = json.dumps(c)[:-1] + ", \"x\": " + "[" * 200 + "]" * 200 + "}"')
"$amn" convert "$d" --to gguf -o "$work/deep.gguf" >"$work/log" 2>&1
rc=$?
[ $rc -eq 4 ] || [ $rc -eq 1 ] && pass || { fail "deep: exit $rc"; cat "$work/log"; }
[ ! -e "$work/deep.gguf" ] && pass || fail "deep: output left behind"

d=$(case_dir huge 'text = json.dumps(dict(c, pad="x" * (17 << 20)))')
"$amn" convert "$d" --to gguf -o "$work/huge.gguf" >"$work/log" 2>&1
rc=$?
[ $rc -eq 4 ] && pass || { fail "huge: exit $rc, wanted 4"; cat "$work/log"; }
[ ! -e "$work/huge.gguf" ] && pass || fail "huge: output left behind"

d=$(case_dir notjson 'text = "{\"architectures\": [\"MistralForCausalLM\"],"')
"$amn" convert "$d" --to gguf -o "$work/notjson.gguf" >"$work/log" 2>&1
rc=$?
[ $rc -ne 0 ] && pass || fail "notjson: accepted"
[ ! -e "$work/notjson.gguf" ] && pass || fail "notjson: output left behind"

refused outtype "$base" 2 "f32, f16, bf16, q8_0, tq1_0, tq2_0 or auto" --out-dtype q4_0

# Mixtral whose config claims more experts than its tensors hold, or fewer.
mix=$src/fixtures/hf/Mixtral-Tiny-4x1K
for n in 4096 3; do
  d=$work/experts-$n
  cp -r "$mix" "$d"
  $py - "$d/config.json" "$n" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_local_experts"] = int(sys.argv[2])
json.dump(c, open(sys.argv[1], "w"))
PY
  refused "experts-$n" "$d" 1 "num_local_experts"
done

# Folders of pytorch_model*.bin: an index without a weight_map, an index
# naming a shard that is not there, shards without their index, a shard
# cut short, a shard whose pickle calls what a state dict never calls
# (disallowed, exit 5, as `amn scan` would say).
bin=$src/fixtures/hf/qwen2-tiny-bin
bin_dir() {
  local d=$work/$1
  cp -r "$bin" "$d"
  echo "$d"
}
d=$(bin_dir bin-nomap)
echo '{"metadata": {"total_size": 1}}' >"$d/pytorch_model.bin.index.json"
refused bin-nomap "$d" 1 "weight_map"
d=$(bin_dir bin-missing)
rm "$d/pytorch_model-00002-of-00002.bin"
refused bin-missing "$d" 1 "shard pytorch_model-00002-of-00002.bin does not exist"
# shards without their index are read in name order, as the converter
# reads them, but not beside a pytorch_model.bin (transformers' one file)
d=$(bin_dir bin-noindex)
rm "$d/pytorch_model.bin.index.json"
expect bin-noindex 0 convert "$d" --to gguf -o "$work/bin-noindex.gguf"
expect bin-indexed 0 convert "$bin" --to gguf -o "$work/bin-indexed.gguf"
same bin-noindex "$work/bin-noindex.gguf" "$work/bin-indexed.gguf"
cp "$d/pytorch_model-00001-of-00002.bin" "$d/pytorch_model.bin"
refused bin-single "$d" 3 "pytorch_model.bin beside 2 other"
d=$(bin_dir bin-cut)
truncate -s 3000 "$d/pytorch_model-00001-of-00002.bin"
refused bin-cut "$d" 1 "pytorch_model-00001-of-00002.bin"
d=$(bin_dir bin-evil)
$py - "$d/pytorch_model-00002-of-00002.bin" <<'PY'
import sys, zipfile
path = sys.argv[1]
members = [(i, zipfile.ZipFile(path).read(i.filename)) for i in zipfile.ZipFile(path).infolist()]
evil = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."
with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
    for info, data in members:
        z.writestr(info, evil if info.filename.endswith("/data.pkl") else data)
PY
refused bin-evil "$d" 5 "os.system"

# Qwen MoE (Qwen2MoeModel): experts named other than one per tensor, a
# missing expert, a count in config.json the tensors do not hold.
moe=$src/fixtures/hf/Qwen3-MoE-Tiny-Instruct
# moe_dir NAME PYTHON-EDIT: a copy whose first shard's tensors the statement
# edits (hf_st_edit.py: t, name -> [dtype, shape, bytes]); the index follows.
moe_dir() {
  local d=$work/$1
  cp -r "$moe" "$d"
  $py "$src/tests/hf/hf_st_edit.py" "$d" "if shard.startswith('model-00001'): $2"
  echo "$d"
}
e0=model.layers.0.mlp.experts
d=$(moe_dir moe-fused-2d "t['$e0.gate_up_proj'] = t.pop('$e0.0.gate_proj.weight')")
refused moe-fused-2d "$d" 3 "expert tensor $e0.gate_up_proj (BF16, 2-D; 3-D"
d=$(moe_dir moe-stacked-up "t['$e0.up_proj'] = t.pop('$e0.0.up_proj.weight')")
refused moe-stacked-up "$d" 3 "$e0.up_proj: not one expert's down_proj, gate_proj or up_proj"
# a layer's experts both one per tensor and stacked (transformers 5's layout)
d=$(moe_dir moe-both "dt, sh, b = t['$e0.0.down_proj.weight']; t['$e0.down_proj'] = [dt, [4] + sh, b * 4]")
refused moe-both "$d" 1 "layer 0 holds its experts' down_proj twice"
d=$(moe_dir moe-zero "t['$e0.00.up_proj.weight'] = t.pop('$e0.0.up_proj.weight')")
refused moe-zero "$d" 3 "$e0.00.up_proj.weight"
d=$(moe_dir moe-missing "del t['$e0.3.down_proj.weight']")
refused moe-missing "$d" 1 "layer 0 has 11 of its 12 expert tensors"
d=$(moe_dir moe-count 'pass')
$py - "$d/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_experts"] = 3
json.dump(c, open(sys.argv[1], "w"))
PY
refused moe-count "$d" 1 "below 3 (config.json's num_experts)"

# transformers 5's stacked experts: a count config.json does not say,
# rows that do not halve into gate and up; ".weight" or not, the same file.
fused=$src/fixtures/hf/Qwen3-MoE-Tiny-Fused
fused_dir() { # (named as the original: the folder's name is the model's)
  local d=$work/$1/${fused##*/}
  mkdir "$work/$1" && cp -r "$fused" "$d"
  $py "$src/tests/hf/hf_st_edit.py" "$d" "$2"
  echo "$d"
}
d=$(fused_dir fused-count 'pass')
$py - "$d/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1])); c["num_experts"] = 5
json.dump(c, open(sys.argv[1], "w"))
PY
refused fused-count "$d" 1 "config.json says 5 experts (num_experts) but $e0.down_proj stacks 4"
d=$(fused_dir fused-odd "k = '$e0.gate_up_proj'
if k in t: dt, sh, b = t[k]; t[k] = [dt, [sh[0], sh[1] - 1, sh[2]], b[:sh[0] * (sh[1] - 1) * sh[2] * 2]]")
refused fused-odd "$d" 1 "$e0.gate_up_proj: 63 rows per expert do not split into 2 projections"
d=$(fused_dir fused-suffix "for k in [k for k in list(t) if k.endswith('_proj')]: t[k + '.weight'] = t.pop(k)")
"$amn" convert "$fused" --to gguf -o "$work/fused-plain.gguf" --quiet &&
  "$amn" convert "$d" --to gguf -o "$work/fused-suffix.gguf" --quiet &&
  cmp -s "$work/fused-plain.gguf" "$work/fused-suffix.gguf" && pass ||
  fail "stacked experts named .weight convert otherwise"

# Family keys of the wrong kind: OLMo 3's sliding window and layer types,
# Granite's scales (the converter fails on each when it packs the value).
olmo3=$src/fixtures/hf/Olmo-3-Tiny-Think
d=$(base=$olmo3 case_dir olmo-types 'c["layer_types"] = "sliding_attention"')
refused olmo-types "$d" 1 "layer_types is not a list"
d=$(base=$olmo3 case_dir olmo-window 'c["sliding_window"] = None')
refused olmo-window "$d" 1 "sliding_window is null"
d=$(base=$olmo3 case_dir olmo-window-str 'c["sliding_window"] = "4096"')
refused olmo-window-str "$d" 1 "sliding_window"
d=$(base=$src/fixtures/hf/Granite-3.3-Tiny-Instruct case_dir granite-scale 'c["residual_multiplier"] = "0.22"')
refused granite-scale "$d" 1 "residual_multiplier must be a number"

# DeepSeek (DeepseekV2Model): kv_b_proj split by a head count and sizes the
# tensor does not hold, or config.json does not give; a score function the
# converter does not know; a tied lm_head left out, as the converter does.
ds=$src/fixtures/hf/DeepSeek-V2-Lite-Tiny-Chat
d=$(base=$ds case_dir ds-heads 'c["num_key_value_heads"] = 2')
refused ds-heads "$d" 1 "config.json says 2 key/value heads of 32 + 32 rows (qk_nope_head_dim + v_head_dim) but model.layers.0.self_attn.kv_b_proj.weight has 256 rows"
d=$(base=$ds case_dir ds-nope 'del c["qk_nope_head_dim"]')
refused ds-nope "$d" 1 "kv_b_proj.weight is split by num_key_value_heads, qk_nope_head_dim"
d=$(base=$ds case_dir ds-score 'c["scoring_func"] = "relu"')
refused ds-score "$d" 1 'unsupported expert score function "relu"'
mkdir -p "$work/tied1" "$work/tied2" # (one folder name: the model's name)
d=$(base=$ds case_dir tied1/ds 'c["tie_word_embeddings"] = True')
d2=$(base=$ds case_dir tied2/ds 'c["tie_word_embeddings"] = True')
$py "$src/tests/hf/hf_st_edit.py" "$d2" "del t['lm_head.weight']"
"$amn" convert "$d" --to gguf -o "$work/ds-tied.gguf" --quiet &&
  "$amn" convert "$d2" --to gguf -o "$work/ds-tied-nohead.gguf" --quiet &&
  cmp -s "$work/ds-tied.gguf" "$work/ds-tied-nohead.gguf" && pass ||
  fail "ds-tied: a tied lm_head is written"

# gpt-oss (GptOssModel): expert tensors of the wrong rank or an odd
# gate_up width; MXFP4 experts whose scales do not fit their blocks; no
# sliding_window (hparams["sliding_window"]).
oss=$src/fixtures/hf/gpt-oss-tiny-bf16
d=$(base=$oss case_dir oss-window 'del c["sliding_window"]')
refused oss-window "$d" 1 "config.json: no sliding_window"
d=$(base=$oss case_dir oss-rank 'pass')
$py "$src/tests/hf/hf_st_edit.py" "$d" "
k = 'model.layers.0.mlp.experts.gate_up_proj'
if k in t: t[k][1] = [4 * 64, 64]"
refused oss-rank "$d" 1 "model.layers.0.mlp.experts.gate_up_proj: 2-D with 64 values along the last dimension (3-D, gate and up alternating, expected)"
d=$(base=$oss case_dir oss-odd 'pass')
$py "$src/tests/hf/hf_st_edit.py" "$d" "
k = 'model.layers.1.mlp.experts.gate_up_proj_bias'
if k in t: t[k][1] = [256, 1]"
refused oss-odd "$d" 1 "model.layers.1.mlp.experts.gate_up_proj_bias: 2-D with 1 values along the last dimension"
mx=$src/fixtures/hf/gpt-oss-tiny-mxfp4
d=$(base=$mx case_dir oss-mx-scales 'pass')
$py "$src/tests/hf/hf_st_edit.py" "$d" "
k = 'model.layers.0.mlp.experts.down_proj_scales'
if k in t: t[k][1] = [4, 32, 2]; t[k][2] = t[k][2][:256]"
refused oss-mx-scales "$d" 1 "down_proj_scales: expected U8"

# Quantized folders are no longer refused: they are dequantized on the way
# (hf_onepass.sh compares them with their dequantized copies).

# Model cards amn does not read in full convert all the same: a front
# matter with no end within the cap, nested maps, anchors, binary junk.
for card in big nested junk; do
  d=$work/card-$card
  cp -r "$base" "$d"
  case $card in
  big) { echo "---"; head -c 3000000 /dev/zero | tr '\0' 'a'; echo; } >"$d/README.md" ;;
  nested) printf -- '---\nlicense: &x mit\nmodel-index:\n  - name: a\n    results: []\ntags: *x\nlanguage: [en, [fr]]\nbase_model:\n  - {a: b}\n---\n' >"$d/README.md" ;;
  junk) { printf -- '---\n'; head -c 4096 /dev/urandom; printf -- '\n---\n'; } >"$d/README.md" ;;
  esac
  "$amn" convert "$d" --to gguf -o "$work/card-$card.gguf" >"$work/log" 2>&1 && [ -s "$work/card-$card.gguf" ] &&
    pass || { fail "card $card: refused"; indent "$work/log"; }
done

finish hf_bad
