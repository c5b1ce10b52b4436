#!/usr/bin/env bash
# Whole-program speed of a model folder to GGUF, side by side with
# llama.cpp, on a ~1 GB BF16 Llama-shaped folder:
#   1. f16: `amn convert DIR --to gguf` against `convert_hf_to_gguf.py
#      --outtype f16` (run as fixtures/hf/gen_fixtures.py runs it, with the
#      transformers stand-in of fixtures/hf/shim);
#   2. Q4_K_M: the one-pass `amn convert DIR --to gguf-Q4_K_M` against the
#      two-step pipeline it stands for, the converter's f16 file then
#      `llama-quantize F16 OUT Q4_K_M` (the intermediate on the same disk).
# f16 runs ROUNDS times (default 3), Q4_K_M QROUNDS times (default 1: the
# two-step pipeline takes minutes), in settings: the input on
# disk with a warm page cache, the input and output on tmpfs (/dev/shm), and
# the input on disk with its pages dropped from the cache before each round
# (posix_fadvise DONTNEED; "cold"; there it also times reading the input's
# files cold with cat and nothing else). In each setting it times the
# floors: `cat` of the input's files into a file beside the output (as many
# bytes as the f16 output, replaced each round as amn's is: what the page
# cache costs to take them, the like-for-like floor of `--no-sync`), and on
# disk the same followed by `sync FILE` (the floor of amn's default, which
# syncs). It prints each round's wall time, CPU
# time (user + sys) and peak RSS, then the medians and the ratios, the load
# average before and after, and checks that amn's files (2 threads and 1)
# equal the converter's and llama-quantize's byte for byte. amn syncs its
# output before renaming it into place; the converter and llama-quantize do
# not: the `amn --no-sync` rows are the like-for-like ones.
# Not run by CI (needs python3-numpy, python3-torch, python3-tqdm,
# python3-yaml, a llama.cpp checkout with a built llama-quantize).
#
#   tests/bench/hf_gguf_bench.sh BUILD_DIR LLAMA_CPP_DIR [WORK_DIR]
#   env: ROUNDS=N, QROUNDS=N, SETTINGS="warm tmpfs cold" (f16's; a subset),
#        QSETTINGS="warm" (Q4_K_M's), BASE=BUILD_DIR (another build of amn,
#        e.g. of the main branch, whose f16 `--no-sync` run is timed in the
#        same rounds: an A/B comparison one loaded machine can give),
#        MOE=1 (a Qwen3-MoE-shaped folder, its 64 experts per layer stacked;
#        give it a WORK_DIR of its own), GPT_OSS=bf16|mxfp4 (one layer of
#        gpt-oss-20b, its experts in BF16 or, as published, in MXFP4, which
#        no one-pass Q4_K_M takes: give it QSETTINGS= and a WORK_DIR)
set -euo pipefail
build=$(cd "$1" && pwd) llama=$(cd "$2" && pwd) work=${3:-/tmp/amn-hf-bench}
src=$(cd "$(dirname "$0")/../.." && pwd)
py=/usr/bin/python3
amn=$build/bin/amn
quantize=$llama/build/bin/llama-quantize
frounds=${ROUNDS:-3} qrounds=${QROUNDS:-1} base=${BASE:+$(cd "$BASE" && pwd)/bin/amn}
settings=${SETTINGS:-"warm tmpfs cold"} qsettings=${QSETTINGS-warm}
[ -x "$quantize" ] || { echo "no $quantize"; exit 1; }
mkdir -p "$work"
[ -f "$work/model/config.json" ] || $py "$src/fixtures/hf/gen_fixtures.py" --llama-cpp "$llama" \
  --make-bench "$work/model" ${MOE:+--moe} ${GPT_OSS:+--gpt-oss "$GPT_OSS"}
echo "model: $(du -sh "$work/model" | cut -f1), $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"

drop() { # drop the folder's pages from the page cache
  $py - "$1"/*.safetensors <<'PY'
import os, sys
for p in sys.argv[1:]:
    fd = os.open(p, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
PY
}
warm() { cat "$1"/*.safetensors >/dev/null; }
through() { cat "$1"/*.safetensors >"$2"; }           # the input's bytes into a file
durable() { cat "$1"/*.safetensors >"$2" && sync "$2"; } # and on the disk

# run LABEL PREP CMD...: ROUNDS rounds of CMD (PREP before each, untimed);
# sets the globals wall_$LABEL, cpu_$LABEL (medians).
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
run() {
  local label=$1 prep=$2 i
  shift 2
  : >"$work/$label.rounds"
  for ((i = 1; i <= rounds; i++)); do
    $prep
    sync # (untimed) no round pays for the writeback of an earlier one's output
    local cmd=("$@")
    [ "$(type -t "$1")" = function ] && cmd=(bash -c '"$@"' _ "$@") # time sees a program
    /usr/bin/time -o "$work/$label.time" -f "%e %U %S %M" "${cmd[@]}" >/dev/null 2>"$work/$label.err" ||
      { cat "$work/$label.err" "$work/$label.time"; exit 1; }
    read -r w u s m <"$work/$label.time"
    echo "$w $(echo "$u + $s" | bc) $m" >>"$work/$label.rounds"
  done
  local w c m
  w=$(cut -d' ' -f1 "$work/$label.rounds" | median)
  c=$(cut -d' ' -f2 "$work/$label.rounds" | median)
  m=$(cut -d' ' -f3 "$work/$label.rounds" | sort -n | tail -1)
  printf '  %-28s median %6.2f s wall %6.2f s CPU, peak RSS %s MB   (rounds: %s)\n' "$label" "$w" "$c" \
    $((m / 1024)) "$(cut -d' ' -f1 "$work/$label.rounds" | tr '\n' ' ')"
  printf -v "wall_$label" '%s' "$w"
  printf -v "cpu_$label" '%s' "$c"
}
ratio() { echo "scale=1; $1 / $2" | bc; }
same() { cmp "$1" "$2" >/dev/null && echo "identical" || { echo "DIFFERENT: $1 $2"; exit 1; }; }
converter() { $py "$src/fixtures/hf/gen_fixtures.py" --llama-cpp "$llama" --run-converter "$1" f16 "$2"; }
two_step() { converter "$1" "$2.f16" && "$quantize" "$2.f16" "$2" Q4_K_M && rm -f "$2.f16"; }
export py src llama quantize
export -f converter two_step warm through durable

for setting in warm tmpfs cold; do
  cases=
  [[ " $settings " == *" $setting "* ]] && cases=f16
  [[ " $qsettings " == *" $setting "* ]] && cases="$cases q4km"
  [ -n "$cases" ] || continue
  model=$work/model out=$work prep="warm $model"
  case $setting in
  tmpfs)
    out=/dev/shm/$(basename "$work")
    mkdir -p "$out"
    [ -f "$out/model/config.json" ] || cp -r "$work/model" "$out/model"
    model=$out/model prep=: ;;
  cold) prep="drop $model" ;;
  esac
  echo "== $setting (input $model, output in $out)"
  for c in $cases; do
    case $c in
    f16)
      rounds=$frounds
      [ "$setting" = cold ] && run "read_$setting" "$prep" warm "$model"
      run "copy_$setting" "$prep" through "$model" "$out/floor.bin"
      [ "$setting" = tmpfs ] || run "copysync_$setting" "$prep" durable "$model" "$out/floor.bin"
      run "conv_$setting" "$prep" converter "$model" "$out/conv.gguf"
      run "amn_$setting" "$prep" "$amn" convert "$model" --to gguf -o "$out/amn.gguf" --force --quiet
      run "amnns_$setting" "$prep" "$amn" convert "$model" --to gguf -o "$out/amn.gguf" --force \
        --quiet --no-sync
      run "amn1_$setting" "$prep" "$amn" convert "$model" --to gguf -o "$out/amn1.gguf" --force \
        --quiet --no-sync --threads 1
      if [ -n "$base" ]; then
        run "base_$setting" "$prep" "$base" convert "$model" --to gguf -o "$out/base.gguf" --force \
          --quiet --no-sync
        wb=wall_base_$setting wn=wall_amnns_$setting cb=cpu_base_$setting cn=cpu_amnns_$setting
        echo "  base: $(same "$out/amn.gguf" "$out/base.gguf"); base / amn --no-sync: wall" \
          "$(ratio "${!wb}" "${!wn}")x, CPU $(ratio "${!cb}" "${!cn}")x"
        rm -f "$out/base.gguf"
      fi
      echo "  files: $(same "$out/conv.gguf" "$out/amn.gguf"), 1 thread $(same "$out/amn.gguf" "$out/amn1.gguf")"
      w=wall_conv_$setting a=wall_amn_$setting b=wall_amnns_$setting
      cc=cpu_conv_$setting ca=cpu_amn_$setting
      echo "  f16 wall: converter / amn = $(ratio "${!w}" "${!a}")x, / amn --no-sync = $(ratio "${!w}" "${!b}")x; CPU: $(ratio "${!cc}" "${!ca}")x"
      if [ "$setting" = cold ]; then
        r=wall_read_$setting
        echo "  f16 wall against reading the input cold: converter $(ratio "${!w}" "${!r}")x, amn --no-sync $(ratio "${!b}" "${!r}")x the floor"
      fi
      f=wall_copy_$setting fc=cpu_copy_$setting cb=cpu_amnns_$setting
      echo "  against cat into the output's directory: amn --no-sync $(ratio "${!b}" "${!f}")x its wall," \
        "$(ratio "${!cb}" "${!fc}")x its CPU; converter $(ratio "${!w}" "${!f}")x its wall"
      if [ "$setting" != tmpfs ]; then
        f=wall_copysync_$setting
        echo "  against cat + sync: amn (fsync) $(ratio "${!a}" "${!f}")x its wall, converter $(ratio "${!w}" "${!f}")x"
      fi
      rm -f "$out/conv.gguf" "$out/amn.gguf" "$out/amn1.gguf" "$out/floor.bin" ;;
    q4km)
      rounds=$qrounds
      run "two_$setting" "$prep" two_step "$model" "$out/two.gguf"
      run "one_$setting" "$prep" "$amn" convert "$model" --to gguf-Q4_K_M -o "$out/one.gguf" --force --quiet
      run "onens_$setting" "$prep" "$amn" convert "$model" --to gguf-Q4_K_M -o "$out/one.gguf" \
        --force --quiet --no-sync
      run "one1_$setting" "$prep" "$amn" convert "$model" --to gguf-Q4_K_M -o "$out/one1.gguf" \
        --force --quiet --no-sync --threads 1
      echo "  files: $(same "$out/two.gguf" "$out/one.gguf"), 1 thread $(same "$out/one.gguf" "$out/one1.gguf")"
      w=wall_two_$setting a=wall_one_$setting b=wall_onens_$setting
      cc=cpu_two_$setting ca=cpu_one_$setting
      echo "  Q4_K_M wall: two steps / one pass = $(ratio "${!w}" "${!a}")x, / --no-sync = $(ratio "${!w}" "${!b}")x; CPU: $(ratio "${!cc}" "${!ca}")x"
      rm -f "$out/two.gguf" "$out/one.gguf" "$out/one1.gguf" ;;
    esac
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
