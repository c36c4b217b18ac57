"""Bar charts as inline SVG text for the HTML report: no plotting library, nothing to install.

Each bar's `<title>` holds its exact value (a reader hovers for the number); labels are escaped: solver
names and reasons come from the job."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

from client import numbers

WIDTH, HEIGHT = 640, 240  # the frame, in CSS pixels
LEFT, RIGHT, TOP, BOTTOM = 64, 24, 12, 44  # margins around the plot area
FILL = "#4878a8"
MIN_BAR = 2.0  # pixels: a bar of 1 puzzle among 50,000 is still seen (its <title> holds the count)
CHAR_PX = 0.6 * 11  # a label character's width at most, about, in the 11 px sans-serif of the charts
NICE = (1.0, 1.5, 2.0, 3.0, 5.0)  # a log axis ends at one of these times a power of ten
MINUTE_MS, HOUR_MS = 60e3, 3.6e6
TIME_ENDS_MS = sorted(  # where a time axis ends: nice seconds, then whole minutes, then whole hours
    [m * 10.0**e for e in range(-4, 5) for m in NICE if m * 10.0**e < MINUTE_MS]
    + [m * MINUTE_MS for m in (1, 2, 3, 5, 10, 15, 20, 30)]
    + [m * 10.0**e * HOUR_MS for e in range(4) for m in (1, 2, 3, 5)]
)
TIME_TICKS_MS = (
    [10.0**e for e in range(-4, 5)] + [MINUTE_MS, 10 * MINUTE_MS] + [10.0**e * HOUR_MS for e in range(4)]
)


def nice_ticks(top: float, most: int = 5, whole: bool = False) -> list[float]:
    """Tick values 0..>= top in steps of 1, 2 or 5 times a power of ten, at most `most` + 1 of them;
    `whole`: steps of at least 1 (counts: a histogram of one result has ticks 0 and 1, not 0.2..1)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(step, 1) if whole else step
    count = math.ceil(top / step - 1e-9)
    return [i * step for i in range(count + 1)]


def log_axis(low: float, high: float, time_ms: bool = False) -> tuple[float, float, list[float]]:
    """A log axis over [low, high] (> 0): (start, end, ticks), from the power of ten at or below `low` to the
    first nice number (NICE; `time_ms`: TIME_ENDS_MS) at or above `high`, ticked at powers of ten (`time_ms`:
    TIME_TICKS_MS). Why: an axis to the next power of ten drew 10 s of data on an axis to 100 s."""
    lo = 10.0 ** math.floor(math.log10(low) + 1e-9)
    if time_ms:
        ends, marks = TIME_ENDS_MS, TIME_TICKS_MS
    else:
        powers = [10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 2)]
        ends, marks = [m * p for p in powers for m in NICE], powers
    hi = next((e for e in ends if e >= high * (1 - 1e-9) and e > lo * (1 + 1e-9)), max(high, lo * 10))
    return lo, hi, [t for t in marks if lo * (1 - 1e-9) <= t <= hi * (1 + 1e-9)]


def _number(value: float) -> str:
    """A tick label: counts with separators, other values to 3 significant digits (`client.numbers`)."""
    return numbers.count(int(value)) if value == int(value) else numbers.sig(value)


def _bar(length: float) -> float:
    return max(length, MIN_BAR)


def _text(x: float, y: float, label: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(label)}</text>'


def _frame(body: list[str], x_label: str, y_label: str, height: int = HEIGHT, left: int = LEFT) -> str:
    """Wrap chart elements in an <svg> with the axes and their labels."""
    bottom = height - BOTTOM
    return "".join(
        [
            f'<svg width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
            f'font-family="sans-serif" font-size="11">',
            *body,
            f'<line x1="{left}" y1="{bottom}" x2="{WIDTH - RIGHT}" y2="{bottom}" stroke="#333"/>',
            f'<line x1="{left}" y1="{TOP}" x2="{left}" y2="{bottom}" stroke="#333"/>',
            f'<text x="{(left + WIDTH - RIGHT) / 2:.1f}" y="{height - 6}" text-anchor="middle">'
            f"{escape(x_label)}</text>",
            f'<text transform="translate(14 {(TOP + bottom) / 2:.1f}) rotate(-90)" text-anchor="middle">'
            f"{escape(y_label)}</text>",
            "</svg>",
        ]
    )


def _y_axis(top: float, height: int) -> tuple[list[str], float]:
    """Horizontal grid lines and labels for counts up to `top`; return them and the pixels per count."""
    ticks = nice_ticks(top, whole=True)
    scale = (height - BOTTOM - TOP) / ticks[-1]
    out = []
    for value in ticks:
        y = height - BOTTOM - value * scale
        out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{WIDTH - RIGHT}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(_text(LEFT - 4, y + 4, _number(value), "end"))
    return out, scale


def _placed(
    ticks: Sequence[float],
    end: float,
    at: Callable[[float], float],
    label: Callable[[float], str],
    vertical: bool = False,
) -> list[tuple[float, str]]:
    """(pixel, label) of each tick and of the axis' end (when it is no tick); a label that would overlap
    the one kept before it, or leave the frame, is left out (the end's first)."""
    values = [*ticks, *([end] if not ticks or abs(ticks[-1] - end) > end * 1e-9 else [])]
    out: list[tuple[float, str]] = []
    for value in values:
        pos, text = at(value), label(value)
        half = len(text) * CHAR_PX / 2
        if not vertical and (pos < half or pos + half > WIDTH):
            continue
        if out and abs(pos - out[-1][0]) < (12.0 if vertical else half + len(out[-1][1]) * CHAR_PX / 2 + 4):
            continue
        out.append((pos, text))
    return out


def histogram(
    bins: Sequence[tuple[float, float, int]],
    x_label: str,
    y_label: str,
    log_x: bool = False,
    time_ms: bool = False,
    top: float | None = None,
) -> str:
    """Columns spanning [low, high) on a linear or log x axis, one per (low, high, count) bin; `time_ms`:
    milliseconds, written as durations; `top`: the largest value the axis reaches (default: the last bin's
    high edge; a bin past the end stops there)."""
    label = numbers.duration_ms if time_ms else _number
    bins = [b for b in bins if b[2] > 0]
    if not bins:
        return _frame([], x_label, y_label)
    lo, hi = min(b[0] for b in bins), top if top is not None else max(b[1] for b in bins)
    ticks = [lo, hi]
    if log_x:
        lo, hi, ticks = log_axis(lo, hi, time_ms)
    right = WIDTH - RIGHT

    def x(value: float) -> float:
        span = (math.log10(value / lo) / math.log10(hi / lo)) if log_x else (value - lo) / ((hi - lo) or 1.0)
        return min(right, LEFT + span * (right - LEFT))

    body, scale = _y_axis(max(b[2] for b in bins), HEIGHT)
    bottom = HEIGHT - BOTTOM
    for low, high, count in bins:
        x0, x1 = x(low), x(high)
        h = _bar(count * scale)
        body.append(
            f'<rect x="{x0:.2f}" y="{bottom - h:.2f}" width="{max(x1 - x0, 1.0):.2f}" height="{h:.2f}" '
            f'fill="{FILL}"><title>{escape(label(low))} to {escape(label(high))}: {count:,}</title></rect>'
        )
    for at, text in _placed(ticks, hi, x, label):
        body.append(_text(at, bottom + 14, text))
    return _frame(body, x_label, y_label)


def columns(items: Sequence[tuple[str, int]], x_label: str, y_label: str) -> str:
    """One labelled column per (label, count), left to right."""
    body, scale = _y_axis(max((c for _, c in items), default=0), HEIGHT)
    bottom = HEIGHT - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(len(items), 1)
    every = math.ceil(7 * max((len(label) for label, _ in items), default=1) / slot + 0.25)  # labels fit
    for i, (label, count) in enumerate(items):
        x0, h = LEFT + i * slot + 0.1 * slot, _bar(count * scale) if count else 0.0
        body.append(
            f'<rect x="{x0:.2f}" y="{bottom - h:.2f}" width="{0.8 * slot:.2f}" height="{h:.2f}" '
            f'fill="{FILL}"><title>{escape(label)}: {count:,}</title></rect>'
        )
        if i % every == 0:
            body.append(_text(x0 + 0.4 * slot, bottom + 14, label))
    return _frame(body, x_label, y_label)


def rows(items: Sequence[tuple[str, int]], x_label: str) -> str:
    """One labelled horizontal bar per (label, count), top to bottom."""
    band = 22
    height = TOP + BOTTOM + band * max(len(items), 1)
    left = max(LEFT, 12 + 7 * max((len(label) for label, _ in items), default=0))  # room for the names
    ticks = nice_ticks(max((c for _, c in items), default=0), whole=True)
    scale = (WIDTH - left - RIGHT) / ticks[-1]
    body = []
    for value in ticks:
        x = left + value * scale
        body.append(f'<line x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{height - BOTTOM}" stroke="#ddd"/>')
        body.append(_text(x, height - BOTTOM + 14, _number(value)))
    for i, (label, count) in enumerate(items):
        y = TOP + i * band
        body.append(
            f'<rect x="{left}" y="{y + 3}" width="{_bar(count * scale) if count else 0.0:.2f}" '
            f'height="{band - 6}" fill="{FILL}">'
            f"<title>{escape(label)}: {count:,}</title></rect>"
        )
        body.append(_text(left - 4, y + band / 2 + 4, label, "end"))
    return _frame(body, x_label, "", height, left)


def cactus(points: Sequence[tuple[int, float]], x_label: str, y_label: str, time_ms: bool = False) -> str:
    """A cactus plot: a step line through (puzzles answered, time each took at most), rising in both, time on
    a log axis (`time_ms`: milliseconds, as durations): the further right and lower, the more and faster."""
    label = numbers.duration_ms if time_ms else _number
    points = [(n, t) for n, t in points if n > 0 and t > 0]
    if not points:
        return _frame([], x_label, y_label)
    most = max(n for n, _ in points)
    lo, hi, ticks = log_axis(min(t for _, t in points), max(t for _, t in points), time_ms)
    bottom = HEIGHT - BOTTOM
    x_ticks = nice_ticks(most, whole=True)

    def x(n: float) -> float:
        return LEFT + n / x_ticks[-1] * (WIDTH - LEFT - RIGHT)

    def y(t: float) -> float:
        return bottom - math.log10(t / lo) / math.log10(hi / lo) * (bottom - TOP)

    body = []
    for at, text in _placed(ticks, hi, y, label, vertical=True):
        body.append(f'<line x1="{LEFT}" y1="{at:.1f}" x2="{WIDTH - RIGHT}" y2="{at:.1f}" stroke="#ddd"/>')
        body.append(_text(LEFT - 4, at + 4, text, "end"))
    for value in x_ticks:
        body.append(_text(x(value), bottom + 14, _number(value)))
    path = [f"M{x(0):.2f},{y(points[0][1]):.2f}"]
    for n, t in points:
        path.append(f"L{x(n):.2f},{y(t):.2f}")
    body.append(f'<path d="{" ".join(path)}" fill="none" stroke="{FILL}" stroke-width="2"/>')
    n, t = points[-1]
    body.append(
        f'<circle cx="{x(n):.2f}" cy="{y(t):.2f}" r="3" fill="{FILL}"><title>{n:,} puzzles within '
        f"{escape(label(t))}</title></circle>"
    )
    return _frame(body, x_label, y_label)
