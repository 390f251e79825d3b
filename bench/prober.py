"""A health prober in a process of its own: it asks the health service ``Check`` every 50 ms on
a connection of its own, so the load a benchmark puts on its own process (the fuzzer's Python,
its event loop) does not delay the prober's clock.

Run by ``bench.soak``; it imports nothing but gRPC, so it starts in a fraction of a second::

    python -m bench.prober

It reads the server's address from its first line of input, answers ``ready`` once its
connection is up, probes until its input ends or says ``stop``, then prints one JSON line: the
latencies (ms) and the failures (status names).
"""

from __future__ import annotations

import json
import select
import sys
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

PROBE_EVERY = 0.05


def probe(target: str, every: float = PROBE_EVERY) -> tuple[list[float], list[str]]:
    """Probe ``target`` until standard input has a line or ends; the latencies and failures."""
    latencies: list[float] = []
    failures: list[str] = []
    serving = health_pb2.HealthCheckResponse.SERVING
    with grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        health.Check(health_pb2.HealthCheckRequest(), timeout=60)  # connected before the clock
        print("ready", flush=True)
        while not select.select([sys.stdin], [], [], every)[0]:
            started = time.perf_counter()
            try:
                reply = health.Check(health_pb2.HealthCheckRequest(), timeout=5)
                latencies.append((time.perf_counter() - started) * 1000)
                if reply.status != serving:
                    failures.append(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))
            except grpc.RpcError as error:
                failures.append(error.code().name)
    return latencies, failures


def main() -> int:
    """Read the target, probe, print the figures as JSON."""
    target = sys.stdin.readline().strip()
    latencies, failures = probe(target)
    print(json.dumps({"latencies_ms": latencies, "failures": failures}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
