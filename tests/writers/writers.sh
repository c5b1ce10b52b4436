#!/usr/bin/env bash
# Every container written and read back: safetensors, npz, pth and GGUF.
#
#   writers.sh BUILD SRC matrix   round trips through every ordered pair of
#                                 the four containers (A -> B -> safetensors,
#                                 --out-dtype keep) with every dtype both can
#                                 hold, bit-exact; npz / pth outputs read back
#                                 by numpy.load and torch.load(weights_only=True);
#                                 dtype defaults; names that cannot be members
#   writers.sh BUILD SRC complex  complex tensors made by torch.save and
#                                 np.savez: listed, converted where the target
#                                 holds them (bit-exact, read back by torch and
#                                 numpy), never cast, refused elsewhere
#   writers.sh BUILD SRC zip64    a sparse safetensors input with a 4 GiB + 1
#                                 tensor -> npz -> pth: ZIP64 sizes, offsets
#                                 and end records, numpy's header parser and
#                                 numpy.load, the CRC of the big member
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init writers "$1" "$2"
what=$3
py="/usr/bin/python3 $src/tests/writers/writers.py"
run() { run_rc "$1" 0 "${@:2}"; } # run DESCRIPTION COMMAND... : must succeed

if ! /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null; then
    echo "python3-numpy and python3-torch are needed (.ci/deps)"
    [ "${CI:-}" = true ] && exit 1
    exit 77
fi

declare -A dtypes=(
    # A lone FP8 tensor (no scale, no quantization config) is plain data: it
    # round-trips where the container holds it (safetensors only).
    [safetensors]="BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64 F8_E4M3 F8_E5M2 C64"
    [npz]="BOOL U8 I8 U16 I16 U32 I32 U64 I64 F16 BF16 F32 F64 C64"
    [pth]="BOOL U8 I8 I16 I32 I64 F16 BF16 F32 F64 C64"
    [gguf]="I8 I16 I32 I64 F16 BF16 F32 F64"
)
declare -A dims=([safetensors]=8 [npz]=8 [pth]=8 [gguf]=4)
formats="safetensors npz pth gguf"

both() { # dtypes both formats hold
    local d out=""
    for d in ${dtypes[$1]}; do [[ " ${dtypes[$2]} " == *" $d "* ]] && out="$out $d"; done
    echo "$out"
}

matrix() {
    # Inputs are made in one python3 process and every check runs in another
    # (importing torch once, not once per check).
    : >"$work/make" && : >"$work/checks"
    for a in $formats; do
        for b in $formats; do
            local maxd=${dims[$a]}
            [ "${dims[$b]}" -lt "$maxd" ] && maxd=${dims[$b]}
            mkdir -p "$work/$a-$b"
            echo -e "make\t$work/$a-$b/in.safetensors\t$maxd\t$(both "$a" "$b" | xargs | tr ' ' '\t')" >>"$work/make"
        done
    done
    $py batch "$work/make" || fail "making the inputs"
    for a in $formats; do
        for b in $formats; do
            local d=$work/$a-$b
            run "$a -> $b: to $a" "$amn" convert "$d/in.safetensors" --to "$a" --out-dtype keep -o "$d/x.$a"
            run "$a -> $b: to $b" "$amn" convert "$d/x.$a" --to "$b" --out-dtype keep -o "$d/y.$b"
            run "$a -> $b: back" "$amn" convert "$d/y.$b" --to safetensors --out-dtype keep -o "$d/z.safetensors"
            echo -e "same\t$d/in.safetensors\t$d/z.safetensors" >>"$work/checks"
            case $b in
            npz) echo -e "npz\t$d/y.npz\t$d/in.safetensors" >>"$work/checks" ;;
            pth) echo -e "pth\t$d/y.pth\t$d/in.safetensors" >>"$work/checks" ;;
            esac
        done
    done

    # Every dtype each of npz and pth holds, straight from safetensors, and
    # the dtype defaults: to npz / pth keeps dtypes, safetensors -> safetensors
    # still casts floats to bf16 unless --out-dtype keep.
    local d=$work/defaults
    mkdir -p "$d"
    $py make "$d/all.safetensors" 8 ${dtypes[npz]}
    run "default to npz keeps dtypes" "$amn" convert "$d/all.safetensors" --to npz -o "$d/all.npz"
    echo -e "npz\t$d/all.npz\t$d/all.safetensors" >>"$work/checks"
    $py make "$d/pt.safetensors" 8 ${dtypes[pth]}
    run "default to pth keeps dtypes" "$amn" convert "$d/pt.safetensors" --to pth -o "$d/pt.pth"
    echo -e "pth\t$d/pt.pth\t$d/pt.safetensors" >>"$work/checks"
    $py make "$d/f.safetensors" 8 F32 F64 I32
    run "safetensors default" "$amn" convert "$d/f.safetensors" --to safetensors -o "$d/f2.safetensors"
    if /usr/bin/python3 -c "import sys, json, struct
b = open(sys.argv[1], 'rb').read(); n, = struct.unpack('<Q', b[:8]); h = json.loads(b[8:8 + n])
sys.exit(0 if h['t.f32.1']['dtype'] == 'BF16' and h['t.i32.1']['dtype'] == 'I32' else 1)" "$d/f2.safetensors"
    then pass; else fail "safetensors -> safetensors without keep casts floats to BF16"; fi
    run "keep" "$amn" convert "$d/f.safetensors" --to safetensors --out-dtype keep -o "$d/f3.safetensors"
    echo -e "same\t$d/f.safetensors\t$d/f3.safetensors" >>"$work/checks"
    "$amn" convert "$d/f.safetensors" --to npz --out-dtype f16 -o "$d/f16.npz" >/dev/null 2>&1
    if /usr/bin/python3 -c "import numpy as np, sys
z = np.load(sys.argv[1]); sys.exit(0 if z['t.f32.1'].dtype == np.float16 and z['t.i32.1'].dtype == np.int32 else 1)" "$d/f16.npz"
    then pass; else fail "--out-dtype f16 to npz casts floats"; fi
    "$amn" convert "$d/f.safetensors" --to npz --out-dtype f8 -o "$d/x.npz" >"$work/out" 2>&1
    [ $? -eq 2 ] && grep -q "or keep" "$work/out" && pass || fail "unknown --out-dtype names keep"

    # Casts into ZIP members at 1-3 threads: pieces written in place by every
    # thread, their CRC-32s folded in order (zipfile checks each member's).
    $py make-cast "$d/cast.safetensors" "$d/cast-bf16.safetensors" || fail "make-cast"
    local t
    for t in 1 2 3; do
        run "cast to npz, $t threads" "$amn" convert "$d/cast.safetensors" --to npz --out-dtype bf16 \
            --threads $t -o "$d/cast$t.npz"
        echo -e "npz\t$d/cast$t.npz\t$d/cast-bf16.safetensors" >>"$work/checks"
        run "cast to pth, $t threads" "$amn" convert "$d/cast.safetensors" --to pth --out-dtype bf16 \
            --threads $t -o "$d/cast$t.pth"
        echo -e "pth\t$d/cast$t.pth\t$d/cast-bf16.safetensors" >>"$work/checks"
    done

    # What a container cannot hold is refused, naming the tensor.
    $py make "$d/f8.safetensors" 8 F8_E4M3
    "$amn" convert "$d/f8.safetensors" --to npz -o "$d/f8.npz" >"$work/out" 2>&1
    [ $? -eq 3 ] && grep -q "t.f8_e4m3.0 (F8_E4M3)" "$work/out" && pass ||
        { fail "F8 to npz refused"; cat "$work/out"; }
    $py make "$d/u16.safetensors" 8 U16
    "$amn" convert "$d/u16.safetensors" --to pth -o "$d/u16.pth" >"$work/out" 2>&1
    [ $? -eq 3 ] && grep -q "pth cannot store tensor t.u16.0 (U16)" "$work/out" && pass ||
        { fail "U16 to pth refused"; cat "$work/out"; }

    # Names that cannot be npz member names: an error naming the tensor,
    # no output and no temporary file left; pth keeps them (they are pickle
    # strings, not member names), unless not UTF-8.
    local long
    long=$(printf 'x%.0s' $(seq 1 4092))
    local -a names=("b'../escape'" "b'/etc/passwd'" "b'a/../../b'" "b'a//b'" "b'dir/'"
        "b'a\\\\\\\\b'" "b'C:x'" "b'a\\\\nb'" "b'.'" "b'$long'")
    local -a why=("'..' path component" "absolute path" "'..' path component" "empty path component"
        "empty path component" "backslash" "drive letter" "control character"
        "'.' or '..' path component" "too long")
    local i n=0
    for i in "${!names[@]}"; do
        rm -rf "$d/n" && mkdir -p "$d/n"
        $py make-name "$d/n/in.safetensors" "${names[$i]}" || { fail "make-name ${names[$i]}"; continue; }
        if ! "$amn" parse "$d/n/in.safetensors" >/dev/null 2>&1; then
            continue # the reader refuses it already; nothing reaches a writer
        fi
        n=$((n + 1))
        "$amn" convert "$d/n/in.safetensors" --to npz -o "$d/n/out.npz" >"$work/out" 2>&1
        local rc=$?
        if [ $rc -eq 3 ] && grep -q "not a valid npz member name (.*${why[$i]}" "$work/out" &&
            [ -z "$(ls -A "$d/n" | grep -v '^in.safetensors$')" ]; then pass; else
            fail "name ${names[$i]:0:40}: exit $rc, wanted 3 and '${why[$i]}'"
            sed 's/^/    /' "$work/out" | cut -c1-200
        fi
        if [ "$i" -le 2 ] || [ "$i" -eq 9 ]; then
            run "pth keeps name ${names[$i]:0:20}" "$amn" convert "$d/n/in.safetensors" --to pth -o "$d/n/out.pth"
            run "pth name ${names[$i]:0:20} round trip" "$amn" convert "$d/n/out.pth" --to safetensors -o "$d/n/back.safetensors"
            run "pth name ${names[$i]:0:20} bit-exact" $py same "$d/n/in.safetensors" "$d/n/back.safetensors"
        fi
    done
    [ $n -ge 10 ] && pass || fail "only $n of the forbidden names reached the writer"
    $py make-name "$d/utf.safetensors" "b'layer/\\\\u00e9t\\\\u00e9/w'"
    run "UTF-8 and '/' names to npz" "$amn" convert "$d/utf.safetensors" --to npz -o "$d/utf.npz"
    echo -e "npz\t$d/utf.npz\t$d/utf.safetensors" >>"$work/checks"
    local nchecks
    nchecks=$(wc -l <"$work/checks")
    if $py batch "$work/checks"; then passes=$((passes + nchecks)); else fail "checks above"; fi
}

complex() {
    local d=$work
    $py make-complex "$d/c.pth" "$d/c.npz" || { fail "make-complex"; return; }
    # Listed with their dtypes, by parse and inspect, text and JSON.
    run "parse pth" "$amn" parse "$d/c.pth"
    grep -Eq "^ +z +C64 +\[8, 5\]" "$work/out" && grep -Eq "^ +wt +C128 +\[4, 3\]" "$work/out" &&
        pass || { fail "pth listing"; cat "$work/out"; }
    run "inspect npz" "$amn" inspect --json "$d/c.npz"
    /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
sys.exit(0 if d["dtypes"] == ["C64", "C128", "F32"] else d["dtypes"])' "$work/out" && pass ||
        { fail "npz inspect dtypes"; cat "$work/out"; }
    run "parse npz" "$amn" parse --json "$d/c.npz"
    /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
t = {x["name"]: (x["dtype"], x["shape"]) for x in d["tensors"]}
sys.exit(0 if t["a"] == ("C64", [2, 3]) and t["be"] == ("C128", [5]) else str(t))' "$work/out" &&
        pass || { fail "npz parse JSON"; cat "$work/out"; }
    # Converted where the target holds them, bytes intact; --out-dtype bf16
    # casts the real floats and copies complex tensors unchanged.
    run "pth -> npz" "$amn" convert "$d/c.pth" --to npz -o "$d/c2.npz"
    run "pth -> npz same" $py same-complex "$d/c.pth" "$d/c2.npz"
    run "npz -> pth" "$amn" convert "$d/c2.npz" --to pth -o "$d/c3.pth"
    run "npz -> pth same" $py same-complex "$d/c.pth" "$d/c3.pth"
    run "npz -> pth (big-endian member)" "$amn" convert "$d/c.npz" --to pth -o "$d/n.pth"
    run "npz -> pth same as numpy" $py same-complex "$d/c.npz" "$d/n.pth"
    run "bf16 keeps complex" "$amn" convert "$d/c.pth" --to pth --out-dtype bf16 -o "$d/b.pth"
    /usr/bin/python3 -c 'import sys, torch
a = torch.load(sys.argv[1], weights_only=True); b = torch.load(sys.argv[2], weights_only=True)
ok = b["r"].dtype == torch.bfloat16 and b["z"].dtype == torch.complex64 and b["w"].dtype == torch.complex128
ok = ok and torch.equal(a["w"], b["w"]) and a["z"].view(torch.int32).equal(b["z"].view(torch.int32))
sys.exit(0 if ok else 1)' "$d/c.pth" "$d/b.pth" && pass || fail "--out-dtype bf16 cast a complex tensor"
    # safetensors has C64 (no complex128): a C64-only model converts, C128
    # is refused naming the tensor, as GGUF refuses both; no output left.
    /usr/bin/python3 -c 'import sys, torch
torch.save({"z": torch.randn(8, 5, dtype=torch.complex64), "r": torch.ones(2)}, sys.argv[1])' "$d/c64.pth"
    run "C64 -> safetensors" "$amn" convert "$d/c64.pth" --to safetensors -o "$d/c64.safetensors"
    run "C64 safetensors bytes" $py st-c64 "$d/c64.safetensors" "$d/c64.pth"
    run "C64 safetensors -> pth" "$amn" convert "$d/c64.safetensors" --to pth -o "$d/c64b.pth"
    /usr/bin/python3 -c 'import sys, torch
a = torch.load(sys.argv[1], weights_only=True)["z"]; b = torch.load(sys.argv[2], weights_only=True)["z"]
sys.exit(0 if b.dtype == torch.complex64 and a.view(torch.int32).equal(b.view(torch.int32)) else 1)' \
        "$d/c64.pth" "$d/c64b.pth" && pass || fail "C64 safetensors round trip"
    local target
    for target in safetensors gguf; do
        "$amn" convert "$d/c.pth" --to $target -o "$d/x.$target" >"$work/out" 2>&1
        local rc=$?
        if [ $rc -eq 3 ] && grep -q "unsupported: $target cannot store tensor [wz] (C" "$work/out" &&
            [ ! -e "$d/x.$target" ]; then pass; else
            fail "complex to $target: exit $rc"
            cat "$work/out"
        fi
    done
}

zip64() {
    local big=$(((1 << 32) + 1)) d=$work
    $py make-big "$d/big.safetensors" $big || { fail "make-big"; return; }
    run "big -> npz" "$amn" convert "$d/big.safetensors" --to npz -o "$d/big.npz"
    run "big npz ZIP64" $py check-big "$d/big.npz" $big npz 0
    cat "$work/out"
    run "big npz -> pth" "$amn" convert "$d/big.npz" --to pth -o "$d/big.pth"
    rm -f "$d/big.npz"
    run "big pth ZIP64" $py check-big "$d/big.pth" $big pth 1
    cat "$work/out"
    run "big pth parsed back" "$amn" parse "$d/big.pth"
    grep -q "b.big .*U8 .*\[4294967297\]" "$work/out" && pass || { fail "big pth tensor"; cat "$work/out"; }
}

case $what in
matrix) matrix ;;
complex) complex ;;
zip64) zip64 ;;
*) echo "unknown test $what"; exit 2 ;;
esac
finish "writers_$what"
