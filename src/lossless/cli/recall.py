"""``lossless recall HANDLE``: the original bytes behind a handle, on stdout.

Without ``--store`` or ``$LOSSLESS_HOME`` the handle is looked up in ``./.lossless``
and then in the ``.lossless`` of each folder above, nearest first (as git finds its
repository), so a handle is found from any folder inside the project whose session
made it.  A store is only read there, never created.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    s = sub.add_parser("recall", help="print the original content behind a handle")
    s.add_argument("handle", metavar="HANDLE", help="a handle from a marker or a report (sha256: and 24 hex digits)")
    s.add_argument("--store", help="the store: a directory or postgresql://… (default: $LOSSLESS_STORE, else "
                                   "$LOSSLESS_HOME, else ./.lossless or the nearest .lossless in a folder above)")
    s.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from .._legacy import getenv
    from ..storage import ENV_STORE, open_store
    from ..store import ENV_HOME

    store = args.store
    if store is None and not getenv(ENV_HOME) and not getenv(ENV_STORE):
        store = _nearest_holding(args.handle)
    data = open_store(store).artifacts.get_bytes(args.handle)  # the exact bytes, whatever they hold
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(data.decode("utf-8", "surrogateescape").encode("utf-8", "backslashreplace").decode("utf-8"))
    else:
        sys.stdout.flush()
        buffer.write(data)
        buffer.flush()
    return 0


def _nearest_holding(handle: str) -> str | None:
    """The nearest ``.lossless`` (this folder, then each one above) whose artifacts hold
    ``handle``; None (the default store, which then reports the handle missing) if none."""
    from .._legacy import store_folder
    from ..errors import LosslessError
    from ..store import ArtifactStore

    here = Path.cwd()
    for folder in (here, *here.parents):
        root = store_folder(folder)
        if not (root / "artifacts").is_dir():
            continue
        try:
            if handle in ArtifactStore(root):
                return str(root)
        except LosslessError:  # a store we cannot use is skipped here; the default one reports its own error
            continue
    return None
