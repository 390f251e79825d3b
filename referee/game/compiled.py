"""The hot modules compiled to C with mypyc, used where they have been built for these sources.

The review's measure, the search engine, and the record lane (reading a record, its replay, the
scoring) are pure Python whose time is spent in many small calls over tuples, sets and integers
(``docs/benchmarks.md``); mypyc compiles the same modules, unchanged, to extensions that do the
same work in about two thirds to four fifths of the time. Building needs mypy and a C compiler, so
it is a step of its own (``make compile``: ``main`` here), never part of an install, and the
package works the same without it.

A build goes into a directory named by the hash of the package's sources and the interpreter's
extension suffix (``REMIGIO_COMPILED_DIR``, by default the user's cache). Each package holding a
compiled module puts its part of that directory first on its import path (``extend``) only when
the build is there whole, so an edited source is imported as Python until it is built again, and
a build never outlives its source. ``REMIGIO_COMPILED=0`` turns the compiled modules off (the tests
that hold them to the pure ones, and a benchmark of both).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from functools import lru_cache
from pathlib import Path

# The modules compiled, by path in the ``referee`` package; mypyc builds them as one group (a
# shared library beside them, named by mypyc). Not the record's module: a compiled class checks
# its fields' types as it is made, and a record built by a caller of the library with a name that
# is not a string must reach ``check_record``, which names the field, not fail on its own.
COMPILED = (
    "game/linking/dispatch.py",
    "game/linking/search.py",
    "game/closing.py",
    "game/claims.py",
    "game/scoring.py",
    "play/measure.py",
    "play/replay.py",
    "api/record_lines.py",
    "api/records.py",
)
DIR_ENV = "REMIGIO_COMPILED_DIR"
SWITCH_ENV = "REMIGIO_COMPILED"
_ROOT = Path(__file__).resolve().parents[1]  # the ``referee`` package
_SUFFIX = str(sysconfig.get_config_var("EXT_SUFFIX"))


def compiled_dir() -> Path:
    """Where builds go: ``REMIGIO_COMPILED_DIR``, or ``remigio-referee/compiled`` in the user's cache."""
    named = os.environ.get(DIR_ENV)
    if named:
        return Path(named)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "remigio-referee" / "compiled"


@lru_cache(maxsize=1)
def source_key() -> str:
    """The hash naming a build of these sources for this interpreter: every module of the package
    (a compiled module is type-checked against what it imports) and the extension suffix."""
    digest = hashlib.sha256(_SUFFIX.encode())
    for path in sorted(_ROOT.rglob("*.py")):
        digest.update(path.relative_to(_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:24]


def build_path() -> Path:
    """The directory of the build of these sources (it may not exist)."""
    return compiled_dir() / source_key()


def _module_file(path: str) -> str:
    return path.removesuffix(".py") + _SUFFIX


@lru_cache(maxsize=1)
def _active_build() -> Path | None:
    """The build of these sources when it is there whole and not turned off; its group library
    (a top-level module the compiled modules import) made importable."""
    if os.environ.get(SWITCH_ENV, "1") == "0":
        return None
    try:
        here = build_path()
    except OSError:  # a source that cannot be read: import as Python
        return None
    if not all((here / _module_file(path)).is_file() for path in COMPILED):
        return None
    if str(here) not in sys.path:
        sys.path.append(str(here))
    return here


def extend(path: list[str], package: str) -> list[str]:
    """The import path of ``package`` (a package of ``referee`` holding a compiled module), with
    its part of the build of these sources first when there is one."""
    here = _active_build()
    if here is None:
        return path
    return [str(here.joinpath(*package.split(".")[1:])), *path]


def active() -> dict[str, bool]:
    """Whether each compiled module that has been imported was imported from its build."""
    out = {}
    for path in COMPILED:
        name = "referee." + path.removesuffix(".py").replace("/", ".")
        module = sys.modules.get(name)
        if module is not None:
            out[name] = str(getattr(module, "__file__", "")).endswith(_SUFFIX)
    return out


def build(destination: Path | None = None) -> Path:
    """Compile the modules of ``COMPILED`` with mypyc into the directory of these sources' build
    (under ``destination``, by default ``compiled_dir()``); return it. Raises RuntimeError with
    mypyc's output when the build fails."""
    target = (destination or compiled_dir()) / source_key()
    with tempfile.TemporaryDirectory(prefix="remigio-compile-") as scratch:
        tree = Path(scratch) / "referee"
        # The project's sources alone (no build of an earlier one, no caches), as mypyc reads them.
        shutil.copytree(_ROOT, tree, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.pyc"))
        done = subprocess.run(
            # Outside the project's checkout there is no mypy configuration: its one setting that
            # matters here, as in the project's (pyproject.toml), is that untyped libraries
            # (protobuf's generated modules) are read as Any.
            [sys.executable, "-m", "mypyc", "--ignore-missing-imports", *(f"referee/{path}" for path in COMPILED)],
            cwd=scratch,
            # gcc at -O1: half the build time of mypyc's default -O3 (31 s against 60 to 70 on
            # the development machine), and the same speed of records and reviews within the
            # machine's noise (docs/benchmarks.md): the C mypyc writes is calls into its runtime.
            env={**os.environ, "MYPYC_OPT_LEVEL": os.environ.get("MYPYC_OPT_LEVEL", "1")},
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise RuntimeError(f"mypyc failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        group = [path for path in Path(scratch).iterdir() if path.name.endswith(_SUFFIX)]
        modules = [tree / _module_file(path) for path in COMPILED]
        if not all(path.is_file() for path in modules):
            raise RuntimeError(f"mypyc built only part of the modules:\n{done.stdout}{done.stderr}")
        # Whole or not at all: the files go to a directory beside the target, renamed into place.
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
        for path in group:
            shutil.copy2(path, staging / path.name)
        for path, name in zip(modules, COMPILED):
            placed = staging / _module_file(name)
            placed.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, placed)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    return target


def main() -> int:
    """``make compile``: build, unless these sources are built already; say where (or why not)."""
    if _active_build() is not None:
        print(f"compile: the hot modules are built for these sources in {build_path()}")
        return 0
    try:
        where = build()
    except (RuntimeError, OSError) as error:
        print(f"compile: the modules stay Python: {error}", file=sys.stderr)
        return 1
    print(f"compile: {len(COMPILED)} modules built into {where}")
    return 0
