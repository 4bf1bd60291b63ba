"""How a replay shows itself: a terminal chart and table (``chart``) and one
self-contained HTML page (``html``).  Both read a ``ReplayReport`` and nothing else,
so what the page shows is what ``replay --json --per-call`` prints."""

from __future__ import annotations

from .chart import per_call_rows, terminal_chart, window_bar
from .html import render_html, write_html

__all__ = ["per_call_rows", "render_html", "terminal_chart", "window_bar", "write_html"]
