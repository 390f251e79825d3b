"""The hot modules compiled with mypyc (``referee.game.compiled``): built for these sources,
imported in place of the Python modules, and giving every answer the Python modules give (reviews
of deals, a batch of records' verdicts, byte for byte); a build of other sources (an edited
module) is never imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bench.batch import record_case
from referee.game import compiled

ROOT = Path(__file__).resolve().parents[2]

# Reviews of deals under several rule sets (the joker limits, wrapping runs, a joker's points), one
# digest each: the compiled modules must give every one of them to the last bit.
_REVIEWS = """
import hashlib, json, sys
from referee.game import compiled
from referee.game.rules import Engine, JokerLimit, RuleSet
from referee.play.review import review_deal
from referee.play.simulate import simulate
rule_sets = [
    RuleSet(engine=Engine.SEARCH),
    RuleSet(engine=Engine.SEARCH, joker_limit=JokerLimit.ONE_PER_GROUP),
    RuleSet(engine=Engine.SEARCH, joker_limit=JokerLimit.NO_MORE_THAN_NATURALS, wrap_runs=True),
    RuleSet(engine=Engine.SEARCH, wrap_runs=True, joker_points=50),
]
digests = []
for seed in range(int(sys.argv[1])):
    record = simulate(7100 + seed, 2 + seed % 3, rule_sets[seed % len(rule_sets)])
    digests.append(hashlib.sha256(repr(review_deal(record)).encode()).hexdigest())
print(json.dumps({"active": compiled.active(), "digests": digests}))
"""
_ACTIVE = "import json; import referee.api.record_lines, referee.play.review; from referee.game import compiled; print(json.dumps({'active': compiled.active()}))"


def _run(args: list[str], env: dict[str, str], path: Path = ROOT, status: int = 0) -> str:
    done = subprocess.run(
        [sys.executable, *args],
        cwd=path,
        env={**os.environ, "PYTHONPATH": str(path), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == status, done.stdout + done.stderr
    return done.stdout


def _json(args: list[str], env: dict[str, str], path: Path = ROOT) -> dict[str, object]:
    return dict(json.loads(_run(args, env, path).splitlines()[-1]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build of these sources: the one ``make compile`` made, else one made here."""
    if compiled.build_path().is_dir():
        return compiled.compiled_dir()
    if not shutil.which(os.environ.get("CC", "cc")) and not shutil.which("gcc"):
        pytest.fail("no C compiler: mypyc cannot build the modules (Debian's gcc)")
    destination = tmp_path_factory.mktemp("compiled")
    compiled.build(destination)
    return destination


def test_every_compiled_module_is_imported_from_the_build(built: Path) -> None:
    on = _json(["-c", _ACTIVE], {compiled.DIR_ENV: str(built)})["active"]
    off = _json(["-c", _ACTIVE], {compiled.DIR_ENV: str(built), compiled.SWITCH_ENV: "0"})["active"]
    names = {"referee." + path.removesuffix(".py").replace("/", ".") for path in compiled.COMPILED}
    assert on == dict.fromkeys(names, True)
    assert off == dict.fromkeys(names, False)


def test_the_compiled_modules_review_every_deal_as_the_python_ones(built: Path) -> None:
    fast = _json(["-c", _REVIEWS, "8"], {compiled.DIR_ENV: str(built)})
    plain = _json(["-c", _REVIEWS, "8"], {compiled.DIR_ENV: str(built), compiled.SWITCH_ENV: "0"})
    assert fast["active"]["referee.play.measure"] is True  # type: ignore[index]
    assert plain["active"]["referee.play.measure"] is False  # type: ignore[index]
    assert fast["digests"] == plain["digests"]
    assert len(set(fast["digests"])) == 8  # type: ignore[arg-type]


def test_the_compiled_record_lane_writes_the_same_verdicts_byte_for_byte(built: Path, tmp_path: Path) -> None:
    cases = tmp_path / "records.jsonl"
    lines = [record_case(n) for n in range(120)]
    # Lines the lane refuses, each a verdict naming the line and the field.
    lines[7] = lines[7].replace('"turns":[', '"turns":[{"draw":"STOCK","discard":"ZZ"},', 1)
    lines[11] = lines[11][: len(lines[11]) // 2]
    lines[13] = lines[13].replace('"players":', '"players_":', 1)
    cases.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outputs = []
    for switch in ("1", "0"):
        out = tmp_path / f"verdicts-{switch}.jsonl"
        env = {compiled.DIR_ENV: str(built), compiled.SWITCH_ENV: switch}
        # Status 3: some cases were malformed (the three lines above).
        command = ["-m", "referee.cli", "batch", str(cases), "-o", str(out), "--jobs", "1", "--engine", "search"]
        _run(command, env, status=3)
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    verdicts = [json.loads(line) for line in outputs[0].splitlines()]
    assert len(verdicts) == 120
    assert len({json.dumps(v, sort_keys=True) for v in verdicts}) > 100


def test_a_build_of_other_sources_is_never_imported(built: Path, tmp_path: Path) -> None:
    # The same package with one module edited: the build of the original sources is in the same
    # directory, and every module is imported as Python.
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "referee", copy / "referee", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    measure = copy / "referee" / "play" / "measure.py"
    measure.write_text(measure.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    edited = _json(["-c", _ACTIVE], {compiled.DIR_ENV: str(built)}, path=copy)["active"]
    assert set(edited.values()) == {False}  # type: ignore[attr-defined]
    original = _json(["-c", _ACTIVE], {compiled.DIR_ENV: str(built)})["active"]
    assert set(original.values()) == {True}  # type: ignore[attr-defined]
