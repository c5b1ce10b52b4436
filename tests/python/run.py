#!/usr/bin/python3
"""ctest's entry to the Python suite: pytest over tests/python against the
build's libamn ($AMN_LIBRARY) and plugins (found beside it, or built in).

Exit codes: pytest's, except 77 (ctest's SKIP_RETURN_CODE) when nothing
could run: numpy or pytest missing (a failure under CI=true, where
.ci/deps installs them), every test skipped, or a sanitizer build whose
runtime cannot be preloaded. An ASan-instrumented libamn cannot be
dlopen()ed into an uninstrumented interpreter (the ASan runtime must come
first), so in such a build the suite re-runs itself with the compiler's
libasan (and libubsan) in LD_PRELOAD; leak detection is off there, as
CPython keeps its interned objects until exit by design.
"""

import os
import sys


def skip(msg: str) -> None:
    print(f"SKIP python suite: {msg}")
    sys.exit(77)


def main() -> int:
    ci = os.environ.get("CI") == "true"
    try:
        import numpy  # noqa: F401
        import pytest
    except ImportError as e:
        if ci:
            print(f"python suite: {e} (install python3-numpy python3-pytest: .ci/deps)")
            return 1
        skip(f"{e}; install python3-numpy and python3-pytest")
    san = os.environ.get("AMN_SANITIZE", "")
    if "address" in san and "AMN_PY_PRELOADED" not in os.environ:
        rt = [p for p in os.environ.get("AMN_SANITIZER_RUNTIME", "").split(":") if os.path.isfile(p)]
        if not rt:
            skip(f"libamn is built with -fsanitize={san} and no sanitizer runtime was found to "
                 "LD_PRELOAD into python")
        env = dict(os.environ, AMN_PY_PRELOADED="1",
                   LD_PRELOAD=":".join(rt + [os.environ.get("LD_PRELOAD", "")]).strip(":"),
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        os.execve(sys.executable, [sys.executable] + sys.argv, env)

    class Count:
        passed = skipped = failed = 0

        def pytest_runtest_logreport(self, report):  # noqa: N802 (pytest hook name)
            if report.when == "call" and report.passed:
                Count.passed += 1
            elif report.skipped:
                Count.skipped += 1
            elif report.failed:
                Count.failed += 1

    here = os.path.dirname(os.path.abspath(__file__))
    args = ["-q", "-rs", "-p", "no:cacheprovider", here] + sys.argv[1:]
    rc = pytest.main(args, plugins=[Count()])
    if rc == 0 and Count.passed == 0:
        skip("every test was skipped (plugins not built)")
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
