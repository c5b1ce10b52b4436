"""Shared fixtures of the Python suite (run by ctest through run.py)."""

from __future__ import annotations

import os
import sys
from typing import Callable

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("AMN_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "python"))
sys.path.insert(0, HERE)

import amn  # noqa: E402


def reference_dir() -> str:
    """$AMN_REFERENCE_DIR, else ../shared/fixtures beside the source tree; a
    skip when absent, a failure under CI=true (as AMN_REQUIRE_REFERENCE)."""
    d = os.environ.get("AMN_REFERENCE_DIR") or os.path.join(SRC, "..", "shared", "fixtures")
    if not os.path.isdir(d):
        if os.environ.get("CI") == "true":
            pytest.fail("reference corpus missing (AMN_REFERENCE_DIR or ../shared/fixtures)")
        pytest.skip("reference corpus not found; set AMN_REFERENCE_DIR")
    return d


@pytest.fixture
def ref() -> str:
    return reference_dir()


@pytest.fixture(scope="session")
def loaded() -> set:
    return {p.name for p in amn.plugins() if p.status == "loaded"}


@pytest.fixture
def need(loaded: set) -> Callable[..., None]:
    """need("gptq", "safetensors"): skip unless those plugins are loaded."""

    def check(*names: str) -> None:
        missing = [n for n in names if n not in loaded]
        if missing:
            pytest.skip(f"plugin(s) not built: {', '.join(missing)}")

    return check


def fixture_path(*parts: str) -> str:
    return os.path.join(SRC, "fixtures", *parts)


# The tests that start another interpreter: under a preloaded sanitizer
# runtime each start costs seconds, and what they check (the loader path,
# the kernel's SIGBUS) is not libamn's memory safety, which the rest covers.
no_sanitizer = pytest.mark.skipif(
    bool(os.environ.get("AMN_PY_PRELOADED")),
    reason="starts another interpreter: slow under the preloaded sanitizer runtime")
