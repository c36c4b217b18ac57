"""The layering: web -> client -> pipeline -> solvers <- pipeline <- worker; no cycles, no private imports.

Each entry module is imported alone in a fresh interpreter (inside one pytest process an
earlier import can hide a cycle); each package is checked for what it loads; and the
import statements of every module (those inside functions, those only for type checkers and
relative ones too) must form no cycle between modules and take no `_private` name from another.
The contract between client and worker (`pipeline.contract`) stands below the engine that runs it.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import REPO

PACKAGES = ("solvers", "pipeline", "client", "worker", "web")
ENTRY_MODULES = [
    "solvers",
    "solvers.api",
    "solvers.kernel.bits",
    "solvers.exact",
    "solvers.exact.backtracking",
    "solvers.stochastic",
    "solvers.race.portfolio",
    "solvers.generate.generator",
    "pipeline",
    "pipeline.engine.solve",
    "pipeline.contract.generate",
    "pipeline.engine.render.jsonl",
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
FORBIDDEN = {  # package -> top-level packages none of its modules may load
    "solvers": {"pipeline", "client", "worker", "web", "celery", "kombu", "redis"},
    "pipeline": {"client", "worker", "web", "celery", "kombu", "redis"},
    "client": {"worker", "web"},
    "worker": {"client", "web"},
    "web": {"worker"},
}


def modules(package: str) -> list[str]:
    """Every module of a package, dotted."""
    root = REPO / package
    return sorted(
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for p in root.rglob("*.py")
    )


@pytest.mark.parametrize("name", ENTRY_MODULES)
def test_the_module_imports_first_in_a_fresh_interpreter(name):
    cmd = [sys.executable, "-c", f"import {name}"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]


@pytest.mark.parametrize("package", PACKAGES)
def test_a_package_loads_nothing_of_the_layers_above_it(package):
    names = ", ".join(m for m in modules(package) if m != "worker.warm")
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {names.split(', ')!r}];"
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = set(eval(run.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own printed list
    assert not loaded & FORBIDDEN[package], sorted(loaded & FORBIDDEN[package])


def test_the_contract_loads_nothing_of_the_engine_or_the_escalation():
    names = [m for m in modules("pipeline") if m.startswith("pipeline.contract")]
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {names!r}]; print(sorted(sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = eval(run.stdout.strip().splitlines()[-1])  # noqa: S307 - our own printed list
    assert not [m for m in loaded if m.startswith(ABOVE_CONTRACT)], loaded


# inside functions, so nothing of them loads on import; still debts: a part's JSON Lines rendered on demand,
# a generate chunk's statistics naming the worker
KNOWN_ABOVE_CONTRACT = {
    "pipeline.contract.generate imports pipeline.engine.solve",
    "pipeline.contract.part imports pipeline.engine.render.jsonl",
}
ABOVE_CONTRACT = ("pipeline.engine", "pipeline.escalation")


def test_no_import_statement_of_the_contract_names_the_engine_or_the_escalation():
    graph = _graph()
    bad = {f"{m} imports {d}" for m in graph if m.startswith("pipeline.contract") for d in graph[m]}
    bad = {b for b in bad if b.split(" imports ")[1].startswith(ABOVE_CONTRACT)}
    assert not bad - KNOWN_ABOVE_CONTRACT, sorted(bad)


def test_solvers_keeps_at_most_ten_loose_modules_beside_its_sub_packages():
    loose = sorted(p.name for p in (REPO / "solvers").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 10, loose


def _imports(module: str) -> list[tuple[str, list[str]]]:
    """(imported module, names taken) of each import statement of a module, type-checking or relative too."""
    path = REPO / (module.replace(".", "/") + ".py")
    package = module.split(".")[:-1] if path.exists() else module.split(".")
    path = path if path.exists() else REPO / module.replace(".", "/") / "__init__.py"
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # `from ..x import y` is read from the module's package
            base = package[: len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *filter(None, [node.module])])
            out.append((target, [alias.name for alias in node.names]))
    return out


def _graph() -> dict[str, set[str]]:
    ours = {m for p in PACKAGES for m in modules(p)}
    graph: dict[str, set[str]] = {m: set() for m in ours}
    for m in ours:
        for target, names in _imports(m):
            for name in names or [""]:
                full = f"{target}.{name}" if name else target
                dep = full if full in ours else target if target in ours else None
                if dep is not None and dep != m and not m.startswith(dep + "."):  # a package's own __init__
                    graph[m].add(dep)
    return graph


def test_no_two_modules_import_each_other_even_through_others():
    graph, cycles = _graph(), []
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(path[path.index(d) :] + [d] if d in path else [m, d])
            elif d not in state:
                visit(d, [*path, d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert not cycles, cycles


KNOWN_PRIVATE: set[str] = set()  # none left (propagation9._pick became bits.pick_mask)


def test_no_module_takes_a_private_name_from_another():
    bad = [
        f"{m} takes {target}.{name}"
        for p in PACKAGES
        for m in modules(p)
        for target, names in _imports(m)
        if target.split(".")[0] in PACKAGES and target != m
        for name in names
        if name.startswith("_")
    ]
    assert not set(bad) - KNOWN_PRIVATE, bad


# the command line hands `serve` to the web package inside that command's function (web
# builds on the client; no client module loads web on import: see FORBIDDEN)
UPWARD_ENTRY = {("client.cli", "web.server")}


def test_the_layers_point_one_way_in_the_import_statements():
    order = {"solvers": 0, "pipeline": 1, "client": 2, "worker": 2, "web": 3}
    bad = [
        f"{m} imports {d}"
        for m, deps in _graph().items()
        for d in deps
        if (a := m.split(".")[0]) != (b := d.split(".")[0])
        and order[b] >= order[a]
        and (m, d) not in UPWARD_ENTRY
    ]
    assert not bad, bad


# Entry points run, not only imported: each command of the command line in a fresh interpreter, then the
# top-level packages it loaded. A command loads only the layers it uses: none loads web but `serve`, none
# loads worker but `worker`, and a one-puzzle embedded solve loads no Celery.
RUNS = {
    "help": (["--help"], {"web", "worker", "starlette", "uvicorn", "celery", "redis"}),
    "solve one puzzle": (["solve", "-", "-q"], {"web", "worker", "starlette", "uvicorn", "celery"}),
    "status on an unreachable broker": (
        ["status", "ab" * 16, "--broker", "redis://127.0.0.1:1/0"],
        {"web", "worker", "starlette", "uvicorn"},
    ),
}
PUZZLE = "53..7....6..195....98....6.8...6...34..8.3..17...2...6.6....28....419..5....8..79"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_command_run_loads_no_layer_it_does_not_use(name):
    argv, forbidden = RUNS[name]
    code = (
        "import sys, contextlib, io\n"
        "from client.cli import main\n"
        f"sys.stdin = io.TextIOWrapper(io.BytesIO(({PUZZLE!r} + '\\n').encode()))\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        f"    main({argv!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = set(eval(run.stdout.strip().splitlines()[-1]))  # noqa: S307 - our own printed list
    assert not loaded & forbidden, sorted(loaded & forbidden)


# The commands that only read or mark jobs on the broker: none loads numba or the solvers' parser (they
# did, through solvers/__init__ and client.batch's producer: ~0.8 s of CPU before each `jobs` or `status`).
BROKER_COMMANDS = [
    "jobs",
    "status JOB",
    "status JOB --json",
    "cancel JOB",
    "health --broker-only",
    "purge JOB",
]


@pytest.mark.integration
def test_the_commands_that_list_watch_cancel_or_purge_a_job_load_no_numba(redis_client, tmp_path):
    from tests.conftest import SAMPLE, run_cli, url_of

    url = url_of(redis_client)
    submitted = run_cli("submit", str(SAMPLE), "--broker", url)  # no worker in this database: it waits
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    for command in BROKER_COMMANDS:  # in this order: `purge` last
        argv = [*command.replace("JOB", job).split(), "--broker", url]
        code = (
            "import sys, contextlib, io\n"
            "from client.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    code = main({argv!r})\n"
            "print(code, sorted(m for m in sys.modules if m in ('numba', 'solvers.model.parse')))\n"
        )
        run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout.split() == ["0", "[]"], (command, run.stdout, run.stderr[-500:])
