"""The dispute report opened in a real browser (Debian's chromium, driven by playwright): a batch of
hands, closes, deals, legal and illegal records and a malformed line, judged by ``batch --report``;
the page's summary counts, read from what the browser shows, are the batch's own, and every case
not confirmed is on the page with its drawings laid out. A screenshot goes to build/screenshots
(git-ignored)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from browsers import SCREENSHOTS, launch, sync_api
from commands import cli
from test_report import batch_counts

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg, records
from referee.game.rules import Engine, RuleSet
from referee.play.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]


def _cases() -> list[str]:
    """The example disputes, two records each legal and made illegal, and a malformed line."""
    lines = (ROOT / "examples" / "disputes.jsonl").read_text(encoding="utf-8").splitlines()
    for seed in (1, 2):
        request = records.request_of(simulate(seed, 3, RuleSet(engine=Engine.SEARCH)))
        request.rules.engine = pb.ENGINE_SEARCH
        legal: dict[str, Any] = {"id": f"record-{seed}", "record": jsonmsg.to_dict(request)}
        illegal = copy.deepcopy(legal)
        illegal["id"] = f"record-{seed}-illegal"
        illegal["record"]["record"]["turns"][1]["drawn"] = "JK" if seed == 1 else "AS"
        lines += [json.dumps(legal), json.dumps(illegal)]
    lines.append('{"id": "bad-card", "hand": {"cards": ["AH", "ZZ"]}}')
    return lines


def test_the_report_opens_in_a_browser_with_the_batchs_counts_and_every_case(tmp_path: Path) -> None:
    playwright = sync_api()
    source, out, report = tmp_path / "cases.jsonl", tmp_path / "verdicts.jsonl", tmp_path / "report.html"
    source.write_text("\n".join(_cases()) + "\n", encoding="utf-8")
    run = cli("batch", str(source), "-o", str(out), "--report", str(report), "--jobs", "1", "--engine", "search")
    assert run.returncode == 3, run.stderr  # every case judged, one MALFORMED
    verdicts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    own = batch_counts(run.stderr)
    assert own["ILLEGAL"] == 2 and sum(own.values()) == len(verdicts) == 12
    with playwright.sync_playwright() as driver:
        browser = launch(driver)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            page.goto(report.as_uri())
            shown: dict[str, int] = dict(
                page.eval_on_selector_all(
                    "table.counts td[data-outcome]", "els => els.map(e => [e.dataset.outcome, Number(e.innerText)])"
                )
            )
            assert shown == own
            bars: dict[str, int] = dict(
                page.eval_on_selector_all(
                    "svg.chart g.bar", "els => els.map(g => [g.dataset.outcome, Number(g.dataset.count)])"
                )
            )
            assert bars == own
            assert page.inner_text("#summary h2") == f"Summary: {len(verdicts)} cases"
            # Every case not confirmed, in the file's order, each drawing laid out at a real size.
            cases: list[list[Any]] = page.eval_on_selector_all(
                "section.case",
                """els => els.map(s => [s.dataset.outcome, s.querySelector('h3').firstChild.textContent.trim(),
                    [...s.querySelectorAll('svg')].map(d => d.getBoundingClientRect().width > 40
                                                         && d.getBoundingClientRect().height > 40)])""",
            )
            wanted = [
                (str(v["outcome"]).removeprefix("DISPUTE_OUTCOME_"), v["id"])
                for v in verdicts
                if v["outcome"] != "DISPUTE_OUTCOME_CONFIRMED"
            ]
            assert [(outcome, case_id) for outcome, case_id, _ in cases] == wanted
            for outcome, case_id, laid_out in cases:
                assert all(laid_out), case_id
                if outcome != "MALFORMED":
                    assert laid_out, case_id  # the referee's answer at least is drawn
            # An illegal record: its first violation drawn, the seat at fault marked.
            illegal = page.locator("section.case", has_text="record-1-illegal")
            assert "turn 2: DRAWN_MISMATCH" in illegal.inner_text()
            assert illegal.locator("rect.seat.fault").count() == 1
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            for folder in (tmp_path, SCREENSHOTS):
                page.screenshot(path=str(folder / "report.png"))
            assert (tmp_path / "report.png").stat().st_size > 5_000
        finally:
            browser.close()
    assert not errors
    assert requests == [report.as_uri()]  # the page fetched nothing else
