"""The HTML report: self-contained inline SVG plots drawn without any plotting library."""

from __future__ import annotations

import math
import re
import sys

from client import svg_chart
from client.report import plots, write_report
from client.summary import Summary
from pipeline.contract.part import PartStats, Problem
from solvers.model.columns import TIME_BINS_PER_DECADE


def summary() -> Summary:
    s = Summary()
    stats = PartStats(
        n=40,
        counts={"solved": 30, "approximate": 8, "invalid": 2},
        wins={"propagation": 25, "<annealing>": 13},
        approx_costs={2: 5, 4: 3},
        time_bins={-100: 10, -99: 20, 50: 8},
        time_max_ms=10.5,
        problems=[Problem(index=3, line=4, status="invalid", error="row 1 has two 5s")],
    )
    s.add(stats, "in.txt")
    s.finish()
    return s


def test_the_report_is_written_when_matplotlib_cannot_be_imported(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    path = tmp_path / "r.html"
    write_report(summary(), path)
    page = path.read_text()
    assert (
        page.count("<svg") == 4 and "<script" not in page
    )  # times, cactus, wins, costs and "http" not in page.split("<body>")[1]
    assert "row 1 has two 5s" in page and "&lt;annealing&gt;" in page and "<annealing>" not in page


def test_a_histogram_draws_one_column_per_nonempty_bin_with_heights_in_proportion():
    chart = svg_chart.histogram([(1, 2, 10), (2, 4, 0), (4, 8, 20)], "ms", "puzzles", log_x=True)
    heights = [float(h) for h in re.findall(r'<rect [^>]*height="([\d.]+)"', chart)]
    assert len(heights) == 2 and abs(heights[1] - 2 * heights[0]) < 0.01
    assert ">1<" in chart and ">10<" in chart  # decade ticks of the log axis


def test_columns_and_rows_label_every_item_and_title_it_with_its_exact_count():
    assert re.findall(r"<title>([^<]*)</title>", svg_chart.columns([("2", 5), ("4", 1234)], "c", "n")) == [
        "2: 5",
        "4: 1,234",
    ]
    chart = svg_chart.rows([("propagation", 9), ("evolution", 3)], "won")
    assert ">propagation</text>" in chart and ">evolution</text>" in chart


def test_ticks_are_round_numbers_reaching_the_top():
    assert svg_chart.nice_ticks(37) == [0, 10, 20, 30, 40]
    assert svg_chart.nice_ticks(7) == [0, 2, 4, 6, 8]
    assert svg_chart.nice_ticks(1200) == [0, 500, 1000, 1500]
    assert svg_chart.nice_ticks(0) == [0.0, 1.0]


def test_a_cactus_plot_rises_through_the_cumulative_counts_on_a_log_time_axis():
    s = summary()  # time bins -100: 10, -99: 20, 50: 8 -> 10, 30 and 38 puzzles done within their bins' times
    points = s.done_within()
    assert [n for n, _ in points] == [10, 30, 38] and [t for _, t in points] == sorted(t for _, t in points)
    assert points[-1][1] == 10.5  # the last bin's time is the exact maximum
    chart = svg_chart.cactus(points, "puzzles", "ms", time_ms=True)
    ys = [float(y) for y in re.findall(r"L[\d.]+,([\d.]+)", chart)]
    assert len(ys) == 3 and ys == sorted(ys, reverse=True)  # slower puzzles plot higher
    assert "38 puzzles within 10.5 ms" in chart and svg_chart.cactus([], "x", "y").count("<path") == 0


def test_the_report_says_what_it_is_about_and_leaves_out_empty_sections(tmp_path):
    from client.report import report_facts

    meta = {"created": "1790000000.5", "inputs": "a.txt\nb.txt.gz", "time_limit": "2.5", "portfolio": "race"}
    facts = report_facts("ab" * 16, meta, embedded=True)
    assert facts["inputs"] == "a.txt, b.txt.gz" and facts["options"].startswith("time limit 2.5 s a puzzle")
    assert "portfolio race" in facts["options"] and "box inferred" in facts["options"]
    assert facts["version"].startswith("sudoku-batch ") and "cores" in facts["machine"]
    s = Summary()
    s.add(
        PartStats(
            n=3, counts={"solved": 3}, wins={"propagation": 3}, time_bins={-100: 3}, time_max_ms=0.00246
        ),
        "",
    )
    path = tmp_path / "r.html"
    write_report(s, path, "report: a.txt", facts)
    page = path.read_text()
    assert "a.txt, b.txt.gz" in page and "<th>started</th>" in page and "ab" * 16 in page
    assert "Invalid and failed lines" not in page and "Cost histogram" not in page  # nothing to show
    assert "<td>p50</td><td>2.46 us</td>" in page  # 0.00246 ms, written in microseconds
    assert not re.search(r">\d+\.\d{4,}<", page)  # no number with more than 3 decimals


def test_a_count_axis_has_whole_ticks_and_a_bar_of_one_is_seen_beside_fifty_thousand():
    one = svg_chart.columns([("17", 1)], "cost", "results")
    ticks = re.findall(r'text-anchor="end">([^<]*)</text>', one)
    assert ticks == ["0", "1"]  # not 0, 0.2, ..., 1
    chart = svg_chart.rows([("propagation", 50_000), ("annealing", 1)], "won")
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([\d.]+)"', chart)]
    assert widths[1] >= svg_chart.MIN_BAR and widths[0] > 100
    assert svg_chart.nice_ticks(3, whole=True) == [0, 1, 2, 3]


CHAR_PX = 0.6 * 11  # an 11 px sans-serif character's width, at most, about
UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "min": 6e4, "h": 3.6e6}


def ms_of(label: str) -> float:
    """A duration label as `client.numbers` writes it ("1.5 ms", "2 min 5 s") in milliseconds."""
    parts = re.findall(r"([\d,.]+) (us|ms|s|min|h)", label)
    assert parts and " ".join(f"{v} {u}" for v, u in parts) == label, label
    return sum(float(v.replace(",", "")) * UNITS_MS[u] for v, u in parts)


def texts_of(svg: str) -> list[tuple[float, float, str, str]]:
    """(x, y, anchor, text) of every positioned <text> of a chart."""
    found = re.findall(r'<text x="([\d.-]+)" y="([\d.-]+)" text-anchor="(\w+)">([^<]*)</text>', svg)
    return [(float(x), float(y), anchor, text) for x, y, anchor, text in found]


def check_labels_fit(svg: str) -> None:
    """Every label lies inside the viewBox at its font's approximate width (11 px sans-serif)."""
    width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    for x, y, anchor, text in texts_of(svg):
        w = len(text) * CHAR_PX
        left = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        assert left >= 0 and left + w <= width and 0 <= y <= height, (text, left, left + w, width)


def axis_end_ms(svg: str) -> float:
    """Where the time histogram's x axis ends, from its tick labels' places on the log scale."""
    bottom = svg_chart.HEIGHT - svg_chart.BOTTOM + 14
    ticks = [(x, ms_of(t)) for x, y, _, t in texts_of(svg) if abs(y - bottom) < 0.1]
    (x0, v0), (x1, v1) = ticks[0], ticks[-1]
    per_decade = (x1 - x0) / math.log10(v1 / v0)
    return v0 * 10 ** ((svg_chart.WIDTH - svg_chart.RIGHT - x0) / per_decade)


def timed_summary(times_ms: list[float], limit_s: float | None) -> Summary:
    bins: dict[int, int] = {}
    for t in times_ms:
        b = math.floor(TIME_BINS_PER_DECADE * math.log10(t))
        bins[b] = bins.get(b, 0) + 1
    s = Summary()
    stats = PartStats(
        n=len(times_ms), counts={"solved": len(times_ms)}, time_bins=bins, time_max_ms=max(times_ms)
    )
    s.add(stats, "")
    s.set_time_limit(limit_s)
    return s


def test_the_time_histogram_ends_just_above_the_slowest_puzzle_and_every_label_fits():
    times = [0.05, 0.2, 3.0, 40.0, 900.0, 10_000.0, 10_300.0]  # a 10 s limit: timeouts end at 10.3 s
    charts = plots(timed_summary(times, 10.0))
    histogram, cactus = charts["Solve time histogram"], charts["Cactus plot: puzzles done within a time"]
    for svg in (histogram, cactus):
        check_labels_fit(svg)
    assert 10_300 <= axis_end_ms(histogram) <= 20_000 * 1.001  # a nice number just above max(limit, max)
    long = [2.0, 90_000.0, 1_500_000.0]  # no limit: up to 25 min
    for svg in plots(timed_summary(long, None)).values():
        check_labels_fit(svg)
        assert not re.search(r">\d+ min \d+ s<", svg)  # ticks on whole minutes or hours, not "1 min 40 s"
    long_histogram = plots(timed_summary(long, None))["Solve time histogram"]
    assert 1_500_000 <= axis_end_ms(long_histogram) <= 1_800_000 * 1.001 and ">1 min<" in long_histogram
