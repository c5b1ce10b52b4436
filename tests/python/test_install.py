"""An installed copy of the package (outside any source tree) finds libamn
only through the system loader (LD_LIBRARY_PATH), as with amn installed
under a prefix. `pip install ./python` itself is not run here: under load
pip alone takes 10-45 s (README: checked by hand, and what it installs is
this directory)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import SRC, fixture_path, no_sanitizer


@no_sanitizer
def test_installed_copy_uses_the_system_loader(tmp_path, need):
    need("safetensors")
    site = tmp_path / "site"
    shutil.copytree(os.path.join(SRC, "python", "amn"), site / "amn",
                    ignore=shutil.ignore_patterns("__pycache__"))
    # A prefix: lib/libamn.so and lib/amn/plugins beside it.
    import amn

    lib = tmp_path / "prefix" / "lib"
    lib.mkdir(parents=True)
    real = os.path.realpath(amn.library_path())
    os.symlink(real, lib / "libamn.so")
    plugins = os.path.join(os.path.dirname(real), "amn", "plugins")
    if os.path.isdir(plugins):
        (lib / "amn").mkdir()
        os.symlink(plugins, lib / "amn" / "plugins")
    env = {k: v for k, v in os.environ.items()
           if k not in ("AMN_LIBRARY", "PYTHONPATH", "AMN_PLUGIN_PATH", "AMN_PLUGIN_SYSTEM_PATH")}
    env.update(PYTHONPATH=str(site), LD_LIBRARY_PATH=str(lib))
    code = ("import amn, sys\n"
            "print(amn.__file__); print(amn.library_path())\n"
            "with amn.open(sys.argv[1]) as m: print(len(m))\n")
    r = subprocess.run([sys.executable, "-c", code, fixture_path("example", "tiny-f32.safetensors")],
                       env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    out = r.stdout.split("\n")
    assert out[0].startswith(str(site)) and out[1] == "libamn.so" and int(out[2]) > 0
