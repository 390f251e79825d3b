"""The referee desk (GET /desk) in a real browser against a real gateway and referee: Debian's
chromium, driven by playwright, solves a hand, checks a false close, scores a deal, steps through a
record to its first violation and judges a 1,000-case upload, the API key typed in the page and
checked by a referee started with a key file. What the page draws is compared with what the
referee's own code answers in this process. Screenshots go to build/screenshots (git-ignored)."""

from __future__ import annotations

import copy
import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browsers import SCREENSHOTS, launch, sync_api
from gateways import Gateway

from gateway import desk as desk_page
from referee import render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import handlers, jsonmsg, records
from referee.cli.batch import Line, judge_line
from referee.game.cards import Card, parse_cards
from referee.game.closing import best_close
from referee.game.linking import best_linking
from referee.game.rules import Engine, RuleSet
from referee.play.record import format_notation
from referee.play.review import review_deal
from referee.play.simulate import simulate
from referee.render import card_symbols
from referee.server.access.keys import digest_of

ROOT = Path(__file__).resolve().parents[2]
KEY = "desk-test-key-0123456789abcdef"
SLOW_KEY = "desk-slow-key-0123456789abcdef"  # 20 calls a second: an upload outruns it
FAST = RuleSet(engine=Engine.SEARCH)
SEARCH = {"engine": "ENGINE_SEARCH"}
HAND = "AH 2H 3H 5C 5D 5S KS KD 9C JK"
NO_CLOSE = "AH 3H 5C 7D 9S JH KC 2D 4S 6C 8H"


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """A gateway in front of a referee that checks keys (one without a rate limit, one with)."""
    folder = tmp_path_factory.mktemp("desk")
    keys = folder / "keys.txt"
    keys.write_text(f"desk {digest_of(KEY).hex()}\nslow {digest_of(SLOW_KEY).hex()} 20\n", encoding="utf-8")
    gateway = Gateway(folder / "gateway", "--api-keys", str(keys), "--solve-cap", "30")
    yield gateway
    gateway.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One chromium for the module."""
    playwright = sync_api()
    with playwright.sync_playwright() as driver:
        started = launch(driver)
        yield started
        started.close()


@pytest.fixture
def page(browser: Any, desk: Gateway) -> Iterator[Any]:
    """The desk loaded in a fresh context, the key typed; no script error by the end."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
    opened = context.new_page()
    opened.set_default_timeout(30_000)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.goto(desk.url + "/desk")
    opened.wait_for_selector("body[data-ready=yes]", timeout=15_000)
    opened.fill("#key", KEY)
    yield opened
    context.close()
    assert not errors


def shoot(page: Any, name: str, tmp_path: Path) -> None:
    """A screenshot into the test's folder and build/screenshots."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for folder in (tmp_path, SCREENSHOTS):
        page.screenshot(path=str(folder / f"desk-{name}.png"), full_page=True)
    assert (tmp_path / f"desk-{name}.png").stat().st_size > 5_000


def boxes(page: Any, selector: str) -> list[tuple[str, list[str]]]:
    """Each box of the drawing at ``selector``: its label and its cards' codes, in order."""
    found: list[tuple[str, list[str]]] = page.eval_on_selector_all(
        f"{selector} g.box",
        "els => els.map(b => [b.dataset.label, [...b.querySelectorAll('g.card')].map(c => c.dataset.card)])",
    )
    return [(label, list(cards)) for label, cards in found]


def text_of(page: Any, selector: str) -> str:
    """The texts of a drawing (or of every drawing in an element), one space between them and
    spaces made single: a drawing wraps a long text over several ``<text>`` lines."""
    texts: list[str] = page.eval_on_selector_all(
        f"{selector} text, {selector} svg text", "els => els.map(t => t.textContent)"
    )
    return " ".join(" ".join(texts).split())


# The page itself ---------------------------------------------------------------------------------


def test_the_desk_is_one_page_with_every_card_and_nothing_from_elsewhere(desk: Gateway) -> None:
    reply = httpx.get(desk.url + "/desk", timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"] == "text/html; charset=utf-8"
    assert reply.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]
    text = reply.text
    assert text == desk_page.page()  # served as generated, whole
    assert card_symbols() in text  # the card faces are referee.render's own
    assert len(re.findall(r'<symbol id="card-', text)) == 54  # 52 naturals, the joker, the back
    # Nothing is fetched: every src or href points inside the page (or is the empty icon).
    assert not re.findall(r"\bsrc=", text)
    assert all(href == "data:," or href.startswith("#card-") for href in re.findall(r'href="([^"]*)"', text))
    assert "http://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in text
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text)
    assert policy is not None and "default-src 'none'" in policy.group(1) and "connect-src 'self'" in policy.group(1)
    # Any other method on the desk's path is no page.
    assert httpx.post(desk.url + "/desk", json={}, timeout=30).status_code == 404


# A hand, a close, a deal -------------------------------------------------------------------------


def test_solving_a_hand_draws_the_best_linking(page: Any, tmp_path: Path) -> None:
    page.fill("#hand-cards", HAND)
    page.click("#hand-solve")
    page.wait_for_selector("#hand-out svg[data-drawing=linking]", timeout=30_000)
    best = best_linking(parse_cards(HAND.split()), RuleSet())
    drawn = boxes(page, "#hand-out")
    groups = [sorted(cards) for label, cards in drawn if not label.startswith("unlinked")]
    assert sorted(groups) == sorted(sorted(card.code() for card in group.cards) for group in best.groups)
    assert (f"unlinked: {best.points} points", [card.code() for card in best.unlinked]) in drawn
    assert f"Best linking: {best.points} points" in text_of(page, "#hand-out")
    # The joker says what it stands for.
    joker = page.get_attribute("#hand-out g.card[data-card=JK]", "data-stands-for")
    assert joker == next(s for g in best.groups for c, s in zip(g.cards, g.stands_for) if c.is_joker)
    # Cards picked from the faces land in the field.
    page.click("#hand-clear")
    page.click("#hand-pick summary")
    for code in ("QS", "KS", "AS"):
        page.click(f"#hand-picker button[data-card={code}]")
    assert page.input_value("#hand-cards") == "QS KS AS"
    page.click("#hand-solve")
    page.wait_for_selector("#hand-out svg[data-drawing=linking]", timeout=30_000)
    assert boxes(page, "#hand-out") == [("run", ["QS", "KS", "AS"])]
    shoot(page, "hand", tmp_path)


def test_errors_are_sentences_next_to_the_field_at_fault(page: Any, tmp_path: Path) -> None:
    page.fill("#hand-cards", "AH ZZ 3H")
    page.click("#hand-solve")
    page.wait_for_selector("#hand-cards-error:not(:empty)", timeout=30_000)
    said = page.inner_text("#hand-cards-error")
    assert said.startswith("Card 2: not a card code") and "'ZZ'" in said and said.endswith(".")
    assert page.get_attribute("#hand-cards", "aria-invalid") == "true"
    assert page.inner_text("#hand-out") == ""
    # A close of the wrong size: the sentence sits under the close's cards.
    page.click("#tab-close")
    page.fill("#close-cards", "AH 2H 3H")
    page.click("#close-check")
    page.wait_for_selector("#close-cards-error:not(:empty)", timeout=30_000)
    assert "a close takes 11 cards, or 10 shown cards and a discard" in page.inner_text("#close-cards-error")
    page.fill("#close-cards", NO_CLOSE)
    page.fill("#close-discard", "XX")
    page.click("#close-check")
    page.wait_for_selector("#close-discard-error:not(:empty)", timeout=30_000)
    assert page.inner_text("#close-discard-error").startswith("Discard: ")
    # A wrong key: the referee refuses it, and the page says so beside the key.
    page.fill("#key", "not-the-key")
    page.fill("#close-discard", "")
    page.click("#close-check")
    page.wait_for_selector("#key-error:not(:empty)", timeout=30_000)
    assert page.inner_text("#key-error").startswith("The referee refused the API key")
    assert page.inner_text("#close-out") == ""
    shoot(page, "errors", tmp_path)


def test_checking_a_false_close_shows_why_and_answers_the_claim(page: Any, tmp_path: Path) -> None:
    page.click("#tab-close")
    page.fill("#close-cards", NO_CLOSE)
    page.select_option("#close-kind", "CLOSE_KIND_LINKED")
    page.click("#close-check")
    page.wait_for_selector("#close-out svg[data-drawing=close]", timeout=30_000)
    close = best_close(parse_cards(NO_CLOSE.split()), RuleSet())
    assert not close.valid and close.reason
    shown = text_of(page, "#close-out svg")
    assert "no valid close" in shown and " ".join(close.reason.split()) in shown
    assert page.get_attribute("#close-out g.card.back", "data-card") == close.discard.code()  # type: ignore[union-attr]
    assert page.inner_text("#close-out table.claims tr[data-verdict] td:nth-child(2)") == "WRONG"
    shoot(page, "close", tmp_path)


def test_scoring_a_deal_draws_every_player_with_the_referees_numbers(page: Any, tmp_path: Path) -> None:
    text = (ROOT / "examples" / "deal.json").read_text(encoding="utf-8")
    page.click("#tab-deal")
    page.fill("#deal-json", text)
    page.click("#deal-go")
    page.wait_for_selector("#deal-out svg[data-drawing=deal]", timeout=30_000)
    scored = handlers.score_deal(jsonmsg.parse(text, pb.ScoreDealRequest()))
    rows = page.eval_on_selector_all(
        "#deal-out rect.player",
        "els => els.map(r => [r.dataset.name, r.dataset.points, r.dataset.change, r.dataset.score])",
    )
    assert rows == [[p.name, str(p.points), str(p.score_change), str(p.score)] for p in scored.players]
    assert page.is_hidden("#steps")
    # Not JSON: a sentence under the field, nothing sent.
    page.fill("#deal-json", '{"deal": ')
    page.click("#deal-go")
    page.wait_for_selector("#deal-json-error:not(:empty)", timeout=10_000)
    assert page.inner_text("#deal-json-error").startswith("This is not JSON")
    shoot(page, "deal", tmp_path)


# A record, turn by turn ----------------------------------------------------------------------------


def _record(seed: int) -> dict[str, Any]:
    """A simulated three-player record (a complete, legal deal) as a ReplayDealRequest in JSON."""
    request = records.request_of(simulate(seed, 3, FAST))
    request.rules.engine = pb.ENGINE_SEARCH
    return jsonmsg.to_dict(request)


def _replayed(request: dict[str, Any], turns: int) -> pb.ReplayDealResponse:
    """The referee's replay of the first ``turns`` turns, in this process."""
    cut = copy.deepcopy(request)
    cut["record"]["turns"] = cut["record"]["turns"][:turns]
    return handlers.replay_deal(jsonmsg.parse(json.dumps(cut), pb.ReplayDealRequest()))


def _hands(page: Any) -> list[list[str]]:
    found: list[list[str]] = page.eval_on_selector_all(
        "#deal-out svg[data-drawing=replay] g.hand",
        "els => els.map(h => [...h.querySelectorAll('g.card')].map(c => c.dataset.card))",
    )
    return found


def test_stepping_through_a_record_to_its_first_violation(page: Any, tmp_path: Path) -> None:
    request = _record(7)
    turns = request["record"]["turns"]
    assert len(turns) > 6
    # Turn 5 played by the wrong seat: the first violation.
    seats = len(request["record"]["seats"])
    turns[4]["seat"] = (_replayed(request, 4).to_play + 1) % seats
    violation = _replayed(request, len(turns)).violation
    assert violation.turn == 5
    page.click("#tab-deal")
    page.fill("#deal-json", json.dumps(request))
    page.click("#deal-go")
    page.wait_for_selector("#deal-out svg[data-drawing=replay]", timeout=30_000)
    assert page.inner_text("#step-label") == f"turn 5 of {len(turns)}: the first violation"
    drawing = text_of(page, "#deal-out svg")
    assert "turn 5: NOT_YOUR_TURN" in drawing and " ".join(violation.message.split()) in drawing
    assert page.get_attribute("#deal-out rect.seat.fault", "data-seat") == str(violation.seat)
    assert page.is_disabled("#step-next")  # nothing after the first violation is judged
    shoot(page, "record", tmp_path)
    # One turn back: legal so far, every hand as the referee has it after turn 4.
    page.click("#step-prev")
    page.wait_for_selector(f"#step-label:text-is('turn 4 of {len(turns)}')")  # the page's policy forbids eval
    after_four = _replayed(request, 4)
    assert "legal so far" in text_of(page, "#deal-out svg")
    assert _hands(page) == [list(hand.cards) for hand in after_four.hands]
    assert page.locator("#deal-out rect.seat.fault").count() == 0
    # The turn in words, by the seat's name, as the referee's states before and after it show it.
    seat = _replayed(request, 3).to_play
    name = request["record"]["seats"][seat]["name"]
    said = page.inner_text("#step-turn-text")
    assert said.startswith(f"Turn 4: {name} draws from ") and "Seat" not in said, said
    fourth = request["record"]["turns"][3]
    assert said.endswith(f"throws {Card.parse(fourth['discard']).pretty()}."), said
    # Back to the deal as dealt.
    page.click("#step-first")
    page.wait_for_selector(f"#step-label:text-is('turn 0 of {len(turns)}')")
    assert _hands(page) == [list(hand.cards) for hand in _replayed(request, 0).hands]


def test_a_legal_record_ends_closed_and_scored(page: Any) -> None:
    request = _record(8)
    whole = _replayed(request, len(request["record"]["turns"]))
    assert whole.legal and whole.complete
    page.click("#tab-deal")
    page.fill("#deal-json", json.dumps(request["record"]))  # a bare DealRecord: default rules
    page.click("#deal-go")
    page.wait_for_selector("#deal-out svg[data-drawing=deal]", timeout=30_000)
    turns = len(request["record"]["turns"])
    assert page.inner_text("#step-label") == f"turn {turns} of {turns}"
    assert "closed: " in text_of(page, "#deal-out svg[data-drawing=replay]")
    scored = [[p.name, str(p.score)] for p in whole.result.players]
    rows = page.eval_on_selector_all("#deal-out rect.player", "els => els.map(r => [r.dataset.name, r.dataset.score])")
    assert rows == scored


# An upload of 1,000 cases ----------------------------------------------------------------------------


def _cases() -> list[str]:
    """1,000 case lines: the example disputes again and again, legal and illegal records, lines
    that are no JSON and a case with a field of the wrong type."""
    examples = [json.loads(line) for line in (ROOT / "examples" / "disputes.jsonl").read_text().splitlines()]
    for case in examples:
        for kind in ("hand", "close", "deal"):
            if kind in case:
                case[kind].setdefault("rules", {}).update(SEARCH)
    recorded = []
    for seed in range(3):
        legal: dict[str, Any] = {"id": f"record-{seed}", "record": _record(20 + seed)}
        illegal = copy.deepcopy(legal)
        illegal["id"] = f"record-{seed}-illegal"
        illegal["record"]["record"]["turns"][2]["drawn"] = "JK" if seed % 2 else "AS"
        recorded += [legal, illegal]
    lines = []
    for n in range(970):
        case = copy.deepcopy(examples[n % len(examples)])
        case["id"] = f"{case['id']}-{n:04d}"
        lines.append(json.dumps(case))
    lines += [json.dumps(case) for case in recorded]
    lines += ["not json at all", "{", '["an", "array"]']
    lines += [json.dumps({"id": f"typed-{n}", "hand": {"cards": "AH", "claimed_points": "many"}}) for n in range(2)]
    lines += [json.dumps({"hand": {"cards": ["AH", "2H", "3H"], "rules": SEARCH}})]  # no id: known by its line
    lines += [
        json.dumps({"id": f"late-{n}", "hand": {"cards": ["7H", "8H", "9H"], "rules": SEARCH}}) for n in range(17)
    ]
    lines += [json.dumps({"id": "<em>marked up</em>", "hand": {"cards": ["7H", "8H", "9H"], "rules": SEARCH}})]
    assert len(lines) == 1000
    return lines


def test_an_upload_of_1000_cases_is_judged_with_the_batchs_counts(page: Any, desk: Gateway, tmp_path: Path) -> None:
    lines = _cases()
    source = tmp_path / "disputes.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = len(_disputes_calls(desk, 0))
    page.click("#tab-disputes")
    page.set_input_files("#disputes-file", str(source))
    start = time.monotonic()
    page.click("#disputes-judge")
    # The batch's own verdicts, judged here while the page and the referee work.
    expected = [json.loads(judge_line(Line(n, line), "search")) for n, line in enumerate(lines, 1)]
    counts = Counter(str(v["outcome"]).removeprefix("DISPUTE_OUTCOME_") for v in expected)
    assert {"CONFIRMED", "WRONG", "INVALID", "ILLEGAL", "NO_CLAIM", "MALFORMED"} <= counts.keys()
    page.wait_for_selector("body[data-disputes=done]", timeout=240_000)
    seconds = time.monotonic() - start
    shown = dict(
        page.eval_on_selector_all(
            "#disputes-counts td[data-outcome]", "els => els.map(e => [e.dataset.outcome, Number(e.textContent)])"
        )
    )
    assert shown == {name: counts[name] for name in shown} and sum(shown.values()) == 1000
    status = re.fullmatch(r"1000 of 1000 cases judged in (\d+\.\d) s", page.inner_text("#disputes-status"))
    assert status is not None, page.inner_text("#disputes-status")
    assert page.get_attribute("#disputes-progress", "value") == "1000"
    # The progress bar moved: the cases went in chunks, one call each (Envoy's log of them).
    calls = _disputes_calls(desk, before + 20)[before:]
    assert len(calls) >= 20, len(calls)
    # The list holds every case not confirmed; a filter narrows it; a case opens drawn.
    listed = page.eval_on_selector_all("#disputes-list tr.case", "els => els.map(r => r.dataset.outcome)")
    assert len(listed) == min(500, 1000 - counts["CONFIRMED"]) and "CONFIRMED" not in listed
    page.select_option("#disputes-filter", "ILLEGAL")
    assert (
        page.eval_on_selector_all("#disputes-list tr.case", "els => els.map(r => r.dataset.outcome)") == ["ILLEGAL"] * 3
    )
    page.click("#disputes-list tr.case button")
    page.wait_for_selector("#disputes-case svg[data-drawing=replay]", timeout=10_000)
    assert page.inner_text("#case-title").startswith("record-0-illegal ILLEGAL")
    assert "turn 3: DRAWN_MISMATCH" in text_of(page, "#disputes-case svg")
    page.select_option("#disputes-filter", "INVALID")
    page.click("#disputes-list tr.case button")
    page.wait_for_selector("#disputes-case svg[data-drawing=claimed]", timeout=10_000)
    assert "neither one rank nor one suit" in page.inner_text("#disputes-case")
    shoot(page, "disputes", tmp_path)
    # An id is text, never markup.
    page.select_option("#disputes-filter", "NO_CLAIM")
    page.click("#disputes-list tr.case button:text-is('<em>marked up</em>')")
    page.wait_for_selector("#case-title:has-text('marked up')")
    assert page.inner_text("#case-title").startswith("<em>marked up</em> NO_CLAIM")
    assert page.locator("#disputes em").count() == 0
    # The verdicts downloaded are the batch's own, case for case.
    with page.expect_download() as download:
        page.click("#disputes-download")
    got = [json.loads(line) for line in Path(download.value.path()).read_text(encoding="utf-8").splitlines()]
    assert [v["id"] for v in got] == [v["id"] for v in expected]
    assert [v["outcome"] for v in got] == [v["outcome"] for v in expected]
    judged_by_both = [i for i, v in enumerate(expected) if v["outcome"] != "DISPUTE_OUTCOME_MALFORMED"]
    assert all(got[i] == expected[i] for i in judged_by_both)
    print(f"1,000 cases judged through the desk in {status.group(1)} s ({seconds:.1f} s with the checks here)")


def _disputes_calls(desk: Gateway, at_least: int) -> list[dict[str, Any]]:
    """Envoy's log lines of the calls to /v1/disputes:check, once it holds ``at_least`` of them."""
    deadline = time.monotonic() + 10  # Envoy writes its access log out every second
    while True:
        calls = [line for line in desk.access_log() if line["path"] == "/v1/disputes:check"]
        if len(calls) >= at_least or time.monotonic() > deadline:
            return calls
        time.sleep(0.2)


def test_an_upload_that_outruns_the_keys_quota_waits_and_finishes(page: Any, desk: Gateway, tmp_path: Path) -> None:
    lines = [
        json.dumps(
            {"id": f"q-{n}", "hand": {"cards": ["AH", "2H", "3H", "9C"], "claimed_points": n % 12, "rules": SEARCH}}
        )
        for n in range(120)
    ]
    source = tmp_path / "quota.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    expected = Counter(json.loads(judge_line(Line(n, line), "search"))["outcome"] for n, line in enumerate(lines, 1))
    before = len(_disputes_calls(desk, 0))
    page.fill("#key", SLOW_KEY)
    page.click("#tab-disputes")
    page.set_input_files("#disputes-file", str(source))
    page.click("#disputes-judge")
    page.wait_for_selector("body[data-disputes=done]", timeout=120_000)
    assert page.inner_text("#disputes-status").startswith("120 of 120 cases judged in ")
    shown = dict(
        page.eval_on_selector_all(
            "#disputes-counts td[data-outcome]", "els => els.map(e => [e.dataset.outcome, Number(e.textContent)])"
        )
    )
    assert {f"DISPUTE_OUTCOME_{name}": count for name, count in shown.items() if count} == dict(expected)
    assert page.inner_text("#key-error") == ""
    # Three chunks of 50 at most, but a burst of 20: the rest of each chunk went again later.
    calls = _disputes_calls(desk, before + 4)[before:]
    assert len(calls) > 3, calls


def test_a_record_in_the_notation_steps_and_is_reviewed(page: Any, tmp_path: Path) -> None:
    """The record box takes the notation the documents teach; the record is stepped through by the
    referee (stop_after_turn) and reviewed, every picture the referee's own (DrawAnswer)."""
    record = simulate(7, 3, FAST)
    text = format_notation(record)
    page.click("#tab-deal")
    page.fill("#deal-json", text)
    page.click("#deal-go")
    page.wait_for_selector("#deal-out svg[data-drawing=replay]", timeout=30_000)
    turns = len(record.turns)
    assert page.inner_text("#step-label") == f"turn {turns} of {turns}"
    page.click("#step-first")
    page.wait_for_selector(f"#step-label:text-is('turn 0 of {turns}')")
    page.click("#step-next")
    page.wait_for_selector(f"#step-label:text-is('turn 1 of {turns}')")
    first = record.turns[0]
    mover = record.seats[(record.dealer + 1) % len(record.seats)].name
    assert page.inner_text("#step-turn-text").startswith(f"Turn 1: {mover} draws from ")
    assert page.inner_text("#step-turn-text").endswith(f"throws {first.discard.pretty()}.")
    page.click("#deal-review")
    page.wait_for_selector("#review-out svg[data-drawing=review]", timeout=60_000)
    expected = render.review_svg(record, review_deal(record))
    drawn = page.eval_on_selector("#review-out svg[data-drawing=review]", "e => e.outerHTML")
    assert drawn.count('class="card') == expected.count('class="card')
    shown = text_of(page, "#review-out svg")
    for seat in record.seats:
        assert seat.name in shown
    shoot(page, "review", tmp_path)
    # A notation that does not read: the line named under the box.
    page.fill("#deal-json", text.replace("1. ", "1. zz ", 1))
    page.click("#deal-go")
    page.wait_for_selector("#deal-json-error:not(:empty)", timeout=30_000)
    assert "line " in page.inner_text("#deal-json-error")
