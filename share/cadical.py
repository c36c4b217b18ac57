"""Build the CaDiCaL that python-sat runs (1.9.5, from python-sat's own source release) for `share/`.

Why: a search that exports its learnt clauses must be as fast as the one it replaces, and the race's
SAT modes were chosen on python-sat's `Cadical195`; Debian's libcadical-dev is 1.5.3, which needs
more conflicts at 49x49 and 64x64 (docs/decisions.md). python-sat's sdist on PyPI ships CaDiCaL's
release tarball, so this builds the same solver from a registry, outside the repository's tree:

    python share/cadical.py DIR      # prints DIR/cadical-rel-1.9.5 once DIR/.../build/libcadical.a exists

Exit 1 with one line when pip, the download or the compiler fails (`make share` then falls back to
Debian's libcadical-dev).
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import tarfile
from pathlib import Path

MEMBER = "solvers/cadical195.tar.gz"  # python-sat's name for CaDiCaL 1.9.5 inside its sdist


def build(root: Path) -> Path:
    """Return CaDiCaL's source directory under `root`, with `build/libcadical.a` compiled (-fPIC)."""
    root.mkdir(parents=True, exist_ok=True)
    done = sorted(root.glob("cadical-rel-*/build/libcadical.a"))
    if done:
        return done[-1].parent.parent
    version = importlib.metadata.version("python-sat")
    sdist = root / f"python_sat-{version}.tar.gz"
    if not sdist.exists():
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        subprocess.run([*pip, "-d", str(root), f"python-sat=={version}"], check=True)
    with tarfile.open(sdist) as outer:
        inner = next(m for m in outer.getmembers() if m.name.endswith(MEMBER))
        with tarfile.open(fileobj=outer.extractfile(inner)) as source:
            source.extractall(root, filter="data")
    src = next(p for p in sorted(root.glob("cadical-rel-*")) if p.is_dir())
    subprocess.run(["./configure", "-fPIC"], cwd=src, check=True, stdout=subprocess.DEVNULL)
    make = ["make", "-j2", "-C", "build", "libcadical.a"]
    subprocess.run(make, cwd=src, check=True, stdout=subprocess.DEVNULL)
    return src


def main() -> int:
    """Build into argv[1]; print the source directory, or one line saying why not."""
    try:
        print(build(Path(sys.argv[1]).resolve()))
    except (OSError, subprocess.CalledProcessError, StopIteration, tarfile.TarError, IndexError) as exc:
        print(f"share/cadical.py: CaDiCaL not built from python-sat's sdist: {exc!r}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
