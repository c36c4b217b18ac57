"""The `--report` HTML page: one self-contained file, its plots inline SVG (no plotting library)."""

from __future__ import annotations

import html
import time
from pathlib import Path

from client import numbers, svg_chart
from client.store import cost_words, input_names, job_cost
from client.summary import Summary
from solvers.model.columns import TIME_BINS_PER_DECADE

MAX_ROWS = 1000
TITLE = "sudoku-batch report"
STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.facts th{background:#eef1f5}"
)


def plots(summary: Summary) -> dict[str, str]:
    """The plots (time histogram, cactus, wins, approximate costs) as inline SVG, by title."""
    out: dict[str, str] = {}
    if summary.time_bins:
        bins = [
            (10 ** (b / TIME_BINS_PER_DECADE), 10 ** ((b + 1) / TIME_BINS_PER_DECADE), count)
            for b, count in sorted(summary.time_bins.items())
        ]
        out["Solve time histogram"] = svg_chart.histogram(
            bins, "solve time (log scale)", "puzzles", log_x=True, time_ms=True, top=summary.time_max_ms
        )
        out["Cactus plot: puzzles done within a time"] = svg_chart.cactus(
            summary.done_within(),
            "puzzles done (all but invalid lines)",
            "time each, at most (log)",
            time_ms=True,
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


def report_facts(job: str, meta: dict[str, str], embedded: bool) -> dict[str, str]:
    """The report's header from the job's metadata: inputs, options, mode, when, its cost, version, cores.
    Why: a report read a week later, or next to another one, must say what it is about."""
    import datetime
    import os
    import platform

    from client.first_run import package_version

    inputs = input_names(meta)
    limit = meta.get("time_limit")
    options = [
        f"time limit {numbers.duration(float(limit))} a puzzle" if limit else "no time limit",
        f"portfolio {meta.get('portfolio') or 'fast'}",
        f"box {meta['box']}" if meta.get("box") else "box inferred from each line",
    ]
    if meta.get("escalate_after"):
        options.append(f"escalation after {numbers.duration(float(meta['escalate_after']))}")
    stamp = datetime.datetime.fromtimestamp(time.time()).astimezone()
    created = float(meta.get("created") or 0.0)
    started = datetime.datetime.fromtimestamp(created).astimezone() if created else None
    return {
        "inputs": ", ".join(inputs) or "-",
        "options": ", ".join(options),
        "job": f"{job} ({'embedded: local processes' if embedded else 'on a broker: its workers'})",
        "started": started.strftime("%Y-%m-%d %H:%M:%S %Z") if started else "-",
        "cost": cost_words(*job_cost(job, meta), embedded),
        "written": stamp.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "version": f"sudoku-batch {package_version()}, Python {platform.python_version()}",
        "machine": f"{os.cpu_count() or 1} cores, {platform.system()} {platform.machine()} (the report's)",
    }


def _table(head: tuple[str, str], rows: list[tuple[str, str]]) -> str:
    e = html.escape
    body = "".join(f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in rows)
    return f"<table><tr><th>{e(head[0])}</th><th>{e(head[1])}</th></tr>{body}</table>"


def write_report(
    summary: Summary, path: str | Path, title: str = TITLE, facts: dict[str, str] | None = None
) -> None:
    """Write the HTML report of a finished job: its header (`facts`, from `report_facts`), counts, times,
    wins and plots, and the invalid and failed lines; a section with nothing to show is left out.
    Numbers are written as on the page and in the summary (`client.numbers`)."""
    e = html.escape
    data = summary.as_dict()
    sections = []
    if facts:
        rows = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in facts.items())
        sections.append(f'<table class="facts">{rows}</table>')
    puzzles, wall = numbers.count(data["puzzles"]), numbers.duration(data["wall_s"])
    rate = numbers.per_second(data["puzzles_per_s"])
    sections.append(f"<p>{puzzles} puzzles in {wall}: {rate} puzzles/s.</p>")
    counts = [(k, numbers.count(v)) for k, v in data["counts"].items()]
    times = [(k, numbers.duration_ms(v)) for k, v in data["time_ms"].items()]
    wins = [(k, numbers.count(v)) for k, v in data["wins"].items()]
    for heading, head, rows in (
        ("Counts by status", ("status", "puzzles"), counts),
        ("Solve time", ("percentile", "time"), times),
        ("Wins per solver", ("solver", "puzzles"), wins),
    ):
        if rows:
            sections.append(f"<h2>{e(heading)}</h2>{_table(head, rows)}")
    sections += [f"<h2>{e(name)}</h2><figure>{svg}</figure>" for name, svg in plots(summary).items()]
    if summary.problems_total:
        problems = sorted(summary.problems, key=lambda ip: ip[1].index)[:MAX_ROWS]
        bad = "".join(
            f"<tr><td>{e(i)}</td><td>{numbers.count(p.line)}</td><td>{e(p.status)}</td><td>{e(p.error)}</td></tr>"
            for i, p in problems
        )
        more = summary.problems_total - len(problems)
        sections.append(
            f"<h2>Invalid and failed lines ({numbers.count(summary.problems_total)})</h2>"
            f"<table><tr><th>input</th><th>line</th><th>status</th><th>reason</th></tr>{bad}</table>"
            + (f"<p>{numbers.count(more)} more not listed.</p>" if more > 0 else "")
        )
    body = "\n".join(sections)
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{e(title)}</title>
<style>{STYLE}</style></head><body>
<h1>{e(title)}</h1>
{body}
</body></html>
"""
    Path(path).write_text(page, encoding="utf-8")
