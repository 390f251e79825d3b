"""The review's measure compiled with mypyc (``referee.play.compiled``): built for these sources,
imported in place of the Python module, and reviewing every deal exactly as the Python module does;
a build of other sources (an edited measure) is never imported."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from referee.play import compiled

ROOT = Path(__file__).resolve().parents[2]

# Reviews of deals under several rule sets (the joker limits, wrapping runs, a joker's points), one
# digest each: the compiled module must give every one of them to the last bit.
_REVIEWS = """
import hashlib, json, sys
from referee.game.rules import Engine, JokerLimit, RuleSet
from referee.play import compiled
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


def _run(code: str, *args: str, env: dict[str, str], path: Path = ROOT) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=path,
        env={**os.environ, "PYTHONPATH": str(path), **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A build of these sources: the one ``make compile`` made, else one made here."""
    if compiled.build_path().is_dir():
        return compiled.compiled_dir()
    if not shutil.which(os.environ.get("CC", "cc")) and not shutil.which("gcc"):
        pytest.fail("no C compiler: mypyc cannot build the measure (Debian's gcc)")
    destination = tmp_path_factory.mktemp("compiled")
    compiled.build(destination)
    return destination


def test_the_compiled_measure_is_imported_and_reviews_every_deal_as_the_python_one(built: Path) -> None:
    fast = _run(_REVIEWS, "24", env={compiled.DIR_ENV: str(built)})
    plain = _run(_REVIEWS, "24", env={compiled.DIR_ENV: str(built), compiled.SWITCH_ENV: "0"})
    assert fast["active"] == {"measure": True}
    assert plain["active"] == {"measure": False}
    assert fast["digests"] == plain["digests"]
    assert len(set(fast["digests"])) == 24  # type: ignore[arg-type]


def test_a_build_of_other_sources_is_never_imported(built: Path, tmp_path: Path) -> None:
    # The same package with its measure edited: the build of the original sources is beside it
    # in the same directory, and the edited source is imported as Python.
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "referee", copy / "referee", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    measure = copy / "referee" / "play" / "measure.py"
    measure.write_text(measure.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    code = "from referee.play import compiled, measure; import json; print(json.dumps({'active': compiled.active()}))"
    edited = _run(code, env={compiled.DIR_ENV: str(built)}, path=copy)
    assert edited["active"] == {"measure": False}
    original = _run(code, env={compiled.DIR_ENV: str(built)})
    assert original["active"] == {"measure": True}
