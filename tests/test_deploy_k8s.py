"""The Kubernetes manifests are valid for the cluster they target, and the autoscalers scale the workers on
what the code exports.

No cluster is needed: the core kinds are checked with kubernetes-validate (Kubernetes' own OpenAPI
schemas, strict: an unknown field fails), the ScaledObject with jsonschema against KEDA's published CRD
schema (tests/data, vendored from KEDA v2.20.2) made as strict as a current API server's field validation.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest

from client.cli import parser
from client.serve_args import TOKEN_ENV
from tests.conftest import REPO
from web.metrics import exported_names

yaml = pytest.importorskip("yaml")
jsonschema = pytest.importorskip("jsonschema")
kubernetes_validate = pytest.importorskip("kubernetes_validate")

K8S = REPO / "deploy" / "k8s"
KUBERNETES_VERSION = "1.32.0"  # the oldest Kubernetes that KEDA 2.17 to 2.20 all support
KEDA_SCHEMA = REPO / "tests" / "data" / "keda-scaledobject-v2.20.2.schema.yaml"
# The Prometheus names `sudoku-batch serve` exports on /metrics, from the exporter's declaration: a metric
# renamed there fails here while the autoscaler still queries the old name.
EXPORTED_METRICS = frozenset(exported_names())
# The prometheus scaler's trigger metadata, KEDA v2.20.2 pkg/scalers/prometheus_scaler.go (`keda:"name=..."`):
# the CRD holds trigger metadata as a map of strings, so a misspelt key passes the schema; KEDA ignores it.
PROMETHEUS_SCALER_FIELDS = {
    "serverAddress",
    "query",
    "queryParameters",
    "threshold",
    "activationThreshold",
    "namespace",
    "customHeaders",
    "ignoreNullValues",
    "unsafeSsl",
    "awsRegion",
    "timeout",
    "identityOwner",
}


def manifests() -> list[tuple[Path, dict[str, Any]]]:
    """(file, document) of every manifest under deploy/k8s, its subdirectories too."""
    return [(f, d) for f in sorted(K8S.rglob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def is_core(doc: dict[str, Any]) -> bool:
    """True for the kinds Kubernetes itself serves (v1, apps/v1, autoscaling/v2...), not a CRD's."""
    group = doc["apiVersion"].rpartition("/")[0]
    return "." not in group or group.endswith(".k8s.io")


def by_kind(kind: str) -> dict[str, dict[str, Any]]:
    """The documents of one kind, by name."""
    return {d["metadata"]["name"]: d for _, d in manifests() if d["kind"] == kind}


def strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever it lists the fields (`kubectl apply` validates
    strictly since Kubernetes 1.27: a misspelt field is an error there, not dropped)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    return [strict(v) for v in schema] if isinstance(schema, list) else schema


def keda_errors(doc: dict[str, Any]) -> list[str]:
    """What KEDA's CRD schema (and its one CEL rule, min <= max replicas) refuses in a ScaledObject."""
    schema = strict(yaml.safe_load(KEDA_SCHEMA.read_text()))
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    spec = doc.get("spec", {})
    if "minReplicaCount" in spec and spec["minReplicaCount"] > spec.get("maxReplicaCount", 100):
        errors.append("spec: minReplicaCount must be less than or equal to maxReplicaCount")
    return errors


def scaled_object() -> dict[str, Any]:
    """The one ScaledObject of the manifests."""
    (only,) = by_kind("ScaledObject").values()
    return only


def worker_concurrency() -> int:
    """The worker pod's processes (`sudoku-batch worker --concurrency`)."""
    (container,) = by_kind("Deployment")["sudoku-batch-worker"]["spec"]["template"]["spec"]["containers"]
    return parser().parse_args(["worker", *container["args"]]).concurrency


@pytest.mark.parametrize(
    "path", sorted(p.relative_to(K8S).as_posix() for p in K8S.rglob("*.yaml")), ids=lambda p: p
)
def test_every_core_kind_in_a_manifest_is_valid_for_kubernetes_with_no_unknown_field(path):
    docs = [d for d in yaml.safe_load_all((K8S / path).read_text()) if d and is_core(d)]
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{path}: {doc['kind']} {doc['metadata']['name']}: {exc.message} at {list(exc.path)}")


def test_the_validator_refuses_a_misspelt_field_of_a_core_kind():
    deployment = copy.deepcopy(by_kind("Deployment")["sudoku-batch-worker"])
    deployment["spec"]["replica"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def test_every_manifest_not_of_a_core_kind_is_a_scaled_object_valid_against_kedas_crd_schema():
    others = [(f.name, d) for f, d in manifests() if not is_core(d)]
    assert [(name, d["apiVersion"], d["kind"]) for name, d in others] == [
        ("keda.yaml", "keda.sh/v1alpha1", "ScaledObject")
    ]
    assert keda_errors(others[0][1]) == []


def test_kedas_schema_refuses_a_misspelt_field_a_wrong_type_and_min_above_max():
    for path, value in [("minReplicas", 0), ("pollingInterval", "10s"), ("minReplicaCount", 40)]:
        bad = copy.deepcopy(scaled_object())
        bad["spec"][path] = value
        assert keda_errors(bad), (path, value)


def test_the_scaled_object_scales_the_worker_deployment_to_zero_on_the_queue_and_chunks_in_flight():
    spec = scaled_object()["spec"]
    deployment = by_kind("Deployment")["sudoku-batch-worker"]
    target = spec["scaleTargetRef"]
    assert (target["apiVersion"], target["kind"]) == (deployment["apiVersion"], deployment["kind"])
    assert target["name"] == deployment["metadata"]["name"]
    assert "replicas" not in deployment["spec"]  # the autoscaler owns it: `kubectl apply` must not reset it
    assert spec["minReplicaCount"] == 0 and spec["maxReplicaCount"] >= 1
    assert 0 < spec["pollingInterval"] <= 30 and spec["cooldownPeriod"] >= 60
    (trigger,) = spec["triggers"]
    assert trigger["type"] == "prometheus"
    meta = trigger["metadata"]
    assert set(meta) <= PROMETHEUS_SCALER_FIELDS, set(meta) - PROMETHEUS_SCALER_FIELDS
    names = set(re.findall(r"\bsudoku_batch_\w+", meta["query"]))
    assert names == {"sudoku_batch_chunks_queued", "sudoku_batch_chunks_in_flight"}
    assert float(meta["threshold"]) == worker_concurrency()  # a pod per `--concurrency` chunks
    assert float(meta["activationThreshold"]) == 0  # one chunk wakes the fleet from zero
    assert meta["ignoreNullValues"] == "false"  # serve down is an error (the fallback holds), not an idle 0
    assert spec["fallback"]["behavior"] == "currentReplicasIfHigher"


def test_every_metric_an_autoscaler_queries_is_one_the_exporter_declares():
    triggers = scaled_object()["spec"]["triggers"]
    queries = [t["metadata"]["query"] for t in triggers if t["type"] == "prometheus"]
    used = {name for q in queries for name in re.findall(r"\bsudoku_batch_\w+", q)}
    assert used and used <= EXPORTED_METRICS, used - EXPORTED_METRICS


def test_the_cpu_autoscaler_is_the_alternative_on_the_same_deployment_and_neither_is_applied_by_default():
    (hpa,) = by_kind("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == scaled_object()["spec"]["scaleTargetRef"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]
    homes = {d["kind"]: f.relative_to(K8S).parent.as_posix() for f, d in manifests()}
    assert homes["ScaledObject"] == homes["HorizontalPodAutoscaler"] == "autoscaling"  # not `apply -f k8s/`
    docs = (REPO / "docs" / "scaling.md").read_text()
    for name in ("deploy/k8s/autoscaling/keda.yaml", "deploy/k8s/autoscaling/cpu-hpa.yaml"):
        assert name in docs, name


def scrape_config() -> dict[str, Any]:
    """The Prometheus scrape job docs/scaling.md gives for serve's /metrics."""
    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "scaling.md").read_text(), re.S)
    (job,) = [j for b in blocks if "scrape_configs" in b for j in yaml.safe_load(b)["scrape_configs"]]
    return job


def test_the_documented_scrape_job_reads_the_serve_service_that_the_query_names():
    job = scrape_config()
    assert f'job="{job["job_name"]}"' in scaled_object()["spec"]["triggers"][0]["metadata"]["query"]
    service = by_kind("Service")["sudoku-batch-serve"]
    (port,) = service["spec"]["ports"]
    (target,) = job["static_configs"][0]["targets"]
    assert target == f"{service['metadata']['name']}:{port['port']}"
    assert job.get("metrics_path", "/metrics") == "/metrics"
    assert "authorization" in job  # off loopback serve wants its token


def test_the_serve_deployment_runs_serve_off_loopback_with_a_token_on_the_broker_its_service_exposes():
    deployment = by_kind("Deployment")["sudoku-batch-serve"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["sudoku-batch"]
    args = parser().parse_args(container["args"])
    assert args.command == "serve" and args.host == "0.0.0.0"
    env = {e["name"]: e for e in container["env"]}
    assert env[TOKEN_ENV]["valueFrom"]["secretKeyRef"]["name"] == "sudoku-batch-serve"
    assert env["SUDOKU_BATCH_BROKER"]["value"] == "redis://:$(REDIS_PASSWORD)@redis:6379/0"
    assert list(env).index("REDIS_PASSWORD") < list(env).index("SUDOKU_BATCH_BROKER")
    service = by_kind("Service")["sudoku-batch-serve"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[service["spec"]["ports"][0]["targetPort"]] == args.port
    assert not by_kind("Secret")  # created by hand, as the file's header says
    token = "kubectl create secret generic sudoku-batch-serve --from-literal=token="
    assert token in (K8S / "serve.yaml").read_text() and token in (REPO / "docs" / "scaling.md").read_text()


SIGTERM_TEST_TAIL = "and_its_chunk_is_taken_again_at_once"  # the name's end (it is longer than a line)


def test_the_docs_name_the_test_that_a_worker_scaled_away_mid_chunk_loses_nothing():
    name = "_".join(["test_a_signalled_worker_exits_128_plus_the_signal_within_seconds", SIGTERM_TEST_TAIL])
    assert f"def {name}(" in (REPO / "tests" / "test_worker_faults.py").read_text()
    assert name in (REPO / "docs" / "scaling.md").read_text()


EXPOSITION = (  # what serve's /metrics says of the queue: 3 chunks waiting, 2 taken and not acknowledged
    "# TYPE sudoku_batch_chunks_queued gauge\nsudoku_batch_chunks_queued 3\n"
    "# TYPE sudoku_batch_chunks_in_flight gauge\nsudoku_batch_chunks_in_flight 2\n"
)


class Exporter:
    """A stand-in for serve's /metrics on loopback: the exposition above, to a request with the token only."""

    def __init__(self, token: str) -> None:
        import http.server
        import threading

        expected = f"Bearer {token}"

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                ok = self.path == "/metrics" and self.headers.get("Authorization") == expected
                body = EXPOSITION.encode() if ok else b"no"
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_real_prometheus_scraping_as_documented_answers_the_query_with_queued_plus_in_flight(tmp_path):
    import json
    import shutil
    import subprocess
    import urllib.parse
    import urllib.request

    from tests.conftest import free_port, wait_until

    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (Debian's `prometheus` package)")
    token = "t" * 32
    (tmp_path / "token").write_text(token)
    exporter = Exporter(token)
    job = {**scrape_config(), "scrape_interval": "1s", "static_configs": [{"targets": [exporter.address]}]}
    job["authorization"] = {**job["authorization"], "credentials_file": str(tmp_path / "token")}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [job]}))
    port = free_port()
    proc = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'db'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    query = scaled_object()["spec"]["triggers"][0]["metadata"]["query"]

    def answer() -> list[dict[str, Any]] | None:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                body = json.load(reply)
        except OSError:
            return None  # not listening yet
        assert body["status"] == "success", body  # the query parses
        return body["data"]["result"] or None  # empty until the first scrape

    try:
        (value,) = wait_until(answer, 60, "answer to the scaler's query")
        assert float(value["value"][1]) == 3 + 2
    finally:
        proc.terminate()
        proc.wait(20)
        exporter.close()
