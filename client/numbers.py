"""Numbers as a person reads them: the one format of the summary, the HTML report and the web page.

Counts get thousands separators (8,035); measured values three significant digits, trailing
zeros dropped, in the unit that fits (0.00246 ms is 2.46 us; us, ms, s, min, h), from 100 on
whole numbers with separators (12,345). `web/static/common.js` holds the same
rules for the page (`count`, `sig`, `duration`), tested against these.
"""

from __future__ import annotations

import math


def count(value: int) -> str:
    """A count with thousands separators: 8,035."""
    return f"{int(value):,}"


def sig(value: float, digits: int = 3) -> str:
    """A measured value: `digits` significant digits below 100, trailing zeros dropped (0.0123, 2.5,
    45.6), whole numbers with separators from 100 on (12,345); never an exponent."""
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0:
        return "0"
    if abs(rounded) >= 100:
        return f"{round(value):,}"
    text = f"{rounded:.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration(seconds: float) -> str:
    """A time in the unit that fits: 2.46 us, 12.3 ms, 3.21 s, 2 min 5 s, 1 h 3 min."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    if seconds == 0:
        return "0 s"
    if seconds < 1e-3:
        return f"{sig(seconds * 1e6)} us"
    if seconds < 1:
        return f"{sig(seconds * 1e3)} ms"
    if seconds < 59.95:
        return f"{sig(seconds)} s"
    if seconds < 3600:
        minutes, rest = divmod(round(seconds), 60)
        return f"{minutes} min {rest} s"
    hours, rest = divmod(round(seconds / 60), 60)
    return f"{hours} h {rest} min"


def duration_ms(ms: float) -> str:
    """`duration` of a time given in milliseconds (the records' unit)."""
    return duration(ms / 1e3)


def per_second(rate: float) -> str:
    """A rate as people read it: thousands separated, but two significant digits below 10 (0.38, 2.5)."""
    return f"{rate:,.0f}" if rate >= 10 or rate == 0 else sig(rate, 2)


def plural(value: int, noun: str, nouns: str | None = None) -> str:
    """A count with its noun, singular for exactly one: `1 puzzle`, `2,000 puzzles`, `1 local process`
    (`nouns`: the plural when it is not `noun` + s); `plural` in web/static/common.js is the same."""
    return f"{count(value)} {noun if value == 1 else nouns or noun + 's'}"
