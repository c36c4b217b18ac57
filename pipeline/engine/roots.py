"""Data roots: the paths and URLs a worker may read and write, whatever a queue message names (`DataRoots`,
checked before anything is opened; `OutsideRoots` when a location lies outside them)."""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

from pipeline.engine.storage import StorageError, local_path

MAX_ROOTS = 64  # data roots a worker takes (and a client reads from one worker's beat)
CHAINED = "::"  # fsspec chains URLs with it (`simplecache::s3://...`): refused anywhere in a location
DOT_SEGMENT = re.compile(r"(^|[/\\])\.{1,2}([/\\]|$)")  # `.` or `..` as a path segment


class OutsideRoots(StorageError):
    """A split or dataset a message names outside the data roots of the worker it reached: refused before it
    is opened (the message says what the worker refuses, never the file's size or content)."""


def _place(location: str) -> tuple[str, tuple[str, ...]] | None:
    """(protocol, path segments) a location names as the storage would open it: a local path (protocol "")
    after `..` and symlinks are resolved, a URL as protocol and `bucket/key` segments; None for what is
    refused whatever the roots: a chained URL, `.`, `..` or an empty segment in a URL, a NUL byte."""
    if CHAINED in location:
        return None
    path = local_path(location)
    if path is not None:
        try:
            real = os.path.realpath(path)  # what `LocalStorage` opens: no `~` expanded
        except (ValueError, OSError):  # an embedded NUL byte, a loop of links
            return None
        return "", tuple(p for p in real.split("/") if p)
    protocol, rest = location.split("://", 1)
    rest = rest.rstrip("/")
    parts = tuple(rest.split("/")) if rest else ()
    if "" in parts or DOT_SEGMENT.search(unquote(rest)) or "\x00" in unquote(rest):
        return None
    return protocol.lower(), parts


def shown(location: str, limit: int = 300) -> str:
    """A location as one printable line (control characters escaped, cut at `limit` characters)."""
    text = repr(location)[1:-1] if not location.isprintable() else location
    return text if len(text) <= limit else text[:limit] + "..."


class DataRoots:
    """The paths and URLs a worker reads and writes under (`--data-root`): a queue message is anyone's with
    the Redis password, so its locations are checked before anything is opened (docs/security.md)."""

    def __init__(self, roots: list[tuple[str, tuple[str, ...]]], texts: list[str]) -> None:
        self.roots = roots
        self.texts = texts

    @classmethod
    def parse(cls, texts: list[str]) -> DataRoots:
        """Roots from their texts (paths or URLs; blanks skipped); ValueError (one line) for one that cannot
        be a root: a chained URL, `..` in a URL, a NUL byte, more than MAX_ROOTS."""
        roots, kept = [], []
        for text in (t.strip() for t in texts):
            if not text:
                continue
            place = _place(text)
            if place is None:
                raise ValueError(
                    f"data root {shown(text)}: not a path or a plain URL (no `..`, no chained `a::b` URL)"
                )
            roots.append(place)
            kept.append(("/" + "/".join(place[1])) if place[0] == "" else text.rstrip("/"))
        if len(roots) > MAX_ROOTS:
            raise ValueError(f"{len(roots)} data roots: at most {MAX_ROOTS}")
        return cls(roots, kept)

    def allows(self, location: str) -> bool:
        """True when `location` lies under one of the roots (or is one)."""
        place = _place(location)
        if place is None:
            return False
        protocol, parts = place
        return any(p == protocol and parts[: len(r)] == r for p, r in self.roots)

    def check(self, location: str, action: str) -> None:
        """Nothing when `location` lies under a root; else OutsideRoots: "refuses to ACTION LOCATION: ..."."""
        if self.allows(location):
            return
        where = f"outside its data roots ({', '.join(self.texts)})" if self.texts else "it has no data roots"
        raise OutsideRoots(
            f"refuses to {action} {shown(location)}: {where}; start workers with --data-root DIR (or "
            "SUDOKU_BATCH_DATA_ROOTS) to let them read inputs and write datasets under DIR"
        )

    def __bool__(self) -> bool:
        return bool(self.roots)
