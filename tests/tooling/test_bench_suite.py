"""``bench.suite``: a command's wall time, its CPU in all, and its CPU by the kind of process."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from bench.suite import kind_of

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc")

SUITE_OF_PYTHON_C = [sys.executable, "-m", "bench.suite", "--interval", "0.05", "--", sys.executable, "-c"]

# The command: it starts the command line, then a child that spends 0.6 s of CPU.
PROBE = """
import subprocess, sys
subprocess.run([sys.executable, "-m", "referee.cli", "--version"], check=True, capture_output=True)
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.6: pass\\n"
subprocess.run([sys.executable, "-c", burn], check=True)
"""


@pytest.mark.parametrize(
    ("command_line", "kind"),
    [
        ("/v/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))", "pytest (tests, in-process servers)"),
        (".venv/bin/python -m pytest -q -n 3", "pytest (tests, in-process servers)"),
        ("/v/bin/python -m referee.server --host 127.0.0.1 --port 0", "server processes"),
        ("/v/bin/python /v/bin/remigio-referee serve --port 0", "server processes"),
        (
            "/v/bin/python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)",
            "dispute job processes",
        ),
        ("/v/bin/python -m referee.cli batch cases.jsonl", "command line"),
        ("/v/bin/python /v/bin/remigio-referee keygen", "command line"),
        ("/v/lib/envoy/bin/envoy -c /tmp/e.yaml", "gateway (Envoy)"),
        ("/usr/lib/chromium/chromium --headless", "browser (Chromium)"),
        ("/usr/bin/node examples/node/client.js", "Node.js"),
        ("/v/bin/python tests/netclient.py 10.0.0.1", "other Python (netclient.py)"),
        ("/v/bin/python -m gateway serve --port 0", "other Python (-m gateway)"),
        ("/v/bin/python -c print(1)", "other Python (-c)"),
        ("/usr/bin/git status", "other (git)"),
    ],
)
def test_a_process_is_of_the_kind_its_command_line_says(command_line: str, kind: str) -> None:
    assert kind_of(command_line) == kind


def test_the_cpu_of_the_processes_below_the_command_is_counted_by_kind() -> None:
    done = subprocess.run([*SUITE_OF_PYTHON_C, PROBE], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {
        found.group(1).strip(): (int(found.group(2)), float(found.group(3)))
        for found in re.finditer(r"^(\S.*?)\s+(\d+)\s+(\d+\.\d)\s+\d+%$", done.stdout, re.MULTILINE)
    }
    assert rows["command line"][0] == 1, done.stdout
    count, burnt = rows["other Python (-c)"]  # the command itself and the child that burns
    assert count == 2 and 0.5 <= burnt <= 1.5, done.stdout
    waited = float(re.search(r"CPU of the processes waited for (\d+\.\d) s", done.stdout).group(1))  # type: ignore[union-attr]
    assert waited >= burnt + rows["command line"][1] - 0.1, done.stdout
    assert "no schedule takes less than" in done.stdout


def test_a_command_that_fails_makes_it_fail() -> None:
    done = subprocess.run(
        [*SUITE_OF_PYTHON_C, "raise SystemExit(3)"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 1
    assert "not as designed: the command exited 3" in done.stdout
