"""Tables of the fidelity benchmark, from the workers' JSON rows.

Shares are pooled (hits over totals across the runs in a cell), except the average
over the calls after the first compaction, which is the mean of each run's own
average (runs that never compacted have none).  Cost is the sum of the policy's
cost over the sum of unmanaged cost in the same runs ("of which model": the part spent on
the policy's own model calls — summaries, session notes); "fits" restricts that to the
runs whose unmanaged history never exceeded the window.
"""

from __future__ import annotations

from typing import Any, Sequence

COLUMNS = (
    ("policy", 17), ("facts end", 9), ("facts avg", 9), ("users", 6), ("users+h", 7), ("reach", 6), ("depth max", 9),
    ("depth mean", 10), ("account", 7), ("cost", 6), ("of which model", 14), ("cost fits", 9), ("prefix/100", 10),
    ("model", 6),
    ("over", 5), ("invalid", 7), ("errors", 6),
)


def _pct(num: float, den: float) -> str:
    return f"{100.0 * num / den:.1f}%" if den else "–"


def _ratio(num: float, den: float) -> str:
    return f"{num / den:.3f}" if den else "–"


def cell(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Pooled figures of one (policy, window) over its runs."""
    ok = [r for r in rows if "error" not in r]
    tot = {k: sum(r[k] if k in r else r["users_end"] for r in ok)  # rows saved before users_quoted
           for k in ("facts", "facts_end", "users", "users_end", "users_quoted", "missing", "reachable",
                                              "depth_sum", "removed_calls", "covered_calls", "cost",
                                              "cost_unmanaged", "prefix_changes", "calls", "model_calls", "over",
                                              "invalid")}
    fits = [r for r in ok if r["peak_unmanaged"] <= r["window"]]
    avgs = [r["facts_avg"] for r in ok if r["facts_avg"] is not None]
    return {
        **tot,
        "errors": len(rows) - len(ok),
        "model_cost": sum(r.get("model_cost", 0.0) for r in ok),  # rows saved before it: 0
        "facts_avg": sum(avgs) / len(avgs) if avgs else None,
        "depth_max": max((r["depth_max"] for r in ok), default=0),
        "cost_fits": sum(r["cost"] for r in fits), "cost_fits_unmanaged": sum(r["cost_unmanaged"] for r in fits),
    }


def line(name: str, c: dict[str, Any]) -> list[str]:
    return [
        name, _pct(c["facts_end"], c["facts"]),
        f"{100.0 * c['facts_avg']:.1f}%" if c["facts_avg"] is not None else "–",
        _pct(c["users_end"], c["users"]),
        _pct(c["users_quoted"], c["users"]),
        _pct(c["reachable"], c["missing"]) if c["missing"] else "–",
        str(c["depth_max"]), _ratio(c["depth_sum"], c["reachable"]),
        _pct(c["covered_calls"], c["removed_calls"]),
        _ratio(c["cost"], c["cost_unmanaged"]), _ratio(c["model_cost"], c["cost_unmanaged"]),
        _ratio(c["cost_fits"], c["cost_fits_unmanaged"]),
        f"{100.0 * c['prefix_changes'] / c['calls']:.1f}" if c["calls"] else "–",
        str(c["model_calls"]), str(c["over"]), str(c["invalid"]), str(c["errors"]),
    ]


def render(header: Sequence[tuple[str, int]], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    out = ["| " + " | ".join(h.ljust(w) for h, w in header) + " |",
           "|" + "|".join("-" * (w + 2) for _, w in header) + "|"]
    out += ["| " + " | ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, (_, w)) in
                                enumerate(zip(row, header))) + " |" for row in body]
    return "\n".join(out)


def tables(rows: Sequence[dict[str, Any]], policies: Sequence[str], windows: Sequence[int]) -> str:
    """One table per window, a summary over all windows, and facts at the end per source group."""
    runs = {(r["source"]["name"], r["window"]) for r in rows}
    groups = sorted({r["source"]["group"] for r in rows})
    parts = [f"{len(runs) // max(len(windows), 1)} sessions × {len(windows)} window(s); cost = policy / unmanaged "
             "(reads 0.1×, writes 1.25×, summary output 5×); 'fits' = only runs whose unmanaged history fits"]
    for w in windows:
        body = [line(p, cell([r for r in rows if r["policy"] == p and r["window"] == w])) for p in policies]
        ref = [r for r in rows if r["policy"] == policies[0] and r["window"] == w and "error" not in r]
        totals = (f"{sum(r['facts'] for r in ref):,} facts, {sum(r['users'] for r in ref):,} user messages, "
                  f"{sum(r['calls'] for r in ref):,} calls")
        parts += ["", f"window {w:,} ({totals})", "", render(COLUMNS, body)]
    if len(windows) > 1:
        body = [line(p, cell([r for r in rows if r["policy"] == p])) for p in policies]
        parts += ["", "all windows", "", render(COLUMNS, body)]
    header = [("policy", 17)] + [(f"{g} facts / cost", max(22, len(g) + 13)) for g in groups]
    body = []
    for p in policies:
        row = [p]
        for g in groups:
            c = cell([r for r in rows if r["policy"] == p and r["source"]["group"] == g])
            row.append(f"{_pct(c['facts_end'], c['facts'])} / {_ratio(c['cost'], c['cost_unmanaged'])}")
        body.append(row)
    parts += ["", "by source, all windows (facts in context at the end / cost vs unmanaged)", "", render(header, body)]
    parts += ["", "facts in context at the end by kind, all windows (synthetic kinds: where:what; real: "
              "user / result / path)", "", kinds(rows, policies)]
    errors = [r for r in rows if "error" in r]
    for r in errors[:10]:
        parts.append(f"error: {r['policy']} {r['source']['name']} {r['window']}: {r['error']}")
    return "\n".join(parts)


def kinds(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    names = sorted({k for r in rows if "error" not in r for k in r["by_kind"]})
    header = [("policy", 17)] + [(k, max(len(k), 6)) for k in names]
    body = []
    for p in policies:
        tot = {k: [0, 0] for k in names}
        for r in rows:
            if r["policy"] == p and "error" not in r:
                for k, (n, here) in r["by_kind"].items():
                    tot[k][0] += n
                    tot[k][1] += here
        body.append([p] + [_pct(tot[k][1], tot[k][0]) for k in names])
    return render(header, body)


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which (facts, cost) points no other point beats on both (more facts, less cost)."""
    return [not any((g >= f and k <= c) and (g > f or k < c) for g, k in points) for f, c in points]


def frontier(rows: Sequence[dict[str, Any]], points: Sequence[dict[str, Any]], skipped: Sequence[str],
             policy: str) -> str:
    cells = [cell([r for r in rows if r.get("point") == k]) for k in range(len(points))]
    # facts over the whole run after the first compaction: what the model worked with, not one moment
    xy = [(c["facts_avg"] or 0.0, c["cost"] / c["cost_unmanaged"] if c["cost_unmanaged"] else 0.0) for c in cells]
    best = pareto(xy)
    knobs = list(points[0]) if points else []
    header = [(k, max(len(k), 6)) for k in knobs] + [("facts end", 9), ("facts avg", 9), ("account", 7),
                                                     ("cost", 6), ("over", 5), ("invalid", 7), ("pareto", 6)]
    body = []
    for pt, c, on in zip(points, cells, best):
        body.append([str(pt[k]) for k in knobs] + [
            _pct(c["facts_end"], c["facts"]),
            f"{100.0 * c['facts_avg']:.1f}%" if c["facts_avg"] is not None else "–",
            _pct(c["covered_calls"], c["removed_calls"]), _ratio(c["cost"], c["cost_unmanaged"]),
            str(c["over"]), str(c["invalid"]), "*" if on else ""])
    note = f"policy {policy!r}; Pareto set (*) on facts avg (higher) and cost (lower); knobs not in ContextConfig, skipped: {', '.join(skipped)}" if skipped \
        else f"policy {policy!r}; Pareto set (*) on facts avg (higher) and cost (lower)"
    if not knobs:
        return note + "\nno knob of FRONTIER_KNOBS exists in ContextConfig: nothing to sweep"
    # the first column is left-aligned by render(); knob values read better that way too
    return note + "\n\n" + render(header, body)
