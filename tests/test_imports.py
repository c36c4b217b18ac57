"""The modules a process starts from import first in a fresh interpreter (no import cycles).

Inside one pytest process an earlier import can hide a cycle; a worker starts from
`worker.app`, the CLI from `client.cli`, a notebook from `solvers`, so each is imported
alone in a new interpreter.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

ENTRY_MODULES = [
    "solvers",
    "solvers.api",
    "solvers.bits",
    "solvers.exact",
    "solvers.exact.backtracking",
    "solvers.stochastic",
    "solvers.portfolio",
    "solvers.generator",
    "solvers.chunk",
    "client",
    "client.cli",
    "worker.app",
    "worker.tasks",
    "worker.warm",
    "worker.broker",  # the next three are named in worker.app's settings, imported by Celery by name
    "worker.consumer",
    "worker.requests",
    "web.server",  # `serve` starts here, and builds the app from these
    "web.app",
]


@pytest.mark.parametrize("name", ENTRY_MODULES)
def test_the_module_imports_first_in_a_fresh_interpreter(name):
    cmd = [sys.executable, "-c", f"import {name}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
