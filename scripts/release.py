#!/usr/bin/env python3
"""Build the release of the version in ``referee/__init__.py`` and check it (``make release``).

    python scripts/release.py [--dist DIR] [--no-isolation] [--no-image]

1. The sdist and the wheel, with ``python -m build`` (the wheel is built from the sdist, so an
   sdist that lacks a file fails here), into ``dist/``, emptied first.
2. Their checks: the file names carry the version, ``twine check --strict`` passes, and both hold
   the licence (``License-Expression: Apache-2.0``, ``LICENSE`` and ``NOTICE``).
3. A clean install: the wheel and its dependencies in a fresh virtual environment, run from
   outside the source tree: ``remigio-referee --version`` prints the version, ``solve`` gives a
   known hand's answer, and a ``serve`` process answers a ``SolveHand`` call made with the
   installed ``referee.client``.
4. The image, with docker or podman (whichever answers), tagged ``remigio-referee:VERSION``, with
   the version and the commit in its OCI labels, checked by ``inspect``. Without an engine that
   answers, the step is skipped with a message (``--no-image`` skips it too).

Prints one line per step; exits 1 at the first failure, with the failing command's output.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from referee import __version__  # noqa: E402  (the source tree's version, not an installed one)

IMAGE = "remigio-referee"
LICENCE = "Apache-2.0"
# A hand whose answer is known (docs/rules.md, example 2): the smoke test's question.
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C JK".split()
LISTENING = re.compile(r"listening on (\S+):(\d+)")


class ReleaseError(Exception):
    """A step failed; the message says which and why."""


def say(text: str) -> None:
    """One line of progress."""
    print(f"release: {text}", flush=True)


def run(command: Sequence[str | os.PathLike[str]], *, timeout: float = 600, **kwargs: object) -> str:
    """Run a command to its end; its stdout, or ReleaseError with its output when it fails."""
    done = subprocess.run(
        [str(word) for word in command],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    if done.returncode != 0:
        words = " ".join(str(word) for word in command)
        raise ReleaseError(f"`{words}` failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return str(done.stdout)


def clean_env() -> dict[str, str]:
    """This environment without the server's variables and without a Python path into the sources."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("REMIGIO_")}
    for name in ("PYTHONPATH", "PROMETHEUS_MULTIPROC_DIR", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


# 1 and 2: the sdist and the wheel ---------------------------------------------------------------


def build(dist: Path, isolation: bool) -> tuple[Path, Path]:
    """The sdist and the wheel of this version, built into an emptied ``dist``."""
    if dist.exists():
        shutil.rmtree(dist)
    dist.mkdir(parents=True)
    started = time.monotonic()
    run([sys.executable, "-m", "build", "--outdir", dist, *([] if isolation else ["--no-isolation"]), ROOT], cwd=ROOT)
    sdist = dist / f"remigio_referee-{__version__}.tar.gz"
    wheel = dist / f"remigio_referee-{__version__}-py3-none-any.whl"
    built = sorted(path.name for path in dist.iterdir())
    if built != sorted([sdist.name, wheel.name]):
        raise ReleaseError(f"expected {sdist.name} and {wheel.name} in {dist}, found {built}")
    say(f"built {sdist.name} and {wheel.name} in {time.monotonic() - started:.0f} s")
    return sdist, wheel


def check(sdist: Path, wheel: Path) -> None:
    """twine check, and the licence in both."""
    run([sys.executable, "-m", "twine", "check", "--strict", sdist, wheel])
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = f"remigio_referee-{__version__}.dist-info"
        wheel_metadata = archive.read(f"{info}/METADATA").decode()
        missing = [name for name in ("LICENSE", "NOTICE") if f"{info}/licenses/{name}" not in names]
    with tarfile.open(sdist) as archive:
        top = f"remigio_referee-{__version__}"
        members = set(archive.getnames())
        pkg_info = archive.extractfile(f"{top}/PKG-INFO")
        sdist_metadata = pkg_info.read().decode() if pkg_info else ""
        missing += [f"sdist {name}" for name in ("LICENSE", "NOTICE") if f"{top}/{name}" not in members]
    for where, metadata in (("wheel", wheel_metadata), ("sdist", sdist_metadata)):
        if f"License-Expression: {LICENCE}" not in metadata.splitlines():
            raise ReleaseError(f"the {where}'s metadata has no License-Expression: {LICENCE}")
    if missing:
        raise ReleaseError(f"licence files missing: {', '.join(missing)}")
    say(f"twine check passed; both carry the licence ({LICENCE}, LICENSE, NOTICE)")


# 3: a clean install -----------------------------------------------------------------------------


def smoke_test(wheel: Path) -> None:
    """Install the wheel in a fresh virtual environment and use it from outside the sources."""
    with tempfile.TemporaryDirectory(prefix="remigio-release-") as scratch:
        home = Path(scratch)
        venv = home / "venv"
        started = time.monotonic()
        # This pip installs into the new environment (--python), which so holds the wheel and its
        # dependencies alone; no bytecode is compiled for a smoke test.
        run([sys.executable, "-m", "venv", "--without-pip", venv])
        python, command = venv / "bin" / "python", venv / "bin" / "remigio-referee"
        install = ["install", "--quiet", "--disable-pip-version-check", "--no-compile", wheel]
        run([sys.executable, "-m", "pip", "--python", python, *install], cwd=home)
        say(f"installed the wheel and its dependencies in a fresh venv in {time.monotonic() - started:.0f} s")
        env = clean_env()
        where = run([python, "-c", "import referee; print(referee.__file__)"], cwd=home, env=env).strip()
        if not Path(where).is_relative_to(venv):
            raise ReleaseError(f"the installed package was not the one imported: {where}")
        version = run([command, "--version"], cwd=home, env=env).strip()
        if version != f"remigio-referee {__version__}":
            raise ReleaseError(f"--version printed {version!r}, not 'remigio-referee {__version__}'")
        solved = run([command, "solve", *HAND], cwd=home, env=env)
        if "points: 9" not in solved:
            raise ReleaseError(f"solve {' '.join(HAND)} did not find 9 points:\n{solved}")
        served = serve_and_call(command, python, home, env)
        say(f"smoke test passed: {version}; solve answered 9 points; a served SolveHand answered {served}")


def serve_and_call(command: Path, python: Path, home: Path, env: dict[str, str]) -> int:
    """Start ``serve`` on a free loopback port, call SolveHand with the installed client, stop it."""
    server = subprocess.Popen(
        [command, "serve", "--host", "127.0.0.1", "--port", "0"],
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        address = None
        seen = []
        deadline = time.monotonic() + 60
        while address is None and time.monotonic() < deadline:
            line = server.stderr.readline()
            if not line:
                break
            seen.append(line)
            if found := LISTENING.search(line):
                address = f"{found.group(1)}:{found.group(2)}"
        if address is None:
            raise ReleaseError("the installed server did not start:\n" + "".join(seen))
        call = (
            "import sys\nfrom referee.client import Referee\n"
            "with Referee(sys.argv[1], timeout=30) as referee:\n"
            "    print(referee.solve_hand(sys.argv[2:]).linking.points)\n"
        )
        points = int(run([python, "-c", call, address, *HAND], cwd=home, env=env).strip())
        if points != 9:
            raise ReleaseError(f"the served SolveHand answered {points} points, not 9")
        return points
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


# 4: the image -----------------------------------------------------------------------------------


def container_engine() -> str | None:
    """podman or docker, whichever is installed and answers."""
    for name in ("podman", "docker"):
        found = shutil.which(name)
        if found and subprocess.run([found, "info"], capture_output=True, timeout=60, check=False).returncode == 0:
            return found
    return None


def revision() -> str:
    """The commit the release is built from ("unknown" outside a git work tree)."""
    try:
        return run(["git", "rev-parse", "HEAD"], cwd=ROOT, timeout=30).strip()
    except (ReleaseError, OSError):
        return "unknown"


def build_image() -> None:
    """The image of this version, its version and commit in the OCI labels."""
    engine = container_engine()
    if engine is None:
        say("image skipped: no container engine answers (neither podman nor docker); `make docker` builds it later")
        return
    tag = f"{IMAGE}:{__version__}"
    started = time.monotonic()
    fmt = ["--format=docker"] if Path(engine).name == "podman" else []  # the OCI format drops HEALTHCHECK
    run(
        [engine, "build", *fmt, "--build-arg", f"VERSION={__version__}", "--build-arg", f"REVISION={revision()}"]
        + ["--tag", tag, ROOT],
        timeout=3600,
    )
    label = '{{ index .Config.Labels "org.opencontainers.image.version" }}'
    shown = run([engine, "image", "inspect", "--format", label, tag]).strip()
    if shown != __version__:
        raise ReleaseError(f"{tag} is labelled version {shown!r}, not {__version__}")
    say(f"built the image {tag} in {time.monotonic() - started:.0f} s (org.opencontainers.image.version {shown})")


def main(argv: Sequence[str] | None = None) -> int:
    """Build and check the release; 0 when every step passed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the sdist and wheel go (emptied)")
    parser.add_argument(
        "--no-isolation", action="store_true", help="build with this environment's setuptools (offline)"
    )
    parser.add_argument("--no-image", action="store_true", help="skip the container image")
    args = parser.parse_args(argv)
    say(f"remigio-referee {__version__}")
    try:
        sdist, wheel = build(args.dist.resolve(), isolation=not args.no_isolation)
        check(sdist, wheel)
        smoke_test(wheel)
        if args.no_image:
            say("image skipped (--no-image)")
        else:
            build_image()
    except (ReleaseError, subprocess.TimeoutExpired) as error:
        say(f"FAILED: {error}")
        return 1
    say(f"{__version__} ready: {sdist.relative_to(ROOT) if sdist.is_relative_to(ROOT) else sdist}, {wheel.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
