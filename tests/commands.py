"""Running the ``remigio-referee`` command line for the CLI tests: in this process (``cli``), with
its standard streams captured, or as a real process (``cli_process``) for the few tests that are
about the process itself (its exit status from the shell, its start-up)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

from referee.cli import main

ROOT = Path(__file__).resolve().parents[1]


class _Stdin(io.StringIO):
    """A text stdin with a byte view, as the real one has (``batch -`` reads ``sys.stdin.buffer``)."""

    @property
    def buffer(self) -> io.BytesIO:
        return io.BytesIO(self.getvalue().encode())


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``remigio-referee ARGS`` run in this process: its exit status and its output as text."""
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = _Stdin(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse's usage errors and --version
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        sys.stdin = saved
    return subprocess.CompletedProcess(["remigio-referee", *args], code, out.getvalue(), err.getvalue())


def cli_process(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``python -m referee.cli ARGS`` as a process from the repository root; its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
