"""The descriptor set the gateway's JSON transcoder reads, built from the proto with grpcio-tools'
protoc (no other toolchain).

It holds the contract with its imports (googleapis' HTTP annotations), ``google/rpc/status.proto``
and ``error_details.proto`` (without them a referee error's details, a ``BadRequest`` or a
``RetryInfo``, cannot be printed as JSON and are lost), and the standard health service, so that
``POST /grpc.health.v1.Health/Check`` answers in JSON too. Source information is kept: the OpenAPI
description takes its texts from the proto's comments.
"""

from __future__ import annotations

import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

# Imported where they are used: the gateway's image renders Envoy's configuration with the
# standard library alone (SERVICES, through gateway.envoy) and carries no protobuf runtime.
if TYPE_CHECKING:
    from google.protobuf import descriptor_pb2

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
CONTRACT = "remigio/referee/v1/referee.proto"
# Not imported by the contract, but named by its errors' grpc-status-details-bin.
ERROR_PROTOS = ("google/rpc/status.proto", "google/rpc/error_details.proto")
SERVICES = ("remigio.referee.v1.RefereeService", "grpc.health.v1.Health")


def _googleapis_include() -> str:
    """The folder holding google/rpc/*.proto, as googleapis-common-protos installs them."""
    from google.rpc import status_pb2

    return str(Path(status_pb2.__file__).resolve().parents[2])


def _well_known_include() -> str:
    return str(resources.files("grpc_tools") / "_proto")


def build() -> descriptor_pb2.FileDescriptorSet:
    """The descriptor set of the contract, its imports, the error details and the health service."""
    from google.protobuf import descriptor_pb2
    from grpc_health.v1 import health_pb2
    from grpc_tools import protoc  # the dev extra

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "set.binpb"
        code = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"-I{_googleapis_include()}",
                f"-I{_well_known_include()}",
                "--include_imports",
                "--include_source_info",
                f"--descriptor_set_out={out}",
                CONTRACT,
                *ERROR_PROTOS,
            ]
        )
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code}")
        files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    # grpcio-health-checking ships the health service compiled, not as a .proto file.
    health = descriptor_pb2.FileDescriptorProto()
    health_pb2.DESCRIPTOR.CopyToProto(health)
    files.file.append(health)
    return files


def without_comments(files: descriptor_pb2.FileDescriptorSet) -> descriptor_pb2.FileDescriptorSet:
    """``files`` without their source information: what Envoy needs, a quarter of the size."""
    for file in files.file:
        file.ClearField("source_code_info")
    return files


def write(path: Path, *, comments: bool = True) -> Path:
    """Build the descriptor set into ``path`` (its folder made); ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    files = build() if comments else without_comments(build())
    path.write_bytes(files.SerializeToString(deterministic=True))
    return path
