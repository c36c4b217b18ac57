"""A plain `pip install .` (no extras) brings every module the commands import.

The suite's own venv has test tools and whatever they pull in (pytest brings `packaging`),
which once hid that kombu's Redis transport needs `packaging`. So the check here does not
trust the environment: a fresh interpreter refuses every module whose distribution is not
reachable from pyproject.toml's `dependencies` (extras followed only where a requirement
names them), then imports what `worker`, `solve --broker`, `solve --report` and `serve` load
and writes a report. `.ci/plain_install` runs the commands themselves in a real plain venv.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.markers import Marker  # packaging comes with pytest
from packaging.requirements import Requirement

from tests.conftest import REPO

IMPORTS = """
import json, sys
from importlib import metadata
allowed, owners = set(json.loads(sys.argv[2])), metadata.packages_distributions()
OWN = {"solvers", "pipeline", "client", "worker", "web"}
refused = set()

class PlainInstall:
    \"\"\"Refuse a module whose distributions `pip install .` would not have installed.\"\"\"
    def find_spec(self, name, path=None, target=None):
        dists = owners.get(name.split(".")[0])
        if dists and name.split(".")[0] not in OWN and not any(norm(d) in allowed for d in dists):
            refused.add(name.split(".")[0])
            raise ModuleNotFoundError(f"No module named {name!r} (not installed by pip install .)", name=name)
        return None

def norm(name):
    import re
    return re.sub(r"[-_.]+", "-", name).lower()

sys.meta_path.insert(0, PlainInstall())
import client.cli, client.run, client.transport, client.redis_store, worker.app, worker.tasks
import celery.bin.celery, celery.apps.worker, celery.concurrency.prefork
from kombu.transport import resolve_transport
resolve_transport("redis")                     # what a broker URL redis:// loads
from client.report import write_report
from client.summary import Summary
write_report(Summary(), sys.argv[1])           # the report's imports, lazy ones included
import web.server, web.app, web.backend, uvicorn.protocols.http.h11_impl, uvicorn.loops.asyncio
import starlette.staticfiles, starlette.templating, jinja2   # `serve`: the page and its templates
print(json.dumps(sorted(refused)))             # optional imports that fell back, for the record
"""


def _closure(requirements: list[str]) -> set[str]:
    """Normalised names of the installed distributions these requirements reach (extras as asked)."""
    seen: set[str] = set()
    todo = [(Requirement(r), "") for r in requirements]
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = _norm(req.name)
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        for sub in metadata.distribution(req.name).requires or []:
            parsed = Requirement(sub)
            for asked in {"", *req.extras}:
                if parsed.marker is None or parsed.marker.evaluate({"extra": asked}):
                    todo.append((parsed, asked))
    return {k.split("[")[0] for k in seen}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_commands_import_with_only_what_a_plain_install_brings(tmp_path):
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    allowed = json.dumps(sorted(_closure(declared)))
    run = subprocess.run(
        [sys.executable, "-c", IMPORTS, str(tmp_path / "r.html"), allowed],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "r.html").stat().st_size > 0


def test_marker_evaluation_follows_extras_only_where_asked():
    assert Marker('extra == "redis"').evaluate({"extra": "redis"})
    assert "packaging" in _closure(["kombu[redis]"]) and "packaging" not in _closure(["kombu"])
