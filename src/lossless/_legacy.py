"""The project's former name, ``recollect``: what a user set up under it is still read.

An environment variable ``RECOLLECT_X`` stands in for an unset ``LOSSLESS_X``, and a store
folder ``.recollect`` for a missing ``.lossless``; either says so once, on one line of
stderr, naming the new spelling.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

NEW_PREFIX, OLD_PREFIX = "LOSSLESS_", "RECOLLECT_"
STORE_DIR, OLD_STORE_DIR = ".lossless", ".recollect"

_told: set[str] = set()


def notice(text: str) -> None:
    """Print ``text`` once per process, as one line of stderr."""
    if text not in _told:
        _told.add(text)
        print(f"lossless: {text}", file=sys.stderr)


def getenv(name: str) -> str | None:
    """``$name`` (a ``LOSSLESS_`` variable), else the same variable under the old prefix."""
    value = os.environ.get(name)
    if value is not None or not name.startswith(NEW_PREFIX):
        return value
    old = OLD_PREFIX + name.removeprefix(NEW_PREFIX)
    value = os.environ.get(old)
    if value is not None:
        notice(f"reading ${old}, the old name of ${name}: rename it")
    return value


def store_folder(parent: Path) -> Path:
    """``parent/.lossless``, or ``parent/.recollect`` when only the old folder exists."""
    new, old = parent / STORE_DIR, parent / OLD_STORE_DIR
    if not new.exists() and old.is_dir():
        notice(f"using {old}, a store under the old name: rename the folder to {STORE_DIR}")
        return old
    return new
