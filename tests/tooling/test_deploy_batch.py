"""The batch manifests (deploy/kubernetes/batch): a KubeRay RayJob, an Indexed Job and its merge.

Checked offline: the Jobs against the Kubernetes schemas (``kubernetes-validate``, strict), the
RayJob against the RayJob CRD's own schema (vendored from KubeRay with its source, strict: an
unknown field is refused, as the API server's strict field validation refuses it) and its pod
templates as Kubernetes pods; and what the manifests tell the command line is parsed by the real
``remigio-referee`` parser, the shard of every pod of the Indexed Job included.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import shlex
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from referee import cli

ROOT = Path(__file__).resolve().parents[2]
BATCH = ROOT / "deploy" / "kubernetes" / "batch"
SCHEMA = BATCH / "schema" / "rayjob-v1.json"
KUBERNETES_VERSIONS = ("1.31.0", kubernetes_validate.latest_version())


def _load(name: str) -> dict[str, Any]:
    (obj,) = [doc for doc in yaml.safe_load_all((BATCH / name).read_text(encoding="utf-8")) if doc]
    return dict(obj)


def _strict(schema: Any) -> Any:
    """The CRD's schema with unknown fields refused wherever it lists the fields."""
    if isinstance(schema, dict):
        schema = {key: _strict(value) for key, value in schema.items()}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    return schema


def _rayjob_errors(obj: dict[str, Any]) -> list[str]:
    vendored = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert (vendored["group"], vendored["version"], vendored["kind"]) == ("ray.io", "v1", "RayJob")
    validator = jsonschema.Draft7Validator(_strict(vendored["openAPIV3Schema"]))
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]


def _parsed(argv: list[str]) -> argparse.Namespace:
    parser = cli.build_parser("batch")
    try:
        return parser.parse_args(argv)
    except SystemExit:
        pytest.fail(f"remigio-referee refuses {shlex.join(argv)}")


# The RayJob ------------------------------------------------------------------------------------


def test_the_vendored_schema_names_its_source_and_licence() -> None:
    vendored = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert "ray.io_rayjobs.yaml" in vendored["source"] and re.search(r"\b[0-9a-f]{40}\b", vendored["source"])
    assert vendored["licence"].startswith("Apache-2.0")


def test_the_rayjob_validates_against_the_crds_schema() -> None:
    rayjob = _load("rayjob.yaml")
    assert (rayjob["apiVersion"], rayjob["kind"]) == ("ray.io/v1", "RayJob")
    assert _rayjob_errors(rayjob) == []


def test_the_schema_check_refuses_a_misspelt_or_mistyped_field() -> None:
    rayjob = _load("rayjob.yaml")
    misspelt = copy.deepcopy(rayjob)
    misspelt["spec"]["shutdownAfterJobFinish"] = misspelt["spec"].pop("shutdownAfterJobFinishes")
    assert any("shutdownAfterJobFinish" in error for error in _rayjob_errors(misspelt))
    mistyped = copy.deepcopy(rayjob)
    mistyped["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["replicas"] = "four"
    assert any("replicas" in error for error in _rayjob_errors(mistyped))


def _pod_templates(rayjob: dict[str, Any]) -> list[dict[str, Any]]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    return [cluster["headGroupSpec"]["template"], *(group["template"] for group in cluster["workerGroupSpecs"])]


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_rayjobs_pods_validate_as_kubernetes_pods(version: str) -> None:
    for number, template in enumerate(_pod_templates(_load("rayjob.yaml"))):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{number}"}, **template}
        kubernetes_validate.validate(pod, version, strict=True)


def test_the_rayjob_runs_a_ray_batch_the_command_line_takes_on_the_ray_image() -> None:
    rayjob = _load("rayjob.yaml")
    argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert argv[0] == "remigio-referee"
    args = _parsed(argv[1:])
    assert args.command == "batch" and args.ray == "auto" and args.resume
    assert args.input.startswith("s3://") and args.output.startswith("s3://") and args.format == "parquet"
    for template in _pod_templates(rayjob):
        (container,) = template["spec"]["containers"]
        assert container["image"].split("/")[-1].startswith("remigio-referee-ray:"), "the Ray worker variant"
        assert "command" not in container, "KubeRay starts `ray start` in place of the entrypoint"
        assert template["spec"]["securityContext"]["runAsUser"] == 10001, "the image's own user"
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert {"/tmp", "/dev/shm"} <= mounts, "Ray's session folder and the object store's shared memory"
        assert container["resources"]["requests"] == container["resources"]["limits"]
    # The cluster's Ray is the one the extra installs.
    pin = re.search(r'"ray\[data\]>=([\d.]+),<', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pin and rayjob["spec"]["rayClusterSpec"]["rayVersion"].startswith(pin.group(1) + ".")


def test_the_image_has_a_ray_variant() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    assert 'ARG EXTRAS=""' in text and "${EXTRAS:+[$EXTRAS]}" in text
    assert "EXTRAS=ray" in (BATCH / "rayjob.yaml").read_text(encoding="utf-8")


# The Indexed Job and its merge -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["indexed-job.yaml", "merge-job.yaml"])
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_jobs_validate_against_the_kubernetes_schemas(name: str, version: str) -> None:
    kubernetes_validate.validate(_load(name), version, strict=True)


def _pod_argv(job: dict[str, Any], index: int) -> list[str]:
    """The command line of pod ``index``, as the kubelet expands ``$(JOB_COMPLETION_INDEX)``."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    words = [*container["command"], *container["args"]]
    return [word.replace("$(JOB_COMPLETION_INDEX)", str(index)) for word in words]


def test_every_pod_of_the_indexed_job_judges_its_own_shard_into_its_own_file() -> None:
    job = _load("indexed-job.yaml")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    count = spec["completions"]
    outputs = set()
    for index in range(count):
        argv = _pod_argv(job, index)
        assert argv[0] == "remigio-referee"
        args = _parsed(argv[1:])
        assert args.command == "batch" and (args.shard.index, args.shard.count) == (index, count)
        assert args.resume and not args.ray and not args.target
        outputs.add(args.output)
    assert len(outputs) == count, "two pods would write one file"
    merge = _parsed(_pod_argv(_load("merge-job.yaml"), 0)[1:])
    assert merge.command == "batch-merge"
    assert merge.shards == [_parsed(_pod_argv(job, i)[1:]).output for i in range(count)], "shards 0 to N-1 in order"
    assert merge.input == _parsed(_pod_argv(job, 0)[1:]).input
    volumes = {m["mountPath"] for m in job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert "/tmp" in volumes, "a shard's selected lines are spooled to /tmp (the root file system is read-only)"
