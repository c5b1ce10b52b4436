#!/usr/bin/env bash
# Model folders packed as archives (.tar, .tar.gz, .tar.xz, .tar.zst, .zip)
# open as the folder they hold: every command's output equals the one of
# the unpacked folder, byte for byte; hostile archives are refused with
# their typed exit code and leave no output.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
harness_init archives "$1" "$2"
need_plugin safetensors
cd "$work" || exit 1

# Folders: one file, and shards with an index (written by amn's folder writer).
mkdir -p one/model sharded
cp "$src/fixtures/example/tiny-f32.safetensors" one/model/model.safetensors
echo '{"model_type": "tiny"}' >one/model/config.json
"$amn" remember "$src/fixtures/example/tiny-f32.safetensors" --to f32 --shard-size 1KB \
  -o sharded/model/ --quiet || fail "making the sharded folder"
[ "$(ls sharded/model/*.safetensors | wc -l)" -gt 1 ] && pass || fail "the folder has no shards"

pack() { # pack DIR: every kind of archive of DIR/model
  (cd "$1" && tar cf ../"$1".tar model && tar czf ../"$1".tar.gz model &&
    tar cJf ../"$1".tar.xz model && tar --zstd -cf ../"$1".tar.zst model &&
    tar cjf ../"$1".tar.bz2 model) || fail "tar $1"
  $py - "$1" <<'PY' || fail "zip $1"
import os, sys, zipfile
d = sys.argv[1]
for name, how in ((d + ".zip", zipfile.ZIP_DEFLATED), (d + "-stored.zip", zipfile.ZIP_STORED)):
    with zipfile.ZipFile(name, "w", how) as z:
        for f in sorted(os.listdir(os.path.join(d, "model"))):
            z.write(os.path.join(d, "model", f), "model/" + f)
PY
}

for d in one sharded; do
  pack $d
  "$amn" convert $d/model --to safetensors -o ref-$d.safetensors --quiet || fail "convert $d/"
  "$amn" remember $d/model --to bf16 -o ref-$d-bf16.safetensors --quiet || fail "remember $d/"
  bnb=false
  have "encode bnb" && bnb=true &&
    { "$amn" forget $d/model --to bnb-nf4 -o ref-$d-nf4.safetensors --quiet || fail "forget $d/"; }
  "$amn" parse $d/model | tail -n +2 >ref-$d.parse
  "$amn" inspect $d/model | tail -n +2 >ref-$d.inspect
  for a in $d.tar $d.tar.gz $d.tar.xz $d.tar.zst $d.tar.bz2 $d.zip $d-stored.zip; do
    expect "convert $a" 0 convert $a --to safetensors -o $a.safetensors --quiet
    same "convert $a" ref-$d.safetensors $a.safetensors
    expect "remember $a" 0 remember $a --to bf16 -o $a.bf16.safetensors --quiet
    same "remember $a" ref-$d-bf16.safetensors $a.bf16.safetensors
    if $bnb; then
      expect "forget $a" 0 forget $a --to bnb-nf4 -o $a.nf4.safetensors --quiet
      same "forget $a" ref-$d-nf4.safetensors $a.nf4.safetensors
    fi
    "$amn" parse $a | tail -n +2 >$a.parse
    same "parse $a" ref-$d.parse $a.parse
    "$amn" inspect $a | tail -n +2 >$a.inspect
    same "inspect $a" ref-$d.inspect $a.inspect
    expect "scan $a" 0 scan $a
    says "scan $a" "model/"
  done
done

# In place: the tensors of an uncompressed tar (or stored ZIP) lie in its own
# mapping, so AMN_INPUT=pread reads them from the archive at their offsets
# (past the 512 bytes read at 0 to recognise it); a compressed archive's
# model files are decompressed into unlinked temporary files in $TMPDIR,
# whence they are read the same way.
mkdir -p spill
# One trace file per thread (-ff): with -f into one stream, a call another
# thread interrupts is split over an "<unfinished ...>" line and a
# "resumed" one, and the split line would escape the offset-0 filter.
reads() { # reads ARCHIVE [FILE-PATTERN]: the tensor reads from the archive (or FILE)
  rm -rf trace && mkdir trace
  TMPDIR=$work/spill AMN_INPUT=pread strace -ff -o trace/t -y -e trace=pread64 "$amn" convert \
    "$1" --to safetensors -o zc.safetensors --force --quiet >/dev/null 2>&1
  cat trace/t.* | grep -E "pread64\([0-9]+<${2:-[^>]*/$1}>" | grep -cvE ", 0\) = [0-9]+$"
}
if command -v strace >/dev/null && strace -o /dev/null true 2>/dev/null; then
  [ "$(reads one.tar)" -gt 0 ] && pass || fail "one.tar: tensors not read from the tar in place"
  [ "$(reads one-stored.zip)" -gt 0 ] && pass || fail "one-stored.zip: tensors not read in place"
  [ "$(reads one.tar.gz)" -eq 0 ] && pass || fail "one.tar.gz: tensors read from the file"
  for a in one.tar.gz one.zip sharded.tar.zst; do
    [ "$(reads $a "$work/spill/(#[0-9]+|\.amn-member-[^>]*)")" -gt 0 ] && pass ||
      fail "$a: tensors not read from a temporary file in \$TMPDIR"
  done
  [ -z "$(ls -A spill)" ] && pass || fail "temporary files left in \$TMPDIR"
else
  echo "note: no working strace; the in-place check is left out"
fi

# A GGUF, an npz and a .pth packed alone open as what they are; a compressed
# .pth needs random access for a header-only look, and the error says so.
mkdir -p other/gguf other/npz other/pth
cp "$src/fixtures/gguf/tiny-quant.gguf" other/gguf/
cp "$src/fixtures/npz/stored.npz" other/npz/
pth=$(ls "$src"/fixtures/pth/*.pth | grep -v /bad_ | head -1)
cp "$pth" other/pth/model.pth
(cd other && for k in gguf npz pth; do tar czf ../$k.tgz $k && tar cf ../$k.tar $k; done)
for k in gguf npz pth; do
  have "format $k" || continue
  f=$(ls other/$k/*)
  "$amn" parse "$f" | tail -n +2 >ref-$k.parse
  "$amn" convert "$f" --to safetensors -o ref-$k.safetensors --quiet || fail "convert $f"
  for a in $k.tar $k.tgz; do
    "$amn" parse $a | tail -n +2 >$a.parse
    same "parse $a" ref-$k.parse $a.parse
    expect "convert $a" 0 convert $a --to safetensors -o $a.safetensors --quiet
    same "convert $a" ref-$k.safetensors $a.safetensors
  done
  if [ $k = pth ]; then
    # Every member is kept whole up to --max-header bytes: a small cap
    # makes this small .pth one that a header-only look cannot reach.
    expect "inspect pth.tgz" 3 inspect pth.tgz --max-header 64
    says "inspect pth.tgz" "pth.tgz/pth/model.pth"
    says "inspect pth.tgz" "random access"
  else
    expect "inspect $k.tgz" 0 inspect $k.tgz
  fi
done

# parse and scan read a compressed archive's safetensors by their headers:
# no temporary file (none can be made here). A .pth reads its ZIP directory
# at its end first: past the header's prefix kept (a small one here, as
# for inspect below), parse decompresses it to a temporary file, and says
# so, naming the member, when there is none.
for a in one.tar.gz sharded.tar.zst sharded.zip; do
  TMPDIR=$work/none "$amn" parse $a | tail -n +2 >$a.notmp.parse
  same "parse $a, no TMPDIR" $a.parse $a.notmp.parse
  TMPDIR=$work/none expect "scan $a, no TMPDIR" 0 scan $a
done
if have "format pth"; then
  TMPDIR=$work/none expect "parse pth.tgz, no TMPDIR" 6 parse pth.tgz --max-header 64
  says "parse pth.tgz, no TMPDIR" "member 'pth/model.pth': no temporary file in $work/none"
fi

# A sharded PyTorch checkpoint (pytorch_model-0000K-of-0000N.bin and its
# index), packed: its shards in the index's order, as from the folder.
if have "format pth"; then
  mkdir -p bins/model
  $py - "$amn" <<'PY' || fail "making the .bin shards"
import json, subprocess, sys
amn = sys.argv[1]
ix = json.load(open("sharded/model/model.safetensors.index.json"))
shards = sorted(set(ix["weight_map"].values()))
name = {}
for k, s in enumerate(shards):
    name[s] = "pytorch_model-%05d-of-%05d.bin" % (k + 1, len(shards))
    subprocess.run([amn, "convert", "sharded/model/" + s, "--to", "pth", "-o",
                    "bins/model/" + name[s], "--quiet"], check=True)
wm = {t: name[s] for t, s in ix["weight_map"].items()}
json.dump({"metadata": {}, "weight_map": wm}, open("bins/model/pytorch_model.bin.index.json", "w"))
# The index naming a shard outside its folder, and one naming no .bin.
for tag, bad in (("outside", "../" + name[shards[0]]), ("notbin", shards[0])):
    m = dict(wm)
    m[sorted(m)[0]] = bad
    json.dump({"weight_map": m}, open("bins-%s.json" % tag, "w"))
PY
  pack bins
  "$amn" parse bins/model >ref-bins.parse
  "$amn" convert bins/model --to safetensors -o ref-bins.safetensors --quiet || fail "convert bins/"
  for a in bins.tar bins.tar.gz bins.tar.zst bins.zip; do
    "$amn" parse $a | sed "s|^Parsed $a |Parsed bins/model |" >$a.parse
    same "parse $a" ref-bins.parse $a.parse
    expect "convert $a" 0 convert $a --to safetensors -o $a.safetensors --quiet
    same "convert $a" ref-bins.safetensors $a.safetensors
  done
  for tag in outside notbin; do
    mkdir -p bins-$tag/model
    cp bins/model/* bins-$tag/model/
    cp bins-$tag.json bins-$tag/model/pytorch_model.bin.index.json
    (cd bins-$tag && tar czf ../bins-$tag.tgz model) || fail "tar bins-$tag"
    expect "convert bins-$tag.tgz" 1 convert bins-$tag.tgz --to safetensors -o bad.safetensors
    says "convert bins-$tag.tgz" "names a bad shard (not a .bin file beside the index)"
    [ ! -e bad.safetensors ] && pass || fail "bins-$tag.tgz: output left behind"
  done
fi

# scan: a hostile pickle packed in an archive is found as in the file.
if have "format pth"; then
  mkdir -p hostile/pth
  cp "$src/fixtures/pth/hostile_eval.pth" hostile/pth/model.pth
  (cd hostile && tar czf ../hostile.tgz pth) || fail "tar hostile"
  "$amn" scan hostile/pth/model.pth >out 2>&1; want=$?
  grep -v "^hostile" out >ref-hostile.scan
  expect "scan hostile.tgz" $want scan hostile.tgz
  says "scan hostile.tgz" "hostile.tgz/pth/model.pth"
  says "scan hostile.tgz" "UNSAFE"
  grep -v "^hostile.tgz" out | grep -v "model file of the archive" >hostile.scan
  same "scan hostile.tgz" ref-hostile.scan hostile.scan
fi

# Settings files: the archive's own config.json counts (as a file's folder's
# does), the one beside the archive does not. The .pth holds integer tensors
# that a declared bitsandbytes quantization marks as unhandled.
if have "format pth"; then
  mkdir -p q/pth beside
  cp "$pth" q/pth/model.pth
  decl='{"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}}'
  echo "$decl" >q/pth/config.json
  (cd q && tar czf ../beside/q.tgz pth) || fail "tar q"
  "$amn" parse q/pth/model.pth | tail -n +2 >ref-q.parse
  grep -q "unhandled" ref-q.parse && pass || fail "the declared quantization is not seen"
  "$amn" parse beside/q.tgz | tail -n +2 >q.parse
  same "settings inside the archive" ref-q.parse q.parse
  cp "$pth" beside/plain.pth
  (cd other && tar cf ../beside/plain.tar pth) || fail "tar plain"
  echo "$decl" >beside/config.json
  "$amn" parse beside/plain.tar | tail -n +2 >plain.parse
  same "settings beside the archive" ref-pth.parse plain.parse
fi

# A model folder written from an archive (-o DIR/) holds the packed folder's
# other files as one written from the unpacked folder does: config.json
# rewritten, tokenizer files and the like copied byte for byte, none of a
# subfolder and no hidden ones.
mkdir -p side/model/sub
cp "$src/fixtures/example/tiny-f32.safetensors" side/model/model.safetensors
echo '{"model_type": "tiny", "torch_dtype": "float32"}' >side/model/config.json
echo '{"version": "1.0"}' >side/model/tokenizer.json
printf 'a b\nc d\n' >side/model/merges.txt
echo '{"max_length": 8}' >side/model/generation_config.json
head -c 3000 /dev/urandom >side/model/tokenizer.model
echo x >side/model/sub/nested.txt
echo x >side/model/.hidden
pack side
sidecmds=("convert --to safetensors" "remember --to bf16")
have "encode bnb" && sidecmds+=("forget --to bnb-nf4")
for c in "${sidecmds[@]}"; do
  verb=${c%% *}
  "$amn" $c side/model -o ref-side-$verb/ --quiet || fail "$verb side/model -o DIR/"
  [ -f ref-side-$verb/tokenizer.model ] && [ -f ref-side-$verb/config.json ] && pass ||
    fail "$verb side/model: the folder's files were not copied"
  for a in side.tar side.tar.gz side.tar.zst side.tar.xz side.zip side-stored.zip; do
    TMPDIR=$work/spill expect "$verb $a -o DIR/" 0 $c $a -o $a-$verb/ --quiet
    diff -r ref-side-$verb $a-$verb >out 2>&1 && pass ||
      { fail "$verb $a -o DIR/: not the unpacked folder's output"; indent out; }
  done
done
[ -z "$(ls -A spill)" ] && pass || fail "temporary files left behind"
# An uncompressed tar needs no temporary file for its model files, but its
# folder's other files are unpacked into one: where none can be made, the
# error says where, and no folder is written.
TMPDIR=$work/no-such-dir expect "side.tar -o DIR/, TMPDIR missing" 6 convert side.tar \
  --to safetensors -o notmp-side/
says "side.tar -o DIR/, TMPDIR missing" "no temporary folder in $work/no-such-dir"
[ ! -e notmp-side ] && pass || fail "side.tar -o DIR/, TMPDIR missing: output left behind"

# Hostile archives: each refused with its exit code, nothing written.
$py - "$src/fixtures/example/tiny-f32.safetensors" <<'PY' || fail "making hostile archives"
import io, sys, tarfile, zipfile
st = open(sys.argv[1], "rb").read()
def tar(name, members, mode="w"):
    with tarfile.open(name, mode) as t:
        for m in members:
            info = tarfile.TarInfo(m[0])
            if m[1] == "file":
                info.size = len(m[2])
                t.addfile(info, io.BytesIO(m[2]))
            else:
                info.type = tarfile.SYMTYPE if m[1] == "sym" else tarfile.LNKTYPE
                info.linkname = m[2]
                t.addfile(info)
tar("traversal.tar", [("model/../../evil.safetensors", "file", st)])
tar("absolute.tar", [("/tmp/model/model.safetensors", "file", st)])
tar("symlink.tar", [("model/model.safetensors", "sym", "/etc/passwd")])
tar("hardlink.tar", [("model/a.txt", "file", b"x"), ("model/model.safetensors", "hard", "model/a.txt")])
tar("duplicate.tar", [("model/model.safetensors", "file", st), ("model/model.safetensors", "file", st)])
tar("empty.tar", [("model/config.json", "file", b"{}")])
full = open("one.tar", "rb").read()
open("truncated.tar", "wb").write(full[: 512 + len(st) // 2])
# 64 MiB of zeros beside the model: gzip expands it about 1000 times.
tar("bomb.tar.gz", [("model/model.safetensors", "file", st), ("model/zeros.dat", "file", bytes(64 << 20))], "w:gz")
with zipfile.ZipFile("ambiguous.zip", "w") as z:
    z.writestr("model.safetensors", st)
    z.writestr("x.npy", b"\x93NUMPY")
# ZIPs that readers could unpack as different folders: a local header that
# names another file than the central directory does (a streaming reader
# sees model/other.safetensors), a second ZIP appended (two end records),
# bytes between two members (where a streaming reader may find a member).
def folder_zip():
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("model/model.safetensors", st)
        z.writestr("model/config.json", b"{}")
    return b.getvalue()
good = folder_zip()
i = good.index(b"model/model.safetensors")  # the first local header's name
open("zip-localname.zip", "wb").write(good[:i] + b"model/other.safetensors" + good[i + 23:])
open("zip-twoends.zip", "wb").write(good + good)
second = good.index(b"PK\x03\x04", 4)  # the second member's local header
end = bytearray(good[:second] + b"JUNK" * 4 + good[second:])
# The central directory and end record move 16 bytes: their offsets follow.
import struct
e = end.rindex(b"PK\x05\x06")
cd_off = struct.unpack_from("<I", end, e + 16)[0] + 16
struct.pack_into("<I", end, e + 16, cd_off)
p = cd_off
while end[p:p + 4] == b"PK\x01\x02":
    off = struct.unpack_from("<I", end, p + 42)[0]
    if off >= second:
        struct.pack_into("<I", end, p + 42, off + 16)
    n, x, c = struct.unpack_from("<HHH", end, p + 28)
    p += 46 + n + x + c
open("zip-gap.zip", "wb").write(bytes(end))
open("zip-good.zip", "wb").write(good)
PY
# The folder's index, read from the archive: a shard it names must be a
# .safetensors member beside it, and every tensor it maps must be in one.
$py - sharded/model <<'PY' || fail "making bad indexes"
import io, json, os, sys, tarfile
d = sys.argv[1]
files = {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))}
ix = json.loads(files["model.safetensors.index.json"])
def tar(name, index, drop=None):
    with tarfile.open(name, "w") as t:
        for f, data in files.items():
            if f == drop:
                continue
            if f == "model.safetensors.index.json":
                data = json.dumps(index).encode()
            info = tarfile.TarInfo("model/" + f)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
first = sorted(ix["weight_map"])[0]
shard = ix["weight_map"][first]
bad = json.loads(json.dumps(ix)); bad["weight_map"][first] = "../" + shard
tar("ix-outside.tar", bad)
bad = json.loads(json.dumps(ix)); bad["weight_map"]["not.there"] = shard
tar("ix-unheld.tar", bad)
tar("ix-missing.tar", ix, drop=shard)
tar("ix-noweightmap.tar", {"metadata": {}})
PY
refused() { # refused ARCHIVE RC TEXT [OPTIONS...]
  local a=$1 rc=$2 text=$3; shift 3
  expect "convert $a" "$rc" convert $a --to safetensors -o $a.out.safetensors "$@"
  says "convert $a" "$text"
  [ ! -e $a.out.safetensors ] && pass || fail "$a: output left behind"
  expect "inspect $a" "$rc" inspect $a "$@"
}
refused ix-outside.tar 1 "names a bad shard"
refused ix-missing.tar 1 "names a bad shard"
refused ix-unheld.tar 1 "weight_map names not.there, no shard holds it"
refused ix-noweightmap.tar 1 "no weight_map object"
refused one.tar 4 "--max-items" --max-items 2 # model/, config.json, model.safetensors
refused traversal.tar 5 "leads outside the archive"
refused absolute.tar 5 "absolute path"
refused symlink.tar 5 "symbolic link"
refused hardlink.tar 5 "hard link"
refused duplicate.tar 5 "two members named 'model/model.safetensors'"
refused empty.tar 1 "holds no model files"
refused truncated.tar 1 "truncated"
refused bomb.tar.gz 4 "--max-ratio" --max-ratio 100
# Model files decompressed into temporary files hold no memory: the
# allocation caps do not count them (an index read whole still counts).
for cap in max-total max-alloc; do
  expect "convert one.tar.gz --$cap" 0 convert one.tar.gz --to safetensors \
    -o capped-$cap.safetensors --$cap 1K --quiet
  same "convert one.tar.gz --$cap" ref-one.safetensors capped-$cap.safetensors
  expect "inspect one.tar.gz --$cap" 0 inspect one.tar.gz --$cap 1K
  expect "convert sharded.tar.gz --$cap" 4 convert sharded.tar.gz --to safetensors \
    -o capped.safetensors --$cap 64
  says "convert sharded.tar.gz --$cap" "sharded.tar.gz: member 'model/model.safetensors.index.json'"
  [ ! -e capped.safetensors ] && pass || fail "--$cap: output left behind"
done
# Where no temporary file can be made, the error names the member and the
# folder, and nothing is written; a member ending early in a compressed
# stream is refused as in a plain tar, leaving no temporary file.
TMPDIR=$work/no-such-dir expect "TMPDIR missing" 6 convert one.tar.gz --to safetensors -o notmp.safetensors
says "TMPDIR missing" "model/model.safetensors"
says "TMPDIR missing" "$work/no-such-dir"
[ ! -e notmp.safetensors ] && pass || fail "TMPDIR missing: output left behind"
head -c $(($(stat -c %s one.tar.gz) * 2 / 3)) one.tar.gz >cut.tar.gz
# A member header announcing more bytes than the stream holds: 8 GiB (past
# the ratio cap: refused before any space is reserved) and twice the tar
# (within it: reserved, then refused as truncated, the space given back).
$py - one.tar <<'PY' || fail "making the lying headers"
import gzip, sys
t = bytearray(open(sys.argv[1], "rb").read())
off = 0
while t[off:off + 1] != b"\0":
    name = bytes(t[off:off + 100]).rstrip(b"\0")
    size = int(bytes(t[off + 124:off + 136]).rstrip(b"\0 ") or b"0", 8)
    if name.endswith(b".safetensors"):
        break
    off += 512 + (size + 511) // 512 * 512
for tag, claim in (("huge", 8 << 30), ("double", 2 * len(t))):
    h = bytearray(t)
    h[off + 124:off + 136] = b"%011o\0" % claim
    h[off + 148:off + 156] = b"        "
    h[off + 148:off + 156] = b"%06o\0 " % sum(h[off:off + 512])
    open("lying-%s.tar.gz" % tag, "wb").write(gzip.compress(bytes(h)))
PY
TMPDIR=$work/spill expect "lying-huge.tar.gz" 4 convert lying-huge.tar.gz --to safetensors \
  -o lying.safetensors
[ ! -e lying.safetensors ] && pass || fail "lying-huge.tar.gz: output left behind"
says "lying-huge.tar.gz" "member 'model/model.safetensors' says it holds 8589934592 bytes"
for a in cut.tar.gz lying-double.tar.gz; do
  TMPDIR=$work/spill "$amn" convert $a --to safetensors -o cut.safetensors >out 2>&1
  rc=$?
  [ $rc -eq 1 ] && pass || { fail "convert $a: exit $rc, wanted 1"; indent out; }
  [ ! -e cut.safetensors ] && pass || fail "$a: output left behind"
  [ -z "$(ls -A spill)" ] && pass || fail "$a: temporary files left in \$TMPDIR"
done
refused ambiguous.zip 5 "ambiguous ZIP"
expect "convert zip-good.zip" 0 convert zip-good.zip --to safetensors -o zip-good.safetensors --quiet
for a in zip-localname.zip zip-twoends.zip zip-gap.zip; do
  refused $a 5 "ambiguous ZIP"
  says "inspect $a" "ambiguous ZIP"
done
expect "scan traversal.tar" 1 scan traversal.tar # scan: 1 = unreadable
says "scan traversal.tar" "disallowed"
# The same archive within the default caps converts.
expect "bomb.tar.gz, default caps" 0 convert bomb.tar.gz --to safetensors -o bomb.safetensors --quiet
same "bomb.tar.gz" ref-one.safetensors bomb.safetensors
# Gigabytes of zeros at thousands to one (zstd): refused under the default
# caps, after decompressing no more than the cap allows.
mkdir -p zbomb/model
cp one/model/model.safetensors zbomb/model/
truncate -s 2G zbomb/model/zeros.dat
(cd zbomb && tar --zstd -cf ../zbomb.tar.zst model) || fail "tar zbomb"
rm -f zbomb/model/zeros.dat
refused zbomb.tar.zst 4 "--max-ratio"

# A ZIP's members are read no further than the model needs: the rest of a
# model file past its header for inspect, and members the model does not
# read (zeros deflated 1000:1, a wrong CRC) not at all, as a folder's other
# files are not. A model file whose CRC is wrong is read to its end by a
# conversion, which refuses it, while inspect reads its header alone.
mkdir -p crc
$py "$src/tests/lib/big_safetensors.py" crc/model.safetensors 2 --seed 4 ||
  fail "making crc/model.safetensors"
"$amn" convert crc/model.safetensors --to safetensors -o ref-crc.safetensors --quiet ||
  fail "convert crc/model.safetensors"
"$amn" inspect crc/model.safetensors | tail -n +2 >ref-crc.inspect
$py - crc/model.safetensors <<'PY' || fail "making the CRC ZIPs"
import struct, sys, zipfile
st = open(sys.argv[1], "rb").read()
def folder_zip(name, bad):
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("model/model.safetensors", st)
        z.writestr("model/zeros.dat", bytes(64 << 20))
        z.writestr("model/README.md", b"# notes\n" * 64)
    b = bytearray(open(name, "rb").read())
    # The member's CRC, wrong in its local header and in the directory alike.
    i = b.index(b"model/" + bad)
    while b[i - 30:i - 26] != b"PK\x03\x04":
        i = b.index(b"model/" + bad, i + 1)
    crc = struct.unpack_from("<I", b, i - 30 + 14)[0] ^ 0x5A5A5A5A
    struct.pack_into("<I", b, i - 30 + 14, crc)
    c = b.index(b"PK\x01\x02")
    while True:
        c = b.index(b"PK\x01\x02", c)
        n = struct.unpack_from("<H", b, c + 28)[0]
        if bytes(b[c + 46:c + 46 + n]) == b"model/" + bad:
            struct.pack_into("<I", b, c + 16, crc)
            break
        c += 4
    open(name, "wb").write(b)
folder_zip("crc-side.zip", b"README.md")
folder_zip("crc-model.zip", b"model.safetensors")
PY
expect "convert crc-side.zip" 0 convert crc-side.zip --to safetensors -o crc-side.safetensors \
  --max-ratio 10 --quiet
same "convert crc-side.zip" ref-crc.safetensors crc-side.safetensors
"$amn" inspect crc-model.zip | tail -n +2 >crc-model.inspect
same "inspect crc-model.zip" ref-crc.inspect crc-model.inspect
expect "convert crc-model.zip" 1 convert crc-model.zip --to safetensors -o crc-model.safetensors
says "convert crc-model.zip" "model/model.safetensors"
[ ! -e crc-model.safetensors ] && pass || fail "crc-model.zip: output left behind"

# A .tar.gz is checked as gzip checks it: each member's CRC-32 and length
# (libarchive's own gzip reader skips both), read to the end of the file,
# past the tar's end; members may follow one another, zeros may end it,
# nothing else may. What lies past the tar's end counts against the cap.
$py - one.tar <<'PY' || fail "making the gzip cases"
import gzip, struct, sys
t = open(sys.argv[1], "rb").read()
z = bytearray(gzip.compress(t))
def put(name, b):
    open(name, "wb").write(bytes(b))
bad = bytearray(z); bad[-8] ^= 1; put("gz-crc.tar.gz", bad)
bad = bytearray(z); bad[-4] ^= 1; put("gz-length.tar.gz", bad)
put("gz-short.tar.gz", z[:-4])
put("gz-members.tar.gz", gzip.compress(t[:700]) + gzip.compress(t[700:]))
put("gz-zeros.tar.gz", z + bytes(1000))
put("gz-garbage.tar.gz", z + b"garbage")
put("gz-tailbomb.tar.gz", gzip.compress(t + bytes(64 << 20)))
# The trailer reached while a 1 MiB model file is read: the damage is the
# stream's, found there, not that member's alone.
import io, json, tarfile
n = 1 << 18
h = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
h += b" " * (-len(h) % 8)
st = struct.pack("<Q", len(h)) + h + bytes(i * 7919 & 255 for i in range(4 * n))
b = io.BytesIO()
with tarfile.open(fileobj=b, mode="w") as tf:
    info = tarfile.TarInfo("model/model.safetensors")
    info.size = len(st)
    tf.addfile(info, io.BytesIO(st))
bad = bytearray(gzip.compress(b.getvalue())); bad[-8] ^= 1; put("gz-crc-late.tar.gz", bad)
PY
for a in gz-members.tar.gz gz-zeros.tar.gz; do
  expect "convert $a" 0 convert $a --to safetensors -o $a.safetensors --quiet
  same "convert $a" ref-one.safetensors $a.safetensors
done
for c in "gz-crc incorrect data check" "gz-length incorrect length check" \
  "gz-short the compressed stream ends early" "gz-garbage bytes after the end"; do
  a=${c%% *}.tar.gz
  refused $a 1 "$a: gzip: ${c#* }"
done
refused gz-tailbomb.tar.gz 4 "past the end of the tar" --max-ratio 100
refused gz-crc-late.tar.gz 1 \
  "gz-crc-late.tar.gz: gzip: incorrect data check (found while reading member 'model/model.safetensors')"

finish archives
