"""The review's measure compiled to C with mypyc, used where it has been built for this source.

``referee.play.measure`` is pure Python whose time is spent in many small calls over tuples, sets
and integers (``docs/benchmarks.md``); mypyc compiles the same module, unchanged, to an extension
that reviews a deal in about four fifths of the time. Building needs mypy and a C compiler, so it
is a step of its own (``make compile``: ``main`` here), never part of an
install, and the package works the same without it.

A build goes into a directory named by the hash of the sources it was built from and the
interpreter's tag (``REMIGIO_COMPILED_DIR``, by default the user's cache). ``referee.play`` puts
that directory first on its import path only when it matches the sources beside it, so an edited
``measure.py`` is imported as Python until it is built again, and a build never outlives its
source. ``REMIGIO_COMPILED=0`` turns the compiled module off (the tests that hold it to the pure
one, and a benchmark of both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

# The modules compiled, in this package. The sources hashed are these and every module of the
# project they are type-checked against (mypyc compiles a module against its imports' types).
COMPILED = ("measure",)
DIR_ENV = "REMIGIO_COMPILED_DIR"
SWITCH_ENV = "REMIGIO_COMPILED"
_PACKAGE = Path(__file__).resolve().parent
_ROOT = _PACKAGE.parent  # the ``referee`` package


def compiled_dir() -> Path:
    """Where builds go: ``REMIGIO_COMPILED_DIR``, or ``remigio-referee/compiled`` in the user's cache."""
    named = os.environ.get(DIR_ENV)
    if named:
        return Path(named)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "remigio-referee" / "compiled"


def source_key() -> str:
    """The hash naming a build of these sources for this interpreter: the compiled modules and the
    project's modules they import (the game package), and the extension's suffix."""
    digest = hashlib.sha256(str(sysconfig.get_config_var("EXT_SUFFIX")).encode())
    sources = [_PACKAGE / f"{name}.py" for name in COMPILED]
    sources += sorted((_ROOT / "game").rglob("*.py"))
    for path in sources:
        digest.update(path.relative_to(_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def build_path() -> Path:
    """The directory of the build of these sources (it may not exist)."""
    return compiled_dir() / source_key()


def extend(path: list[str]) -> list[str]:
    """``referee.play``'s import path, with the build of these sources first when there is one."""
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return path
    try:
        here = build_path()
    except OSError:  # a source that cannot be read: import as Python
        return path
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if all((here / f"{name}{suffix}").is_file() for name in COMPILED):
        return [str(here), *path]
    return path


def active() -> dict[str, bool]:
    """Whether each compiled module was imported from its build (import them first)."""
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    return {
        name: str(getattr(sys.modules.get(f"{__package__}.{name}"), "__file__", "")).endswith(suffix)
        for name in COMPILED
    }


def build(destination: Path | None = None) -> Path:
    """Compile the modules of ``COMPILED`` with mypyc into the directory of these sources' build
    (under ``destination``, by default ``compiled_dir()``); return it. Raises RuntimeError with
    mypyc's output when the build fails."""
    target = (destination or compiled_dir()) / source_key()
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    with tempfile.TemporaryDirectory(prefix="remigio-compile-") as scratch:
        tree = Path(scratch) / "referee"
        # The project's sources alone (no build of an earlier one, no caches), as mypyc reads them.
        shutil.copytree(_ROOT, tree, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.pyc"))
        files = [f"referee/play/{name}.py" for name in COMPILED]
        done = subprocess.run(
            [sys.executable, "-m", "mypyc", *files],
            cwd=scratch,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"mypyc failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        built = [path for path in (tree / "play").iterdir() if path.name.endswith(suffix)]
        if not built:
            raise RuntimeError(f"mypyc built nothing:\n{done.stdout}{done.stderr}")
        # Whole or not at all: the files go to a directory beside the target, renamed into place.
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
        for path in built:
            shutil.copy2(path, staging / path.name)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def main() -> int:
    """``make compile``: build, unless these sources are built already; say where (or why not)."""
    if extend([]):
        print(f"compile: referee.play.{', '.join(COMPILED)} is built for these sources in {build_path()}")
        return 0
    try:
        where = build()
    except (RuntimeError, OSError) as error:
        print(f"compile: the measure stays Python: {error}", file=sys.stderr)
        return 1
    print(f"compile: referee.play.{', '.join(COMPILED)} built into {where}")
    return 0
