"""Releases: ``make release`` (``scripts/release.py``) builds the sdist and the wheel, checks them
and smoke-tests a clean install of the wheel; ``--version``, the changelog and the image's labels
carry the package's version."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from referee import __version__

pytestmark = pytest.mark.tooling

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(240)
def test_the_release_is_built_checked_and_installs_clean(tmp_path: Path) -> None:
    # --no-isolation builds with this environment's setuptools (no download); the image is the
    # image test's business (tests/tooling/test_deploy.py).
    dist = tmp_path / "dist"
    command = [sys.executable, "scripts/release.py", "--dist", str(dist), "--no-isolation", "--no-image"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=230, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in dist.iterdir()) == [
        f"remigio_referee-{__version__}-py3-none-any.whl",
        f"remigio_referee-{__version__}.tar.gz",
    ]
    assert "release: twine check passed; both carry the licence (Apache-2.0, LICENSE, NOTICE)" in done.stdout
    assert (
        f"release: smoke test passed: remigio-referee {__version__}; solve answered 9 points; "
        "a served SolveHand answered 9" in done.stdout
    ), done.stdout


def test_version_prints_the_package_version() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "referee.cli", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"remigio-referee {__version__}\n"
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), "a release version is MAJOR.MINOR.PATCH"


def test_the_changelog_has_an_unreleased_section_and_this_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.MULTILINE)
    assert headings[0] == ("Unreleased", ""), headings
    assert (__version__, headings[1][1]) == headings[1] and headings[1][1], "no dated entry for this version"


@pytest.mark.parametrize(
    ("dockerfile", "title"), [("Dockerfile", "remigio-referee"), ("gateway/Dockerfile", "remigio-gateway")]
)
def test_the_image_is_labelled_with_the_version_and_commit_it_is_built_from(dockerfile: str, title: str) -> None:
    text = (ROOT / dockerfile).read_text(encoding="utf-8").replace("\\\n", " ")
    runtime = text[text.rindex("\nFROM ") :]
    assert re.search(r"^ARG VERSION\b", runtime, re.MULTILINE) and re.search(r"^ARG REVISION\b", runtime, re.MULTILINE)
    labels = dict(re.findall(r'(org\.opencontainers\.image\.[a-z.]+)="([^"]*)"', runtime))
    assert labels["org.opencontainers.image.version"] == "${VERSION}"
    assert labels["org.opencontainers.image.revision"] == "${REVISION}"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.title"] == title
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    shown = subprocess.run(["make", "-s", "-n", "docker"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    # `make docker` builds both images, the gateway's with its -f.
    (built,) = [
        line
        for line in shown.stdout.splitlines()
        if line.startswith("docker build") and ("-f gateway/Dockerfile" in line) == (dockerfile == "gateway/Dockerfile")
    ]
    assert f"--build-arg VERSION={__version__} " in built, shown.stdout + shown.stderr
    assert re.search(r"--build-arg REVISION=([0-9a-f]{40}|unknown) ", built), shown.stdout
