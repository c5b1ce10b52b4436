"""amn: every tensor file into NumPy, dequantized, converted — over libamn.

    import amn
    with amn.open("model.safetensors") as m:
        w = m["model.embed_tokens.weight"]           # zero-copy, read-only
        for name, a in m.items(dtype="float32"):     # quantized weights decoded
            ...

libamn is found through $AMN_LIBRARY, a build tree beside this package's
source checkout (<src>/build/lib), or the system loader (LD_LIBRARY_PATH).
See python/README.md for the whole API.
"""

from ._errors import (
    DisallowedError,
    Error,
    InvalidError,
    IoError,
    LimitError,
    NoMemoryError,
    ParseError,
    UnsupportedError,
)
from ._model import Group, Limits, Model, TensorInfo, inspect, open
from ._ops import (
    ConvertResult,
    Finding,
    Matrix,
    Plugin,
    Progress,
    ScanReport,
    conversion_matrix,
    convert,
    forget,
    plugins,
    remember,
    scan,
)

__version__ = "0.1.0"


def library_path() -> str:
    """The libamn file this package loaded."""
    from ._lib import lib

    lib.get()
    return lib.path or ""


def simd() -> str:
    """The vector instruction set libamn's kernels use ("avx2", "scalar", ...)."""
    from ._lib import lib

    d = lib.get()
    return (d.amn_simd_name(d.amn_simd_level()) or b"").decode()


__all__ = [
    "ConvertResult",
    "DisallowedError",
    "Error",
    "Finding",
    "Group",
    "InvalidError",
    "IoError",
    "LimitError",
    "Limits",
    "Matrix",
    "Model",
    "NoMemoryError",
    "ParseError",
    "Plugin",
    "Progress",
    "ScanReport",
    "TensorInfo",
    "UnsupportedError",
    "conversion_matrix",
    "convert",
    "forget",
    "inspect",
    "library_path",
    "open",
    "plugins",
    "remember",
    "scan",
    "simd",
]
