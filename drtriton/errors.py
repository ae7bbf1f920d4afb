"""Internal errors, worded for users: one line that says what broke and where."""

from __future__ import annotations

import traceback


def describe_exception(e: BaseException) -> str:
    """`IndexError: list index out of range (rows.py:270)`."""
    frames = traceback.extract_tb(e.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(e).__name__}: {e}{where}"
