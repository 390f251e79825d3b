"""Running the ``remigio-referee`` command line as a real process, for the CLI tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """Run ``python -m referee.cli ARGS`` from the repository root; its output as text."""
    return subprocess.run(
        [sys.executable, "-m", "referee.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
