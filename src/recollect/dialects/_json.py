"""Reading a whole JSON file with errors that name the file and line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..errors import FormatError


def load_json(path: Path) -> Any:
    """The parsed file; a ``FormatError`` naming the file (and line) for bad bytes or JSON."""
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except UnicodeDecodeError as e:
        raise FormatError(f"{path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    except json.JSONDecodeError as e:
        raise FormatError(f"{path}:{e.lineno}: not JSON ({e.msg} at column {e.colno})") from None
    except RecursionError:
        raise FormatError(f"{path}: JSON nested too deeply to be a session") from None
