"""The `--report` HTML page: one self-contained file, its plots inline SVG (no plotting library)."""

from __future__ import annotations

import html
from pathlib import Path

from client import svg_chart
from client.summary import Summary
from pipeline.columns import TIME_BINS_PER_DECADE

MAX_ROWS = 1000


def plots(summary: Summary) -> dict[str, str]:
    """The plots (time histogram, cactus, wins, approximate costs) as inline SVG, by title."""
    out: dict[str, str] = {}
    if summary.time_bins:
        bins = [
            (10 ** (b / TIME_BINS_PER_DECADE), 10 ** ((b + 1) / TIME_BINS_PER_DECADE), count)
            for b, count in sorted(summary.time_bins.items())
        ]
        out["Solve time histogram"] = svg_chart.histogram(
            bins, "solve time (ms, log scale)", "puzzles", log_x=True
        )
        out["Cactus plot: puzzles done within a time"] = svg_chart.cactus(
            summary.done_within(), "puzzles done (all but invalid lines)", "ms each, at most (log)"
        )
    if summary.wins:
        wins = sorted(summary.wins.items(), key=lambda kv: -kv[1])
        out["Wins per solver"] = svg_chart.rows(wins, "puzzles won")
    if summary.approx_costs:
        costs = [(str(c), v) for c, v in sorted(summary.approx_costs.items())]
        out["Cost histogram of approximate results"] = svg_chart.columns(
            costs, "cost of the best grid found", "approximate results"
        )
    return out


def write_report(summary: Summary, path: str | Path, title: str = "sudoku-batch report") -> None:
    """Write the HTML report of a finished job."""
    e = html.escape
    data = summary.as_dict()
    rows = "".join(f"<tr><td>{e(k)}</td><td>{v:,}</td></tr>" for k, v in data["counts"].items())
    pct = "".join(f"<tr><td>{e(k)}</td><td>{v:.4g}</td></tr>" for k, v in data["time_ms"].items())
    wins = "".join(f"<tr><td>{e(k)}</td><td>{v:,}</td></tr>" for k, v in data["wins"].items())
    figures = "".join(f"<h2>{e(name)}</h2><figure>{svg}</figure>" for name, svg in plots(summary).items())
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
{figures}
<h2>Invalid and failed lines ({summary.problems_total:,})</h2>
<table><tr><th>input</th><th>line</th><th>status</th><th>reason</th></tr>{bad}</table>{more}
</body></html>
"""
    Path(path).write_text(page, encoding="utf-8")
