"""Numbers as a person reads them: the one format of the summary, the HTML report and the web page.

Half way rounds away from zero, as JavaScript's `toPrecision`; not finite reads "-". `web/static/common.js`
holds the same rules for the page: tests/test_numbers.py compares both over one table of numbers."""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal


def _rounded(value: float) -> int:
    """`value` to the nearest whole number, half away from zero (Python's round() goes to the even one)."""
    return int(Decimal(value).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def count(value: float) -> str:
    """A count with thousands separators: 8,035."""
    if isinstance(value, int):
        return f"{value:,}"
    return f"{_rounded(value):,}" if math.isfinite(value) else "-"


def sig(value: float, digits: int = 3) -> str:
    """A measured value: `digits` significant digits below 100, trailing zeros dropped (0.0123, 2.5,
    45.6), whole numbers with separators from 100 on (12,345); never an exponent."""
    if not math.isfinite(value):
        return "-"
    exact = Decimal(value)  # the float's exact value, rounded once (as toPrecision rounds it)
    if exact == 0:
        return "0"
    rounded = exact.quantize(Decimal(1).scaleb(exact.adjusted() - digits + 1), rounding=ROUND_HALF_UP)
    if abs(rounded) >= 100:
        return f"{_rounded(value):,}"
    text = f"{rounded:.{max(0, digits - 1 - rounded.adjusted())}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def duration(seconds: float) -> str:
    """A time in the unit that fits: 2.46 us, 12.3 ms, 3.21 s, 2 min 5 s, 2 min, 1 h 3 min, 1 h."""
    if not math.isfinite(seconds) or seconds < 0:
        return "-"
    if seconds == 0:
        return "0 s"
    if seconds < 0.9995e-3:  # what would read 1,000 us is 1 ms (and 1,000 ms is 1 s)
        return f"{sig(seconds * 1e6)} us"
    if seconds < 0.9995:
        return f"{sig(seconds * 1e3)} ms"
    if seconds < 59.95:
        return f"{sig(seconds)} s"
    if seconds < 3599.5:
        minutes, rest = divmod(_rounded(seconds), 60)
        return f"{minutes} min {rest} s" if rest else f"{minutes} min"
    hours, rest = divmod(_rounded(seconds / 60), 60)
    return f"{hours:,} h {rest} min" if rest else f"{hours:,} h"


def duration_ms(ms: float) -> str:
    """`duration` of a time given in milliseconds (the records' unit)."""
    return duration(ms / 1e3)


def per_second(rate: float) -> str:
    """A rate as people read it: thousands separated, but two significant digits below 10 (0.38, 2.5)."""
    if not math.isfinite(rate):
        return "-"
    return f"{_rounded(rate):,}" if rate >= 10 or rate == 0 else sig(rate, 2)


def byte_size(n: int) -> str:
    """A size in the unit that fits, three significant digits: 512 bytes, 16.6 kB, 3.1 MB, 1.2 GB."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{sig(n / scale)} {unit}"
    return f"{int(n)} bytes"


def plural(value: int, noun: str, nouns: str | None = None) -> str:
    """A count with its noun, singular for exactly one: `1 puzzle`, `2,000 puzzles`, `1 local process`
    (`nouns`: the plural when it is not `noun` + s); `plural` in web/static/common.js is the same."""
    return f"{count(value)} {noun if value == 1 else nouns or noun + 's'}"
