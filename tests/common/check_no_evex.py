#!/usr/bin/env python3
"""Fail if a program holds an EVEX-encoded (AVX-512) instruction.

The *_avx512emu suites run the AVX-512 kernels through SIMDe on CPUs
without AVX-512; one real AVX-512 instruction in them would die with SIGILL
there. In 64-bit mode the byte 0x62 after the legacy prefixes always starts
an EVEX instruction (its other meaning, BOUND, does not exist there), so the
disassembly's raw bytes decide, whatever the mnemonic.

usage: check_no_evex.py [--expect-evex] OBJDUMP FILE...
--expect-evex inverts the verdict: each FILE must hold EVEX code (the
self-check that the scan finds what it looks for)."""
import re
import subprocess
import sys

LEGACY_PREFIXES = {0x66, 0x67, 0xF2, 0xF3, 0x2E, 0x3E, 0x26, 0x36, 0x64, 0x65, 0xF0}
# "  401a2c:\t62 f1 7c 48 10 03 \tvmovups (%rbx),%zmm0" with objdump -w.
LINE = re.compile(r"^\s*([0-9a-f]+):\t((?:[0-9a-f]{2} )+)\s*\t?(.*)$")
FUNC = re.compile(r"^[0-9a-f]+ <(.+)>:$")


def evex_instructions(objdump, path):
    out = subprocess.run([objdump, "-d", "-w", path], capture_output=True, text=True, check=True)
    found, func = [], "?"
    for line in out.stdout.splitlines():
        m = FUNC.match(line)
        if m:
            func = m.group(1)
            continue
        m = LINE.match(line)
        if not m:
            continue
        raw = [int(b, 16) for b in m.group(2).split()]
        i = 0
        while i < len(raw) and raw[i] in LEGACY_PREFIXES:
            i += 1
        if i < len(raw) and raw[i] == 0x62:
            found.append(f"{func}: {m.group(3).strip()}")
    return found


def main(argv):
    expect = False
    if argv and argv[0] == "--expect-evex":
        expect, argv = True, argv[1:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    objdump, files = argv[0], argv[1:]
    bad = 0
    for path in files:
        found = evex_instructions(objdump, path)
        if expect and not found:
            print(f"FAIL {path}: no EVEX instruction found, but it was built for AVX-512")
            bad += 1
        elif not expect and found:
            print(f"FAIL {path}: {len(found)} EVEX (AVX-512) instructions, e.g.")
            for f in found[:5]:
                print(f"    {f}")
            bad += 1
        else:
            print(f"ok   {path}: {len(found)} EVEX instructions")
    print(f"{len(files) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
