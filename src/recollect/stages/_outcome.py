"""Interim: the target and outcome of a tool call, in one line (replaced by the full version)."""

from __future__ import annotations

import re
from typing import Any, Mapping

_EXIT = (re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>"),
         re.compile(r"\bexit(?:ed with)? (?:code|status)[:=]?\s*(-?\d+)", re.I))


def exit_status(text: str) -> int | None:
    for rx in _EXIT:
        m = rx.search(text[:4000]) or rx.search(text[-4000:])
        if m:
            return int(m.group(1))
    return None


def target(tool: str, inp: Mapping[str, Any]) -> str:
    if not isinstance(inp, Mapping):
        return ""
    for key in ("command", "cmd", "file_path", "path", "notebook_path", "pattern", "query", "url", "description"):
        v = inp.get(key)
        if isinstance(v, str) and v.strip():
            return v
        if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
            return " ".join(v)
    return ""


def outcome(text: str, *, is_error: bool, limit: int = 160) -> str:
    code = exit_status(text)
    lines = [ln.strip() for ln in text[-8000:].splitlines() if ln.strip() and not ln.strip().startswith("<")]
    last = lines[-1] if lines else ""
    head = f"exit {code}" if code is not None else ("error" if is_error else "ok")
    line = f"{head} — {last}" if last else head
    flat = " ".join(line.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
