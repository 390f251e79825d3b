#!/usr/bin/env python3
"""Exit 0 if a gRPC server answers SERVING on the standard health service, 1 otherwise.

    python health_probe.py [ADDRESS] [--service NAME] [--timeout SECONDS]

ADDRESS defaults to the server's own configuration: 127.0.0.1 on REMIGIO_HEALTH_PORT (the
plain-text health listener, set when the main port speaks TLS), else on REMIGIO_PORT, else 50051.
NAME defaults to "" (the whole server). The container image runs this as its HEALTHCHECK, so
the check follows whatever port the container is told to serve on.
"""

from __future__ import annotations

import argparse
import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def probe(address: str, service: str = "", timeout: float = 3.0) -> int:
    """Ask the health service at `address` about `service`; 0 if SERVING, else 1."""
    try:
        with grpc.insecure_channel(address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.RpcError as error:
        print(f"unhealthy: {address}: {error.code().name}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        print(f"unhealthy: {address}: {status}", file=sys.stderr)
        return 1
    print(f"healthy: {address}: {status}")
    return 0


def configured_address(env: dict[str, str] | None = None) -> str:
    """The loopback address of the health service the server's REMIGIO_* variables configure."""
    env = dict(os.environ) if env is None else env
    host = env.get("REMIGIO_HOST", "")
    # A wildcard bind is reached through loopback; a specific address only through itself.
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = "127.0.0.1"
    elif ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = env.get("REMIGIO_HEALTH_PORT") or env.get("REMIGIO_PORT") or "50051"
    return f"{host}:{port}"


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and probe once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address", nargs="?", default=None, help="host:port (default: from REMIGIO_* as above)")
    parser.add_argument("--service", default="", help='service name; "" for the whole server')
    parser.add_argument("--timeout", type=float, default=3.0, help="deadline in seconds")
    args = parser.parse_args(argv)
    return probe(args.address or configured_address(), args.service, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
