"""The `--report` HTML page: one self-contained file, plots inlined as base64 PNG (matplotlib Agg)."""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from client.summary import Summary
from solvers.chunk import time_bin_ms

MAX_ROWS = 1000


def _png(fig: object) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight")  # type: ignore[attr-defined]
    return base64.b64encode(buf.getvalue()).decode()


def _plots(summary: Summary) -> dict[str, str]:
    """Render the plots (time histogram, wins, approximate costs) as base64 PNGs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots: dict[str, str] = {}
    if summary.time_bins:
        fig, ax = plt.subplots(figsize=(7, 3))
        bins = sorted(summary.time_bins)
        ax.bar([time_bin_ms(b) for b in bins], [summary.time_bins[b] for b in bins],
               width=[time_bin_ms(b) * 0.045 for b in bins])  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("solve time (ms, log scale)")
        ax.set_ylabel("puzzles")
        plots["Solve time histogram"] = _png(fig)
        plt.close(fig)
    if summary.wins:
        fig, ax = plt.subplots(figsize=(7, 2.5))
        names = sorted(summary.wins, key=lambda k: -summary.wins[k])
        ax.barh(names, [summary.wins[n] for n in names])
        ax.set_xlabel("puzzles won")
        plots["Wins per solver"] = _png(fig)
        plt.close(fig)
    if summary.approx_costs:
        fig, ax = plt.subplots(figsize=(7, 2.5))
        costs = sorted(summary.approx_costs)
        ax.bar([str(c) for c in costs], [summary.approx_costs[c] for c in costs])
        ax.set_xlabel("cost of the best grid found")
        ax.set_ylabel("approximate results")
        plots["Cost histogram of approximate results"] = _png(fig)
        plt.close(fig)
    return plots


def write_report(summary: Summary, path: str | Path, title: str = "sudoku-batch report") -> None:
    """Write the HTML report of a finished job."""
    e = html.escape
    data = summary.as_dict()
    rows = "".join(f"<tr><td>{e(k)}</td><td>{v:,}</td></tr>" for k, v in data["counts"].items())
    pct = "".join(f"<tr><td>{e(k)}</td><td>{v:.4g}</td></tr>" for k, v in data["time_ms"].items())
    wins = "".join(f"<tr><td>{e(k)}</td><td>{v:,}</td></tr>" for k, v in data["wins"].items())
    plots = "".join(
        f'<h2>{e(name)}</h2><img alt="{e(name)}" src="data:image/png;base64,{png}">'
        for name, png in _plots(summary).items()
    )
    problems = sorted(summary.problems, key=lambda ip: ip[1].index)[:MAX_ROWS]
    bad = "".join(
        f"<tr><td>{e(i)}</td><td>{p.line}</td><td>{e(p.status)}</td><td>{e(p.error)}</td></tr>"
        for i, p in problems
    )
    more = (
        f"<p>{summary.problems_total - len(problems):,} more not listed.</p>"
        if summary.problems_total > len(problems)
        else ""
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}</style></head><body>
<h1>{e(title)}</h1>
<p>{data["puzzles"]:,} puzzles in {data["wall_s"]:.2f} s: {data["puzzles_per_s"]:,.0f} puzzles/s.</p>
<h2>Counts by status</h2><table><tr><th>status</th><th>puzzles</th></tr>{rows}</table>
<h2>Solve time (ms)</h2><table><tr><th>percentile</th><th>ms</th></tr>{pct}</table>
<h2>Wins per solver</h2><table><tr><th>solver</th><th>puzzles</th></tr>{wins}</table>
{plots}
<h2>Invalid and failed lines ({summary.problems_total:,})</h2>
<table><tr><th>input</th><th>line</th><th>status</th><th>reason</th></tr>{bad}</table>{more}
</body></html>
"""
    Path(path).write_text(page, encoding="utf-8")
