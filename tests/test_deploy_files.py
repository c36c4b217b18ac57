"""The deployment files parse and agree with the code: services, env variables, entry points, app path.

No Docker engine or cluster is needed: the files are read as data and checked against
the settings classes, the CLI grammar and the Celery app.
"""

from __future__ import annotations

import configparser
import importlib.util
import re
import shlex
import tomllib
from pathlib import Path

import pytest

from client.cli import parser
from client.config import ClientSettings, check_broker_url
from tests.conftest import REPO

yaml = pytest.importorskip("yaml")

DOCKERFILE = REPO / "deploy" / "Dockerfile"
COMPOSE = REPO / "docker-compose.yml"
K8S = REPO / "deploy" / "k8s"
UNIT = REPO / "deploy" / "systemd" / "sudoku-batch-worker.service"
ENV_EXAMPLE = REPO / ".env.example"


def subcommands() -> set[str]:
    """The `sudoku-batch` subcommands the CLI accepts."""
    (action,) = [a for a in parser()._actions if a.dest == "command"]
    return set(action.choices)


def settings_env_names() -> set[str]:
    """Every SUDOKU_BATCH_* variable the client or the worker reads."""
    from worker.config import WorkerSettings

    fields = set(ClientSettings.model_fields) | set(WorkerSettings.model_fields)
    return {f"SUDOKU_BATCH_{name.upper()}" for name in fields}


def check_cli_args(args: list[str]) -> None:
    """Assert `sudoku-batch ARGS` parses with the real grammar."""
    assert args[0] in subcommands(), args
    parser().parse_args(args)


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments) of the Dockerfile, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def substitute(value: str, env: dict[str, str]) -> str:
    """Expand compose's ${VAR}, ${VAR:-default} and ${VAR:?message}."""

    def repl(m: re.Match[str]) -> str:
        name, op, arg = m.group(1), m.group(2) or "", m.group(3) or ""
        if name in env and env[name]:
            return env[name]
        assert op != ":?", f"{name} must be set: {arg}"
        return arg if op == ":-" else ""

    return re.sub(r"\$\{(\w+)(:[-?])?([^}]*)\}", repl, value)


def env_example() -> dict[str, str]:
    """The variables .env.example defines."""
    pairs = [
        line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines() if "=" in line and line[0] != "#"
    ]
    return {k.strip(): v.strip() for k, v in pairs}


def test_the_console_script_is_the_cli_and_the_worker_runs_the_celery_app_by_its_path():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert project["project"]["scripts"]["sudoku-batch"] == "client.__main__:command"  # runs client.cli.main
    assert "from client.cli import main" in (REPO / "client" / "__main__.py").read_text()
    from celery import Celery

    from pipeline.contract.tasks import SOLVE_TASK_NAME as TASK_NAME
    from worker.app import app

    app.loader.import_default_modules()  # what `celery -A worker.app worker` does: the `include`d tasks
    assert isinstance(app, Celery) and TASK_NAME in app.tasks
    assert '"-A", "worker.app"' in (REPO / "client" / "cli.py").read_text()
    assert importlib.util.find_spec("worker.warm") is not None


def test_the_dockerfile_is_slim_non_root_installs_the_project_warms_numba_and_runs_the_worker():
    steps = dockerfile()
    words = [w for w, _ in steps]
    assert re.fullmatch(r"python:3\.1[1-9]-slim", dict(steps)["FROM"])
    user = [a for w, a in steps if w == "USER"]
    assert user and user[-1] not in ("root", "0")
    assert words.index("USER") < max(i for i, w in enumerate(words) if w == "RUN")  # warmed as that user
    runs = " ".join(a for w, a in steps if w == "RUN")
    assert "pip install" in runs
    for module in re.findall(r"python -m ([\w.]+)", runs):
        assert importlib.util.find_spec(module) is not None, module
    for word, args in steps:
        if word == "COPY":
            *sources, _ = shlex.split(args)
            assert all((REPO / s).exists() for s in sources), args
    copied = " ".join(a for w, a in steps if w == "COPY")
    packages = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for package in (p.rstrip("*") for p in packages["include"]):  # every package the install ships
        assert re.search(rf"\b{package}\b", copied), package
    entry = yaml.safe_load(dict(steps)["ENTRYPOINT"])
    assert entry == ["sudoku-batch", "worker"]
    health = yaml.safe_load(dict(steps)["HEALTHCHECK"].split("CMD", 1)[1].strip())
    assert health[0] == "sudoku-batch"
    check_cli_args(health[1:])
    uid = re.search(r"--uid (\d+)", runs)
    assert uid and int(uid.group(1)) >= 1000


def test_compose_has_redis_with_aof_and_a_password_scalable_workers_flower_and_a_client_example():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"redis", "worker", "flower", "client"} <= set(services)
    env = env_example()
    redis_cmd = [substitute(str(a), env) for a in services["redis"]["command"]]
    assert redis_cmd[redis_cmd.index("--appendonly") + 1] == "yes"
    assert redis_cmd[redis_cmd.index("--requirepass") + 1] == env["REDIS_PASSWORD"]
    mounts = services["redis"]["volumes"]
    assert any(m.split(":")[0] in compose["volumes"] and m.split(":")[1] == "/data" for m in mounts)
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), (name, port)  # never the host's public interface
    worker = services["worker"]
    assert "container_name" not in worker and "ports" not in worker  # `--scale worker=8` works
    assert (REPO / worker["build"]["context"] / worker["build"]["dockerfile"]).is_file()
    check_cli_args(["worker", *[substitute(str(a), env) for a in worker["command"]]])
    assert "monitoring" in services["flower"]["profiles"]
    client = services["client"]
    assert client["entrypoint"] == ["sudoku-batch"]
    check_cli_args([substitute(str(a), env) for a in client["command"]])


def test_compose_brokers_point_at_the_redis_service_with_the_password_and_known_variables():
    compose = yaml.safe_load(COMPOSE.read_text())
    env = env_example()
    known = settings_env_names()
    seen = 0
    for name in ("worker", "client"):
        environment = compose["services"][name]["environment"]
        unknown = [k for k in environment if k.startswith("SUDOKU_BATCH_") and k not in known]
        assert not unknown, unknown
        url = substitute(environment["SUDOKU_BATCH_BROKER"], env)
        check_broker_url(url)
        assert url == f"redis://:{env['REDIS_PASSWORD']}@redis:6379/0"
        seen += 1
    assert seen == 2
    flower = compose["services"]["flower"]
    url = substitute(flower["environment"]["CELERY_BROKER_URL"], env)
    assert url == f"redis://:{env['REDIS_PASSWORD']}@redis:6379/0"


def test_no_compose_command_line_holds_the_redis_password_where_ps_would_show_it():
    compose = yaml.safe_load(COMPOSE.read_text())
    for name, service in compose["services"].items():
        if name == "redis":  # redis-server takes it as --requirepass and hides it from its own title
            continue
        words = [str(w) for w in [*service.get("command", []), *service.get("entrypoint", [])]]
        secret = [w for w in words if "REDIS_PASSWORD" in w or re.search(r"redis://[^@/]*@", w)]
        assert not secret, (name, secret)


def test_the_compose_workers_send_task_events_so_flower_sees_the_tasks():
    worker = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]
    args = [substitute(str(a), env_example()) for a in worker["command"]]
    assert parser().parse_args(["worker", *args]).events


def test_every_variable_the_compose_file_needs_is_in_the_env_example():
    needed = set(re.findall(r"\$\{(\w+)(?::\?[^}]*)?\}", COMPOSE.read_text()))
    assert needed <= set(env_example()), needed - set(env_example())


def k8s_docs() -> list[dict]:
    """Every document of the Kubernetes manifests (the autoscalers in deploy/k8s/autoscaling/ too)."""
    return [d for f in sorted(K8S.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def test_the_k8s_worker_deployment_has_resources_a_cpu_autoscaler_and_valid_arguments():
    docs = {(d["kind"], d["metadata"]["name"]): d for d in k8s_docs()}
    deployment = docs[("Deployment", "sudoku-batch-worker")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    check_cli_args(["worker", *container["args"]])
    assert {"requests", "limits"} <= set(container["resources"])
    assert "cpu" in container["resources"]["requests"]
    check_cli_args(container["livenessProbe"]["exec"]["command"][1:])
    env = {e["name"]: e for e in container["env"]}
    assert all(name in settings_env_names() for name in env if name.startswith("SUDOKU_BATCH_"))
    url = env["SUDOKU_BATCH_BROKER"]["value"].replace("$(REDIS_PASSWORD)", "pw")
    check_broker_url(url)
    assert list(env).index("REDIS_PASSWORD") < list(env).index("SUDOKU_BATCH_BROKER")  # $(VAR) needs it first
    host = url.split("@", 1)[1].split(":", 1)[0]
    assert ("Service", host) in docs
    secret = env["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert secret == {"name": "sudoku-batch-redis", "key": "password"}
    uid = int(re.search(r"--uid (\d+)", DOCKERFILE.read_text()).group(1))
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"] == uid
    hpa = docs[("HorizontalPodAutoscaler", "sudoku-batch-worker")]
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "sudoku-batch-worker",
    }
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]


def test_the_k8s_workers_share_one_read_write_many_volume_at_the_path_the_docs_use():
    docs = {(d["kind"], d["metadata"]["name"]): d for d in k8s_docs()}
    pod = docs[("Deployment", "sudoku-batch-worker")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    claim = docs[("PersistentVolumeClaim", claims["shared-data"])]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert f"-o {mounts['shared-data']}/results/" in (REPO / "docs" / "scaling.md").read_text()
    compose = yaml.safe_load(COMPOSE.read_text())
    assert "shared-data:/shared" in compose["services"]["worker"]["volumes"]
    assert "shared-data:/shared" in compose["services"]["client"]["volumes"]


def test_the_k8s_redis_persists_with_aof_on_a_volume_and_requires_the_password():
    docs = {(d["kind"], d["metadata"]["name"]): d for d in k8s_docs()}
    redis_set = docs[("StatefulSet", "redis")]
    pod = redis_set["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--appendonly") + 1] == "yes"
    assert args[args.index("--requirepass") + 1] == "$(REDIS_PASSWORD)"
    mount = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    claim = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]}
    assert mount["data"] == "/data" and ("PersistentVolumeClaim", claim["data"]) in docs
    service = docs[("Service", "redis")]
    assert service["spec"]["selector"] == redis_set["spec"]["template"]["metadata"]["labels"]


def test_the_k8s_manifests_ship_no_secret_and_say_how_to_create_the_one_they_read():
    assert not [d for d in k8s_docs() if d["kind"] == "Secret"]  # `kubectl apply` would overwrite yours
    redis_env = k8s_docs()[[d["kind"] for d in k8s_docs()].index("StatefulSet")]["spec"]["template"]["spec"]
    (ref,) = [e["valueFrom"]["secretKeyRef"] for e in redis_env["containers"][0]["env"]]
    command = f"kubectl create secret generic {ref['name']} --from-literal={ref['key']}="
    assert command in (K8S / "redis.yaml").read_text()
    assert command in (REPO / "docs" / "scaling.md").read_text()


def test_the_systemd_unit_runs_the_worker_as_a_user_after_warming_and_restarts_it():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read_string(UNIT.read_text())
    service = unit["Service"]
    start = shlex.split(service["ExecStart"])
    assert Path(start[0]).name == "sudoku-batch"
    check_cli_args(start[1:])
    pre = shlex.split(service["ExecStartPre"])
    assert pre[1:3] == ["-m", "worker.warm"] and importlib.util.find_spec(pre[2]) is not None
    assert service["User"] not in ("root", "0") and service["Restart"] == "always"
    assert service["Environment"].split("=", 1)[1].startswith(f"/var/cache/{service['CacheDirectory']}/")
    assert service["Environment"].startswith("NUMBA_CACHE_DIR=")
    assert "SUDOKU_BATCH_BROKER" in UNIT.read_text()  # documented in the EnvironmentFile note
    assert unit["Install"]["WantedBy"] == "multi-user.target"


def test_every_deployment_makes_its_workers_shared_mount_their_data_root():
    compose = yaml.safe_load(COMPOSE.read_text())["services"]["worker"]
    args = parser().parse_args(["worker", *[substitute(str(a), env_example()) for a in compose["command"]]])
    mounts = [v.split(":")[1] for v in compose["volumes"]]
    assert args.data_root == ["/shared"] and "/shared" in mounts
    pod = {(d["kind"], d["metadata"]["name"]): d for d in k8s_docs()}[("Deployment", "sudoku-batch-worker")]
    (container,) = pod["spec"]["template"]["spec"]["containers"]
    args = parser().parse_args(["worker", *container["args"]])
    assert args.data_root == [m["mountPath"] for m in container["volumeMounts"] if m["name"] == "shared-data"]
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read_string(UNIT.read_text())
    args = parser().parse_args(shlex.split(unit["Service"]["ExecStart"])[1:])
    assert args.data_root and unit["Service"]["ReadWritePaths"].lstrip("-") == args.data_root[0]
