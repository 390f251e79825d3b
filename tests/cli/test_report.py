"""The dispute report (``referee.cli.report`` and ``batch --report``): the answers read back from their
JSON, a small batch's page (its counts the batch's own, every case not confirmed drawn with its
claims and reasons, nothing fetched from outside), and the bound on a batch of 100,000 cases."""

from __future__ import annotations

import json
import re
import shlex
import time
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from commands import cli

from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import handlers, jsonmsg, records
from referee.api.convert import close_from_proto, close_to_proto, linking_from_proto, linking_to_proto
from referee.api.records import replay_from_proto
from referee.cli.batch import Line, judge_line
from referee.cli.report import OUTCOMES, Report, write_report
from referee.game.cards import parse_cards
from referee.game.closing import best_close
from referee.game.linking import best_linking
from referee.game.rules import Engine, RuleSet
from referee.play.replay import replay
from referee.play.simulate import simulate

ROOT = Path(__file__).resolve().parents[2]
DISPUTES = ROOT / "examples" / "disputes.jsonl"
RULES = RuleSet(engine=Engine.SEARCH)


def batch_counts(stderr: str) -> dict[str, int]:
    """The batch's own counts, from the summary it writes on stderr."""
    return {name: int(count) for name, count in re.findall(r"^([A-Z_]+)\s+(\d+)$", stderr, re.MULTILINE)}


def _page_counts(page: str) -> dict[str, int]:
    return {name: int(count) for name, count in re.findall(r'data-outcome="([A-Z_]+)">(\d+)<', page)}


class _Tags(HTMLParser):
    """Every start tag with its attributes; fails on nothing (a browser would not either)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


FETCHING_TAGS = ("script", "link", "img", "image", "iframe", "object", "embed", "use")


def assert_self_contained(page: str, parse_html: bool = True) -> None:
    """Nothing in the page is fetched: no script, stylesheet, image, font or frame, no link out."""
    if parse_html:
        parser = _Tags()
        parser.feed(page)
        for tag, attrs in parser.tags:
            assert tag not in FETCHING_TAGS, tag
            assert not {"src", "href", "xlink:href"} & attrs.keys(), (tag, attrs)
    # The same, looked for in the text (a page of megabytes is slow to parse in Python).
    assert re.search(r"<(script|link|img|image|iframe|object|embed|use)\b", page) is None
    assert re.search(r"\s(src|href|xlink:href)\s*=", page) is None
    text = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    for needle in ("http:", "https:", "url(", "@import", "@font-face"):
        assert needle not in text, needle
    for drawing in re.findall(r"<svg.*?</svg>", page, re.DOTALL):
        ET.fromstring(drawing)


# The answers read back ----------------------------------------------------------------------------


def test_a_linking_and_a_close_read_back_from_their_json_are_the_domain_values() -> None:
    """The report reads a verdict line as its message (jsonmsg, the one JSON path) and the domain
    values from the message (convert): what was written is what is drawn."""
    linking = best_linking(parse_cards("AH 2H 3H 5C 5D 5S KS KD 9C JK".split()), RULES)
    text = jsonmsg.to_json(linking_to_proto(linking))
    assert linking_from_proto(jsonmsg.parse(text, pb.Linking())) == linking
    # The JSON mapping's lowerCamel names read the same as the proto names.
    camel = text.replace("stands_for", "standsFor")
    assert linking_from_proto(jsonmsg.parse(camel, pb.Linking())) == linking
    close = best_close(parse_cards("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split()), RULES)
    back = close_from_proto(jsonmsg.parse(jsonmsg.to_json(close_to_proto(close)), pb.Close()))
    assert (back.valid, back.kind, back.multiplier, back.discard, back.shown, back.reason) == (
        close.valid,
        close.kind,
        close.multiplier,
        close.discard,
        close.shown,
        close.reason,
    )
    assert back.linking.groups == close.linking.groups and back.linking.unlinked == close.linking.unlinked


def test_a_verdict_line_that_is_not_a_verdict_is_drawn_as_unreadable_and_the_rest_go_on() -> None:
    report = Report()
    for line in ('{"id": "a", "outcome": "DISPUTE_OUTCOME_WRONG", "hand": {"groups": 7}}', "[1, 2]", "{"):
        report.add(line)
    page = report.html()
    assert page.count('<section class="case" data-outcome="UNREADABLE">') == 3


# A small batch -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str, list[dict[str, object]]]:
    """The example disputes and a malformed line, judged with --report: (page, stderr, verdicts)."""
    folder = tmp_path_factory.mktemp("report")
    source = folder / "cases.jsonl"
    source.write_text(
        DISPUTES.read_text(encoding="utf-8") + '{"id": "<script>alert(1)</script>", "hand": {"cards": ["ZZ"]}}\n',
        encoding="utf-8",
    )
    out, page = folder / "verdicts.jsonl", folder / "report.html"
    run = cli("batch", str(source), "-o", str(out), "--report", str(page), "--jobs", "1", "--engine", "search")
    assert run.returncode == 3, run.stderr  # every case judged, one MALFORMED
    verdicts = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return page.read_text(encoding="utf-8"), run.stderr, verdicts


def test_the_report_counts_what_the_batch_counts(small: tuple[str, str, list[dict[str, object]]]) -> None:
    page, stderr, verdicts = small
    counts = _page_counts(page)
    assert counts == {name: batch_counts(stderr)[name] for name in OUTCOMES}
    assert sum(counts.values()) == len(verdicts) == 8
    assert f"Summary: {len(verdicts)} cases" in page
    # The chart holds one bar per outcome with the same count.
    bars = dict(re.findall(r'<g class="bar" data-outcome="([A-Z_]+)" data-count="(\d+)">', page))
    assert {name: int(count) for name, count in bars.items()} == counts


def test_every_case_not_confirmed_is_drawn_with_its_claims_and_reasons(
    small: tuple[str, str, list[dict[str, object]]],
) -> None:
    page, _, verdicts = small
    sections = re.findall(r'<section class="case" data-outcome="([A-Z_]+)"><h3>(.*?) <span', page)
    wanted = [
        (str(v["outcome"]).removeprefix("DISPUTE_OUTCOME_"), str(v["id"]))
        for v in verdicts
        if v["outcome"] != "DISPUTE_OUTCOME_CONFIRMED"
    ]
    assert [(outcome, case_id.replace("&lt;", "<").replace("&gt;", ">")) for outcome, case_id in sections] == wanted
    # The bad group is drawn as claimed beside the referee's linking, with the reason.
    bad = page[page.index("<h3>hand-bad-group") :].split("</section>")[0]
    assert "Claimed" in bad and "The referee" in bad and "neither one rank nor one suit" in bad
    assert 'data-card="4D"' in bad and "claimed group 0" in bad and "unlinked: 33 points" in bad
    # A claimed multiplier beside the close, the referee's REMIGIO ×10.
    close = page[page.index("<h3>close-multiplier") :].split("</section>")[0]
    assert "claimed: ×5" in close and "REMIGIO ×10" in close
    # The deal's claims against the referee's values, and the deal drawn.
    deal = page[page.index("<h3>deal-claims") :].split("</section>")[0]
    assert "claims.players[1].score_change" in deal and "-20" in deal and "-18" in deal and "Scored" not in deal
    assert deal.count('class="player"') == 3
    # A malformed case: its error, its id escaped.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "cards[0]" in page and "not a card code" in page


def test_the_report_is_self_contained(small: tuple[str, str, list[dict[str, object]]]) -> None:
    page, _, _ = small
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    assert_self_contained(page)


def test_a_report_that_cannot_be_written_is_bad_usage_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    run = cli("batch", str(DISPUTES), "-o", str(out), "--report", str(tmp_path / "no" / "report.html"))
    assert run.returncode == 2 and "cannot write" in run.stderr and not out.exists()


def test_the_readme_pictures_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Pictures") :]
    section = section[: section.index("\n## ", 5)]
    (block,) = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert any("--svg" in command for command in commands) and any("--report" in command for command in commands)
    (tmp_path / "examples").mkdir()
    for name in ("deal.json", "disputes.jsonl"):
        (tmp_path / "examples" / name).write_text((ROOT / "examples" / name).read_text(encoding="utf-8"))
    monkeypatch.chdir(tmp_path)
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "remigio-referee"
        extra = ["--jobs", "1"] if words[1] == "batch" else []
        run = cli(*words[1:], "--engine", "search", *extra)
        assert run.returncode == 0, (command, run.stderr)
        written = words[words.index("--svg" if "--svg" in words else "--report") + 1]
        assert (tmp_path / written).stat().st_size > 0, command


def test_a_replay_read_back_from_its_json_is_the_domains_replay() -> None:
    for turns, corrupt in ((None, False), (6, False), (None, True)):
        record = simulate(5, 3, RULES)
        request = records.request_of(record)
        if turns is not None:
            del request.record.turns[turns:]
        if corrupt:
            request.record.turns[3].drawn = "JK" if request.record.turns[3].drawn != "JK" else "AS"
        answer = handlers.replay_deal(request)
        played = replay(records.record_from_proto(request.record, RULES))
        read = replay_from_proto(jsonmsg.parse(jsonmsg.to_json(answer), pb.ReplayDealResponse()))
        assert read.violation == played.violation
        assert [(h.name, h.cards) for h in read.hands] == [(h.name, h.cards) for h in played.hands]
        assert (read.discard_pile, read.stock, read.discard) == (played.discard_pile, played.stock, played.discard)
        assert (read.to_play, read.closer, read.complete) == (played.to_play, played.closer, played.complete)
        assert (read.close is None) == (played.close is None or not played.legal)


def test_an_illegal_record_is_counted_and_drawn_with_its_violation() -> None:
    request = records.request_of(simulate(6, 3, RULES))
    request.record.turns[2].drawn = "JK" if request.record.turns[2].drawn != "JK" else "AS"
    case = jsonmsg.to_json(pb.CheckDisputesRequest(id="illegal", record=request))
    report = Report("records")
    report.add(judge_line(Line(1, case), "search"), case)
    page = report.html()
    assert _page_counts(page)["ILLEGAL"] == 1
    section = page[page.index('<section class="case" data-outcome="ILLEGAL">') :].split("</section>")[0]
    assert "DRAWN_MISMATCH" in section and 'class="seat fault"' in section


# The bound -----------------------------------------------------------------------------------------


def test_a_report_of_100000_cases_stays_small_and_is_written_in_seconds(tmp_path: Path) -> None:
    cases = [line for line in DISPUTES.read_text(encoding="utf-8").splitlines() if line.strip()]
    cases.append('{"id": "bad", "hand": {"cards": ["AH", "XX"]}}')
    judged = [(case, judge_line(Line(n, case), "search")) for n, case in enumerate(cases, 1)]
    report = Report("100,000 cases")
    start = time.perf_counter()
    for i in range(100_000):
        case, verdict = judged[i % len(judged)]
        report.add(verdict.replace('"id":"', f'"id":"{i}-', 1), case)
    page_path = tmp_path / "report.html"
    write_report(report, str(page_path))
    seconds = time.perf_counter() - start
    page = page_path.read_text(encoding="utf-8")
    assert len(page.encode()) < 5_000_000, len(page.encode())
    assert seconds < 12, seconds  # about 2 s on one free core; generous for a busy test machine
    counts = _page_counts(page)
    assert sum(counts.values()) == 100_000
    confirmed = [i for i, (_, verdict) in enumerate(judged) if '"DISPUTE_OUTCOME_CONFIRMED"' in verdict]
    assert counts["CONFIRMED"] == sum(1 for i in range(100_000) if i % len(judged) in confirmed)
    not_confirmed = 100_000 - counts["CONFIRMED"]
    drawn = page.count('<section class="case"')
    assert 0 < drawn <= 500 and page.count('<tr class="listed">') == 2000
    left_out = re.search(r"([\d,]+) left out \(only counted", page)
    assert left_out is not None
    assert f"{not_confirmed:,} cases not confirmed: {drawn} drawn below, 2,000 listed without a drawing" in page
    assert drawn + 2000 + int(left_out.group(1).replace(",", "")) == not_confirmed
    assert "Summary: 100,000 cases" in page
    assert_self_contained(page, parse_html=False)


def test_lines_that_are_no_verdict_are_counted_and_never_break_the_page() -> None:
    report = Report("odd lines")
    hand = '{"id":"h","outcome":"DISPUTE_OUTCOME_WRONG","claims":["x"],"hand":{"groups":[{"kind":"NOPE"}]}}'
    report.add(hand, '{"hand": {"cards": ["AH", 7], "claimed_groups": ["AH"]}}')
    report.add('{"id":"d","outcome":"DISPUTE_OUTCOME_NO_CLAIM","deal":{"players":[{"linking":{"unlinked":["ZZ"]}}]}}')
    report.add("not json at all")
    report.add("[" * 100_000, "[" * 100_000)
    report.add('{"id":"m","outcome":"DISPUTE_OUTCOME_MALFORMED","error":{"field":"cards[0]","value":"ZZ"}}', "{")
    page = report.html()
    counts = {"CONFIRMED": 0, "WRONG": 1, "INVALID": 0, "ILLEGAL": 0, "NO_CLAIM": 1, "MALFORMED": 1, "UNREADABLE": 2}
    assert _page_counts(page) == counts
    assert report.counts["UNREADABLE"] == 2 and "UNREADABLE" in page
    assert page.count('<section class="case"') == 5
    assert_self_contained(page)


def test_the_same_verdicts_give_the_same_page() -> None:
    cases = [line for line in DISPUTES.read_text(encoding="utf-8").splitlines() if line.strip()]
    judged = [(case, judge_line(Line(n, case), "search")) for n, case in enumerate(cases, 1)]
    pages = []
    for _ in range(2):
        report = Report("again")
        for case, verdict in judged:
            report.add(verdict, case)
        pages.append(report.html())
    assert pages[0] == pages[1]


def test_a_resumed_batch_says_which_cases_its_report_leaves_to_the_earlier_run(tmp_path: Path) -> None:
    out, page = tmp_path / "verdicts.jsonl", tmp_path / "report.html"
    assert cli("batch", str(DISPUTES), "-o", str(out), "--jobs", "1", "--engine", "search").returncode == 0
    again = cli("batch", str(DISPUTES), "-o", str(out), "--resume", "--report", str(page), "--jobs", "1")
    assert again.returncode == 0, again.stderr
    text = page.read_text(encoding="utf-8")
    assert "Summary: 0 cases" in text and "7 cases judged in an earlier run (resumed) are not here" in text


def test_a_legal_records_review_is_drawn_for_the_first_records_only() -> None:
    """A record case's review (DrawAnswer's picture of it) is drawn beside its replay, for the
    first ``reviewed_cases`` legal records: a review costs the batch time."""
    lines = []
    for seed in (3, 4, 5):
        request = records.request_of(simulate(seed, 3, RULES))
        lines.append(jsonmsg.to_json(pb.CheckDisputesRequest(id=f"r{seed}", record=request)))
    report = Report(reviewed_cases=2)
    for number, line in enumerate(lines, 1):
        report.add(judge_line(Line(number, line)), line)
    page = report.html()
    assert page.count('<figure class="review">') == 2 and page.count('data-drawing="review"') == 2
    assert report.counts["NO_CLAIM"] == 3  # drawn: a record with no claim is not confirmed
