"""Tables of the fidelity benchmark, from the workers' JSON rows.

Per window, one row per system (``main_line``): sums (Σ, pooled hits over totals across
inputs), the mean over inputs and the worst input side by side — facts live and one-shot,
fill after each compaction, prefix changes, handle share, account size, recall depth,
invalid requests, calls over the window, cost against unmanaged; then facts by their
position in their output (``positions``), the stages each system fired (``stages``) and the time
each system took per call, median, mean, p99 and max (``turns``).
``frontier`` marks the Pareto set of a knob sweep (``cell`` pools one point's runs).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

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


def render(header: Sequence[tuple[str, int]], body: Sequence[Sequence[str]]) -> str:
    """A Markdown table (readable as plain text too)."""
    out = ["| " + " | ".join(h.ljust(w) for h, w in header) + " |",
           "|" + "|".join("-" * (w + 2) for _, w in header) + "|"]
    out += ["| " + " | ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, (_, w)) in
                                enumerate(zip(row, header))) + " |" for row in body]
    return "\n".join(out)


MAIN = (
    ("system", 17), ("live Σ", 7), ("live mean", 9), ("live worst", 10), ("live avg", 8),
    ("1-shot Σ", 8), ("1-shot mean", 11), ("1-shot worst", 12), ("fill %thr", 9), ("fill %win", 9),
    ("fill max %win", 13), ("prefix/100", 10), ("handles", 7), ("handles worst", 13), ("account tok", 11),
    ("account max", 11), ("depth max", 9), ("invalid", 7), ("over", 5), ("cost", 6), ("cost worst", 10),
    ("errors", 6),
)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _p(x: float | None) -> str:
    return f"{100.0 * x:.1f}%" if x is not None else "–"


def main_line(name: str, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Sums (Σ: pooled hits over totals), the mean over inputs, and the worst input."""
    ok = [r for r in rows if "error" not in r]
    live = [r["facts_end"] / r["facts"] for r in ok if r["facts"]]
    once = [r.get("facts_oneshot", 0) / r["facts"] for r in ok if r["facts"]]
    fills = [(f, r["threshold"], r["window"]) for r in ok if "threshold" in r
             for f, landed in zip(r.get("fills", []), r.get("landings") or [True] * len(r.get("fills", []))) if landed]
    handles = [r["handle_share"] for r in ok if r.get("handle_share") is not None]
    accounts = [r["account_avg"] for r in ok if r.get("account_avg") is not None]
    costs = [r["cost"] / r["cost_unmanaged"] for r in ok if r["cost_unmanaged"]]
    calls = sum(r["calls"] for r in ok)
    facts = sum(r["facts"] for r in ok)
    avgs = [r["facts_avg"] for r in ok if r.get("facts_avg") is not None]
    return [
        name, _pct(sum(r["facts_end"] for r in ok), facts), _p(_mean(live)), _p(min(live, default=None)),
        _p(_mean(avgs)),
        _pct(sum(r.get("facts_oneshot", 0) for r in ok), facts), _p(_mean(once)), _p(min(once, default=None)),
        _p(_mean([f / t for f, t, _ in fills])), _p(_mean([f / w for f, _, w in fills])),
        _p(max((f / w for f, _, w in fills), default=None)),
        f"{100.0 * sum(r['prefix_changes'] for r in ok) / calls:.1f}" if calls else "–",
        _p(_mean(handles)), _p(max(handles, default=None)),
        f"{_mean(accounts):,.0f}" if accounts else "–", f"{max((r.get('account_max', 0) for r in ok), default=0):,}",
        str(max((r["depth_max"] for r in ok), default=0)),
        f"{sum(r['invalid'] for r in ok)}/{sum(bool(r.get('oneshot_invalid')) for r in ok)}",
        f"{sum(r['over'] for r in ok)}/{sum(bool(r.get('oneshot_over')) for r in ok)}",
        _ratio(sum(r["cost"] for r in ok), sum(r["cost_unmanaged"] for r in ok)),
        f"{max(costs):.3f}" if costs else "–", str(len(rows) - len(ok)),
    ]


def positions(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    """Facts in context by where they sat in their output (head / middle / tail) and the rest."""
    cols = ("head", "middle", "tail", "other")
    header = [("system", 17)] + [(f"{c} live / 1-shot", 22) for c in cols]
    body = []
    for p in policies:
        tot = {c: [0, 0, 0] for c in cols}
        for r in rows:
            if r["policy"] != p or "error" in r:
                continue
            once = r.get("by_kind_oneshot", {})
            for k, (n, here) in r["by_kind"].items():
                c = k.split(":")[0] if k.split(":")[0] in cols else "other"
                tot[c][0] += n
                tot[c][1] += here
                tot[c][2] += once.get(k, [0, 0])[1]
        body.append([p] + [f"{_pct(t[1], t[0])} / {_pct(t[2], t[0])}" for t in tot.values()])
    return render(header, body)


TURNS = (("system", 17), ("calls", 6), ("median ms", 9), ("mean ms", 8), ("p99 ms", 8), ("max ms", 8),
         ("cpu mean ms", 11), ("compacting: mean ms", 19), ("worst input: mean ms", 38))


def _rank(xs: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``xs`` by nearest rank (p99 of 100 calls is the second largest)."""
    ordered = sorted(xs)
    return ordered[max(0, math.ceil(round(q * len(ordered), 9)) - 1)]


def turns(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    """The time each system takes to make a view, per call of the live loops, pooled over the
    inputs: median, mean, p99 and max beside one another (a stage's call is the mean's tail), the
    CPU mean, the calls that compacted alone, and the input whose calls cost most on average.
    Lossless's ``prepare`` as the worker timed it; a peer's step as its own process timed it."""
    body = []
    for p in policies:
        ok = [r for r in rows if r["policy"] == p and "error" not in r and r.get("turn_ms")]
        wall = [t for r in ok for t in r["turn_ms"]]
        if not wall:
            continue
        cpu = [t for r in ok for t in r.get("turn_cpu_ms", [])]
        firing = [t for r in ok for t, c in zip(r["turn_ms"], r.get("turn_compacted", [])) if c]
        worst = max(ok, key=lambda r: sum(r["turn_ms"]) / len(r["turn_ms"]))
        body.append([p, f"{len(wall):,}", f"{_rank(wall, 0.5):.2f}", f"{sum(wall) / len(wall):.2f}",
                     f"{_rank(wall, 0.99):.2f}", f"{max(wall):.2f}",
                     f"{sum(cpu) / len(cpu):.2f}" if cpu else "–",
                     f"{sum(firing) / len(firing):.2f} ({len(firing)})" if firing else "–",
                     f"{worst['source']['name'][:28]} {sum(worst['turn_ms']) / len(worst['turn_ms']):.2f}"])
    return render(TURNS, body) if body else ""


def stages(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    """Per system: calls that compacted, and per stage the calls it fired in (live loops, summed)."""
    out = []
    for p in policies:
        ok = [r for r in rows if r["policy"] == p and "error" not in r]
        fired: dict[str, int] = {}
        for r in ok:
            for k, v in r.get("stages", {}).items():
                fired[k] = fired.get(k, 0) + v
        runs = sum(1 for r in ok if r.get("stages"))
        what = ", ".join(f"{k} {v}" for k, v in sorted(fired.items(), key=lambda kv: -kv[1])) or "–"
        out.append(f"- {p}: {sum(r['compacting_calls'] for r in ok)} compacting calls of "
                   f"{sum(r['calls'] for r in ok)}; fired: {what} (in {runs} of {len(ok)} runs)")
    return "\n".join(out)


SHORT = {"microcompact": "micro", "fallback_summary": "fallback", "session_memory": "notes", "autocompact": "auto"}


def stages_by_input(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    """Per input, the stages each lossless system fired in its live loop (calls per stage)."""
    mine = [p for p in policies if p.startswith(("new", "today"))]
    names = list(dict.fromkeys(r["source"]["name"] for r in rows))
    if not mine:
        return ""
    body = []
    for name in names:
        row = [name[:36]]
        for p in mine:
            r = next((r for r in rows if r["policy"] == p and r["source"]["name"] == name and "error" not in r), None)
            fired = sorted((r or {}).get("stages", {}).items(), key=lambda kv: -kv[1])
            row.append(" · ".join(f"{SHORT.get(k, k)} {v}" for k, v in fired) or "–")
        body.append(row)
    widths = [max(len(b[j + 1]) for b in body) for j in range(len(mine))]
    return render([("input", 36)] + [(p, max(len(p), w)) for p, w in zip(mine, widths)], body)


def tables(rows: Sequence[dict[str, Any]], policies: Sequence[str], windows: Sequence[int]) -> str:
    """Per window: the main table, facts by position, stages fired; then by source group."""
    runs = {(r["source"]["name"], r["window"]) for r in rows}
    groups = sorted({r["source"]["group"] for r in rows})
    parts = [f"{len(runs) // max(len(windows), 1)} inputs × {len(windows)} window(s). Facts verbatim in the final "
             "context: live = at the last call of the live loop, avg = over the calls after its first compaction, "
             "1-shot = the whole history prepared once; Σ pooled, mean over inputs, worst input. fill = tokens "
             "after each compaction of the history (% of the auto-compact threshold, % of the window; not after a "
             "call where only persist or micro-compact moved single results out). handles = share of "
             "context tokens in handle strings; account = tokens of account/summary markers (mean of runs, "
             "largest). invalid/over = live calls / one-shot runs. cost = input cost vs unmanaged with caching "
             "(reads 0.1×, writes 1.25×, model calls included)."]
    for w in windows:
        in_w = [r for r in rows if r["window"] == w]
        ref = [r for r in in_w if r["policy"] == policies[0] and "error" not in r]
        parts += ["", f"window {w:,} ({sum(r['facts'] for r in ref):,} facts, {sum(r['calls'] for r in ref):,} calls)",
                  "", render(MAIN, [main_line(p, [r for r in in_w if r["policy"] == p]) for p in policies]),
                  *(["", money] if (money := dollars(in_w, policies)) else []),
                  "", "facts by position in their output (live / one-shot)", "", positions(in_w, policies),
                  "", "stages fired in the live loops", "", stages(in_w, policies),
                  *(["", "time to make each view in the live loops (ms per call, every input's calls pooled)", "",
                      timing] if (timing := turns(in_w, policies)) else []),
                  "", "per input (calls each stage fired in)", "", stages_by_input(in_w, policies)]
    header = [("system", 17)] + [(f"{g} live / 1-shot / cost", max(28, len(g) + 22)) for g in groups]
    body = []
    for p in policies:
        row = [p]
        for g in groups:
            ok = [r for r in rows if r["policy"] == p and r["source"]["group"] == g and "error" not in r]
            n = sum(r["facts"] for r in ok)
            row.append(f"{_pct(sum(r['facts_end'] for r in ok), n)} / "
                       f"{_pct(sum(r.get('facts_oneshot', 0) for r in ok), n)} / "
                       f"{_ratio(sum(r['cost'] for r in ok), sum(r['cost_unmanaged'] for r in ok))}")
        body.append(row)
    parts += ["", "by source, all windows (facts Σ live / one-shot / cost vs unmanaged)", "", render(header, body)]
    target = against_peers(rows, policies, windows)
    if target:
        parts += ["", target]
    errors = [r for r in rows if "error" in r]
    for r in errors[:10]:
        parts.append(f"error: {r['policy']} {r['source']['name']} {r['window']}: {r['error']}")
    return "\n".join(parts)


PRICED = "claude-sonnet-4-6"
"""The model whose price turns each run's cost (in uncached input tokens' worth) into dollars."""


def dollars(rows: Sequence[dict[str, Any]], policies: Sequence[str]) -> str:
    """Each system's input cost in dollars at ``PRICED``'s price (from ``lossless.modelinfo``, the
    models' data): summed over the inputs, its worst input, and unmanaged beside it; empty when the
    price is not known (the models extra not installed)."""
    try:
        from lossless.modelinfo import price
    except ImportError:
        return ""
    known = price(PRICED)
    if known is None or not known.input:
        return ""
    per = known.input / 1e6
    parts = []
    for p in policies:
        ok = [r for r in rows if r["policy"] == p and "error" not in r]
        if ok:
            worst = max(ok, key=lambda r: r["cost"])
            parts.append(f"{p} ${sum(r['cost'] for r in ok) * per:,.2f} (worst input ${worst['cost'] * per:,.2f}, "
                         f"{worst['source']['name'][:24]}; unmanaged ${sum(r['cost_unmanaged'] for r in ok) * per:,.2f})")
    return (f"input cost in dollars at {PRICED}'s price (${known.input:g} per million input tokens, cache reads "
            "0.1×, writes 1.25×, the systems' own model calls included): " + "; ".join(parts)) if parts else ""


PEERS = ("openhands", "langchain")
GOAL = 1.25
"""Issue 22's target: per real input, the lesser of this many times the peer's facts (rounded) and all its facts."""


def against_peers(rows: Sequence[dict[str, Any]], policies: Sequence[str], windows: Sequence[int]) -> str:
    """The real inputs only (no synthetic one), each system beside each peer in the run: facts summed at the
    end of the live loop and one-shot, the ratio, the target (``GOAL``), the facts after the opening stretch
    both keep (``opening``) with what the target asks there, and the inputs more than one fact below the peer."""
    peers = [p for p in policies if p in PEERS]
    mine = [p for p in policies if p not in PEERS and p not in ("unmanaged", "baseline")]
    if not peers or not mine:
        return ""
    by: dict[tuple[int, str], dict[str, dict[str, Any]]] = {}
    for r in rows:
        if r["source"]["group"] != "synthetic" and "error" not in r:
            by.setdefault((r["window"], r["source"]["name"]), {})[r["policy"]] = r
    header = [("window", 7), ("mode", 7), ("system", 10), ("peer", 10), ("facts", 6), ("peer's", 6),
              ("ratio", 6), ("target", 7), ("met", 9), ("after the opening: facts / peer's (target asks)", 22),
              ("inputs more than one fact below the peer", 44)]
    body = []
    for w in windows:
        for mode, key, mask in (("live", "facts_end", "facts_mask"), ("1-shot", "facts_oneshot", "oneshot_mask")):
            for system in mine:
                for peer in peers:
                    both = [(name, pol[system], pol[peer]) for (win, name), pol in sorted(by.items())
                            if win == w and system in pol and peer in pol]
                    if not both:
                        continue
                    ours = sum(a.get(key, 0) for _, a, _ in both)
                    theirs = sum(b.get(key, 0) for _, _, b in both)
                    goal = sum(min(round(GOAL * b.get(key, 0)), a["facts"]) for _, a, b in both)
                    below = [f"{name[:24]} ({a.get(key, 0)} vs {b.get(key, 0)})" for name, a, b in both
                             if a.get(key, 0) < b.get(key, 0) - 1]
                    split = [opening(a.get(mask), b.get(mask)) for _, a, b in both]
                    after = "–"
                    if all(x is not None for x in split):
                        head = sum(x[0] for x in split if x is not None)
                        after = (f"{sum(x[1] for x in split if x is not None):,} / "
                                 f"{sum(x[2] for x in split if x is not None):,} ({goal - head:,})")
                    body.append([f"{w:,}", mode, system, peer, f"{ours:,}", f"{theirs:,}", _ratio(ours, theirs),
                                 f"{goal:,}", "yes" if ours >= goal else f"{goal - ours:,} short", after,
                                 ", ".join(below) or "none"])
    return ("the real inputs beside each peer: facts summed over the inputs; target = per input the lesser of "
            f"{GOAL}× the peer's facts and all of them\n\n" + render(header, body)) if body else ""


def opening(ours: str | None, theirs: str | None) -> tuple[int, int, int] | None:
    """Of two runs' fact masks (``1`` where a fact, in session order, is in the context): how many
    facts from the session's start both keep without a gap (its opening stretch: the task and the
    first outputs, which both pin), and how many each keeps after it; None without both masks."""
    if not ours or not theirs:
        return None
    n = 0
    while n < min(len(ours), len(theirs)) and ours[n] == theirs[n] == "1":
        n += 1
    return n, ours[n:].count("1"), theirs[n:].count("1")


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
