#!/usr/bin/env bash
# Runs a test suite on an emulated Haswell (AVX2, no AVX-512):
#   qemu_haswell.sh QEMU SUITE
# qemu-user's translator emits host vector instructions of its own choosing,
# and on some hosts its result differs from every real CPU's (seen: qemu 7.2
# on an AVX-512 AMD EPYC turned one compressed-tensors AVX2 case to zeros,
# which the same binary computes right natively and under valgrind). A suite
# that fails under qemu with an ordinary test failure is therefore run again
# natively, capped at AVX2 (the paths an emulated Haswell takes): if that
# passes, the emulator is at fault on this host and the run is reported as
# skipped, naming it. A death by signal (SIGILL: an AVX-512 instruction
# reached a CPU without it, what this run exists to catch) always fails, as
# does a native failure or a host without AVX2.
set -u
qemu=$1 suite=$2
"$qemu" -cpu Haswell "$suite"
rc=$?
[ "$rc" -eq 0 ] && exit 0
if [ "$rc" -ge 128 ] || ! grep -qw avx2 /proc/cpuinfo; then
  exit "$rc"
fi
echo "qemu_haswell: the suite failed under qemu (exit $rc); running it natively at AMN_SIMD=avx2"
AMN_SIMD=avx2 "$suite" >/dev/null 2>&1
native=$?
if [ "$native" -eq 0 ]; then
  echo "SKIP: $(basename "$suite"): qemu-x86_64 ($("$qemu" --version | head -1)) computes" \
       "differently from this CPU, where the same AVX2 paths pass natively"
  exit 77
fi
echo "qemu_haswell: the native AVX2 run fails too (exit $native)"
exit "$rc"
