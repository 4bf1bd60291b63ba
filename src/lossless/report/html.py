"""``replay --html OUT``: one self-contained page (inline SVG, CSS and script; no
network) showing a replayed session call by call.

The charts are drawn here, as SVG, so the page shows everything even with scripts
off: context tokens per call managed and unmanaged against the window, the
auto-compact threshold and the warning line; a marker wherever a stage fired (its
tooltip says what the stage did); cumulative input cost with prompt caching for
both, in base-input-token units.  The inline script only adds the per-call readout
under the pointer, and marks the page ``data-rendered`` once it ran (a browser test
reads that mark: a script error leaves ``data-script-error`` instead).
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any, Sequence

from ..store import atomic_write

WIDTH, HEIGHT = 1160, 340
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 16, 36
COLORS = {
    "unmanaged": "#9aa3ad", "managed": "#1f6feb", "recorded": "#d97706",
    "window": "#cf222e", "threshold": "#bf8700", "warning": "#d4a72c",
}
STAGE_COLORS = ("#8250df", "#1a7f37", "#bc4c00", "#0969da", "#cf222e", "#6e7781", "#953800")


def _ticks(top: float, n: int = 5) -> list[float]:
    raw = top / n
    mag = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top // step) + 1)]


def _fmt(n: float) -> str:
    return f"{n / 1000:,.0f}k" if n >= 10_000 else f"{n:,.0f}"


class _Plot:
    """Maps (call, value) to SVG coordinates for one chart."""

    def __init__(self, calls: int, top: float) -> None:
        self.calls, self.top = max(calls, 1), max(top, 1.0)

    def x(self, i: float) -> float:
        span = WIDTH - LEFT - RIGHT
        return LEFT + (span * i / (self.calls - 1) if self.calls > 1 else span / 2)

    def y(self, v: float) -> float:
        return TOP + (HEIGHT - TOP - BOTTOM) * (1 - v / self.top)

    def line(self, values: Sequence[float], color: str, name: str, dash: str = "") -> str:
        points = " ".join(f"{self.x(i):.1f},{self.y(v):.1f}" for i, v in enumerate(values))
        extra = f' stroke-dasharray="{dash}"' if dash else ""
        return (f'<polyline class="series" data-series="{name}" fill="none" stroke="{color}" stroke-width="2"'
                f'{extra} points="{points}"/>')

    def level(self, value: float, color: str, label: str, dash: str, *, left: bool = False) -> str:
        y = self.y(value)
        x, anchor = (LEFT + 6, "start") if left else (WIDTH - RIGHT - 4, "end")
        return (f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="{color}" '
                f'stroke-width="1.5" stroke-dasharray="{dash}"><title>{escape(label)}</title></line>'
                f'<text x="{x}" y="{y - 4:.1f}" text-anchor="{anchor}" fill="{color}" '
                f'class="lvl">{escape(label)}</text>')

    def axes(self, unit: str) -> str:
        parts = [f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" class="axis"/>',
                 f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{HEIGHT - BOTTOM}" y2="{HEIGHT - BOTTOM}" '
                 f'class="axis"/>']
        for t in _ticks(self.top):
            y = self.y(t)
            parts.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                         f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
        for t in _ticks(self.calls - 1 or 1, 10):
            if t <= self.calls - 1:
                parts.append(f'<text x="{self.x(t):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">'
                             f'{int(t) + 1}</text>')
        parts.append(f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 4}" text-anchor="middle">call</text>'
                     f'<text x="14" y="{TOP + (HEIGHT - TOP - BOTTOM) / 2}" text-anchor="middle" '
                     f'transform="rotate(-90 14 {TOP + (HEIGHT - TOP - BOTTOM) / 2})">{escape(unit)}</text>')
        return "".join(parts)


def _svg(chart_id: str, body: str) -> str:
    return (f'<svg id="{chart_id}" class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img">{body}'
            f'<line class="cursor" x1="0" x2="0" y1="{TOP}" y2="{HEIGHT - BOTTOM}" visibility="hidden"/></svg>')


def tokens_chart(report: Any) -> str:
    """The SVG of context tokens per call, with the budget lines and stage markers."""
    calls = report.per_call
    top = max([report.window, *(c.tokens_unmanaged for c in calls), *(c.tokens_managed for c in calls)]) * 1.05
    p = _Plot(len(calls), top)
    parts = [p.axes("context tokens")]
    parts.append(p.level(report.window, COLORS["window"], f"window {report.window:,}", "6 3"))
    if report.threshold:
        parts.append(p.level(report.threshold, COLORS["threshold"],
                             f"auto-compact threshold {report.threshold:,}", "4 4"))
    if report.warning:
        parts.append(p.level(report.warning, COLORS["warning"], f"warning {report.warning:,}", "2 4", left=True))
    parts.append(p.line([c.tokens_unmanaged for c in calls], COLORS["unmanaged"], "unmanaged"))
    if any(c.recorded_tokens for c in calls):
        parts.append(p.line([c.recorded_tokens for c in calls], COLORS["recorded"], "recorded", "3 3"))
    parts.append(p.line([c.tokens_managed for c in calls], COLORS["managed"], "managed"))
    stages = _stage_names(report)
    for c in calls:
        if not c.stages:
            continue
        color = STAGE_COLORS[stages.index(c.stages[0]) % len(STAGE_COLORS)]
        what = "\n".join(f"{s}: {d}" for s, d in zip(c.stages, c.details or [""] * len(c.stages)))
        title = (f"call {c.call + 1}: {c.tokens_unmanaged:,} unmanaged → {c.tokens_managed:,} managed tokens\n"
                 f"{what}")
        parts.append(f'<g class="marker" data-call="{c.call + 1}"><title>{escape(title)}</title>'
                     f'<line x1="{p.x(c.call):.1f}" x2="{p.x(c.call):.1f}" y1="{TOP}" y2="{HEIGHT - BOTTOM}" '
                     f'stroke="{color}" stroke-opacity="0.25" stroke-width="3"/>'
                     f'<circle cx="{p.x(c.call):.1f}" cy="{p.y(c.tokens_managed):.1f}" r="6" fill="{color}" '
                     f'stroke="#fff" stroke-width="1.5"/></g>')
    return _svg("tokens", "".join(parts))


def cost_chart(report: Any) -> str:
    """The SVG of cumulative input cost with caching, unmanaged and managed."""
    calls = report.per_call
    top = max([1.0, *(c.cost_unmanaged for c in calls), *(c.cost_managed for c in calls)]) * 1.05
    p = _Plot(len(calls), top)
    return _svg("cost", p.axes("base-input-token units") +
                p.line([c.cost_unmanaged for c in calls], COLORS["unmanaged"], "unmanaged") +
                p.line([c.cost_managed for c in calls], COLORS["managed"], "managed"))


def _stage_names(report: Any) -> list[str]:
    names: list[str] = []
    for c in report.per_call:
        names.extend(s for s in c.stages if s not in names)
    return names


def _card(label: str, unmanaged: str, managed: str) -> str:
    return (f'<div class="card"><div class="label">{escape(label)}</div>'
            f'<div><span class="u">{escape(unmanaged)}</span> → <span class="m">{escape(managed)}</span></div></div>')


def render_html(report: Any, *, title: str | None = None, notes: Sequence[str] = ()) -> str:
    """The page for ``report`` (a ``ReplayReport`` with ``per_call``), as a string."""
    title = title or f"lossless replay: {report.file}"
    cost = report.cost or {"unmanaged": 0, "managed": 0}
    cards = "".join((
        _card("peak context tokens", f"{report.peak_unmanaged_tokens:,}", f"{report.peak_tokens:,}"),
        _card("calls over the window", str(report.unmanaged_over_window_calls), str(report.over_window_calls)),
        _card("input cost with caching (base-input-token units)", f"{cost['unmanaged']:,}", f"{cost['managed']:,}"),
        _card("cache-read ratio", f"{report.unmanaged_cache_read_ratio:.3f}", f"{report.cache_read_ratio:.3f}"),
    ))
    stages = _stage_names(report)
    legend_stages = "".join(
        f'<span><i style="background:{STAGE_COLORS[i % len(STAGE_COLORS)]}"></i>{escape(s)} ×{report.stages.get(s, 0)}'
        f"</span>" for i, s in enumerate(stages)) or "<span>no stage fired</span>"
    events = "".join(
        f"<tr><td>{c.call + 1}</td><td>{escape(s)}</td><td>{escape(d)}</td></tr>"
        for c in report.per_call for s, d in zip(c.stages, c.details or [""] * len(c.stages)))
    data = [{"call": c.call + 1, "u": c.tokens_unmanaged, "m": c.tokens_managed, "r": c.recorded_tokens,
             "cu": c.cost_unmanaged, "cm": c.cost_managed, "s": c.stages} for c in report.per_call]
    payload = json.dumps({"calls": data, "left": LEFT, "right": RIGHT, "width": WIDTH}).replace("</", "<\\/")
    note_html = "".join(f"<li>{escape(n)}</li>" for n in notes)
    recorded = any(c.recorded_tokens for c in report.per_call)
    series = "".join(f'<span><i style="background:{COLORS[k]}"></i>{escape(label)}</span>' for k, label in (
        ("unmanaged", "unmanaged (the whole history)"), ("managed", "managed (what lossless sends)"),
        ("recorded", "recorded (the size the file's usage reports)"), ("window", "window"),
        ("threshold", "auto-compact threshold"), ("warning", "warning")) if k != "recorded" or recorded)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{_CSS}</style></head>
<body>
<h1>{escape(title)}</h1>
<p class="sub">{report.calls} calls replayed under a {report.window:,}-token window · auto-compact threshold
{report.threshold:,} · each figure: unmanaged → managed (lossless)</p>
<div class="cards">{cards}</div>
<ul class="notes">{note_html}</ul>
<h2>Context tokens per call</h2>
<div class="legend">{series}</div>
<div class="legend">{legend_stages} <span class="hint">(hover a marker: what the stage did)</span></div>
{tokens_chart(report) if report.per_call else "<p>No call was replayed.</p>"}
<div id="readout" class="readout">&nbsp;</div>
<h2>Cumulative input cost with prompt caching <small>(base-input-token units: a cache read counts 0.1, a
cache write 1.25; the managed cost includes lossless's own summary calls)</small></h2>
{cost_chart(report) if report.per_call else ""}
<h2>What each stage did</h2>
<table><thead><tr><th>call</th><th>stage</th><th>what it did</th></tr></thead><tbody>{events}</tbody></table>
<script type="application/json" id="data">{payload}</script>
<script>{_JS}</script>
</body></html>
"""


def write_html(report: Any, path: str | Path, **kwargs: Any) -> Path:
    """Write the page atomically to ``path``; returns the path."""
    path = Path(path)
    atomic_write(path, render_html(report, **kwargs).encode("utf-8"))
    return path


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px 32px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px;word-break:break-all}h2{font-size:16px;margin:22px 0 6px}
h2 small{font-weight:normal;color:#59636e;font-size:12px}.sub{color:#59636e;margin:0 0 12px}
.cards{display:flex;gap:12px;flex-wrap:wrap}.card{border:1px solid #d1d9e0;border-radius:6px;padding:8px 12px}
.card .label{color:#59636e;font-size:12px}.u{color:#59636e;font-weight:600}.m{color:#1f6feb;font-weight:600}
.legend{display:flex;gap:14px;flex-wrap:wrap;font-size:12px;margin:2px 0}
.legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:4px;vertical-align:-2px}
.hint{color:#59636e}.chart{display:block;max-width:100%;height:auto}
.chart text{font-size:11px;fill:#59636e}.chart .lvl{font-size:11px}.axis{stroke:#59636e}.grid{stroke:#eef1f4}
.cursor{stroke:#1f2328;stroke-opacity:.4}.marker{cursor:help}.readout{font:12px ui-monospace,monospace;min-height:1.4em}
table{border-collapse:collapse;font-size:12px}td,th{border-bottom:1px solid #eef1f4;padding:3px 8px;text-align:left;
vertical-align:top}.notes{color:#9a6700}
"""

_JS = """
(function () {
  window.addEventListener("error", function (e) {
    document.body.setAttribute("data-script-error", String(e.message || e));
  });
  var d = JSON.parse(document.getElementById("data").textContent);
  var n = d.calls.length, readout = document.getElementById("readout");
  function fmt(v) { return Math.round(v).toLocaleString("en-US"); }
  document.querySelectorAll("svg.chart").forEach(function (svg) {
    var cursor = svg.querySelector(".cursor");
    svg.addEventListener("mousemove", function (ev) {
      if (!n) return;
      var box = svg.getBoundingClientRect(), scale = d.width / box.width;
      var x = (ev.clientX - box.left) * scale, span = d.width - d.left - d.right;
      var i = n > 1 ? Math.round((x - d.left) / span * (n - 1)) : 0;
      i = Math.max(0, Math.min(n - 1, i));
      var c = d.calls[i], cx = n > 1 ? d.left + span * i / (n - 1) : d.left + span / 2;
      cursor.setAttribute("x1", cx); cursor.setAttribute("x2", cx); cursor.setAttribute("visibility", "visible");
      readout.textContent = "call " + c.call + ": unmanaged " + fmt(c.u) + " tokens, managed " + fmt(c.m) +
        (c.r ? ", recorded " + fmt(c.r) : "") + " · cost so far " + fmt(c.cu) + " → " + fmt(c.cm) +
        (c.s.length ? " · fired: " + c.s.join(", ") : "");
    });
  });
  document.body.setAttribute("data-rendered", String(document.querySelectorAll("polyline.series").length));
})();
"""
