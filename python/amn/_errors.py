"""Exceptions, one per libamn error class (amn/error.h)."""

from __future__ import annotations

from typing import Dict, Optional, Type


class Error(Exception):
    """Base class of every error libamn reports.

    ``code`` is libamn's negative AMN_E_* code, ``error_class`` its name
    ("parse", "unsupported", ...); ``str(e)`` is libamn's message.
    """

    code: int = 0
    error_class: str = "error"

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ParseError(Error):
    """Malformed input (AMN_E_PARSE)."""

    code, error_class = -1, "parse"


class UnsupportedError(Error):
    """Recognised but not handled, or its plugin is not installed (AMN_E_UNSUPPORTED)."""

    code, error_class = -2, "unsupported"


class LimitError(Error):
    """A safety cap (amn.Limits) was exceeded (AMN_E_LIMIT)."""

    code, error_class = -3, "limit"


class DisallowedError(Error):
    """Refused for security, e.g. a pickle global outside the allow-list (AMN_E_DISALLOWED)."""

    code, error_class = -4, "disallowed"


class IoError(Error, OSError):
    """The operating system refused (AMN_E_IO); also an ``OSError``."""

    code, error_class = -5, "io"


class NoMemoryError(Error, MemoryError):
    """An allocation failed (AMN_E_NOMEM); also a ``MemoryError``."""

    code, error_class = -6, "nomem"


class InvalidError(Error, ValueError):
    """The caller passed something wrong (AMN_E_INVALID); also a ``ValueError``."""

    code, error_class = -7, "invalid"


_BY_CODE: Dict[int, Type[Error]] = {
    c.code: c
    for c in (
        ParseError,
        UnsupportedError,
        LimitError,
        DisallowedError,
        IoError,
        NoMemoryError,
        InvalidError,
    )
}


def from_code(code: int, message: str) -> Error:
    """The exception for a libamn return code and message."""
    cls = _BY_CODE.get(code, Error)
    if not message:
        message = f"libamn error {code}"
    e = cls(message)  # one argument: OSError reads two as (errno, strerror)
    e.code = code
    return e
