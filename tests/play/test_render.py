"""The drawings (``referee.render``): well-formed, self-contained SVG with a title and a description,
the same bytes for the same value, one card element per card in its colour, jokers with what they
stand for, a false close with its reason, a violation highlighted; the worked examples of RULES §8
against golden files; and ``--svg`` on the command line."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from commands import cli

from referee import render
from referee.game.cards import NATURALS, Card, parse_cards
from referee.game.closing import best_close, check_close
from referee.game.deal import Deal, PlayerHand
from referee.game.linking import best_linking
from referee.game.rules import Engine, JokerDiscard, RuleSet
from referee.game.scoring import score_deal
from referee.play.record import DrawSource, Record, Seat, Turn
from referee.play.replay import ViolationCode, replay

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SVG = "{http://www.w3.org/2000/svg}"
RULES = RuleSet(engine=Engine.SEARCH)  # every engine gives the same answer; this one loads fastest


def cards(text: str) -> tuple[Card, ...]:
    return parse_cards(text.split())


def parse(drawing: str) -> ET.Element:
    """The drawing parsed as XML, after the checks every drawing must pass."""
    root = ET.fromstring(drawing)
    assert root.tag == f"{SVG}svg"
    title, desc = root[0], root[1]
    assert title.tag == f"{SVG}title" and (title.text or "").strip()
    assert desc.tag == f"{SVG}desc" and (desc.text or "").strip()
    assert root.get("role") == "img" and root.get("viewBox")
    # Nothing fetched from anywhere: the namespace is a name, not a link.
    text = drawing.replace('xmlns="http://www.w3.org/2000/svg"', "")
    for needle in ("http:", "https:", "href", "url(", "@import", "<script", "<image", "src="):
        assert needle not in text, needle
    assert drawing.endswith("</svg>\n")
    return root


def card_elements(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "card" in (g.get("class") or "").split()]


def faces(root: ET.Element) -> list[str]:
    """The codes of the cards drawn face up, in drawing order."""
    return [g.get("data-card", "") for g in card_elements(root) if "back" not in (g.get("class") or "")]


def texts(root: ET.Element) -> str:
    return " ".join(t.text or "" for t in root.iter(f"{SVG}text"))


# Cards ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("card", [*NATURALS, Card.parse("JK")], ids=str)
def test_every_card_is_drawn_with_its_rank_suit_and_colour(card: Card) -> None:
    root = parse(render.card_svg(card))
    (element,) = card_elements(root)
    assert element.get("data-card") == card.code()
    shown = [t.text for t in element.iter(f"{SVG}text")]
    if card.is_joker:
        assert shown[0] == "JK" and element.get("fill") == render.JOKER_COLOUR
        return
    rank, symbol = card.pretty()[:-1], card.pretty()[-1]
    assert shown == [rank, symbol]
    red = card.code()[-1] in "HD"
    assert element.get("fill") == (render.RED if red else render.BLACK)


def test_a_joker_shows_what_it_stands_for() -> None:
    root = parse(render.card_svg(Card.parse("JK"), "6H"))
    (element,) = card_elements(root)
    assert element.get("data-stands-for") == "6H"
    assert "6♥" in texts(root) and "standing for 6♥" in (root[1].text or "")


# Linkings ------------------------------------------------------------------------------------


def test_a_linking_draws_each_group_the_unlinked_cards_and_the_points() -> None:
    hand = cards("AH 2H 3H 5C 5D 5S KS KD 9C 4D")
    linking = best_linking(hand, RULES)
    drawing = render.linking_svg(linking)
    root = parse(drawing)
    assert sorted(faces(root)) == sorted(card.code() for card in hand)
    assert "unlinked: 33 points" in texts(root) and "33 points" in (root[0].text or "")
    assert "run" in texts(root) and "same rank" in texts(root)
    assert "♥" in texts(root) and "♣" in texts(root)
    # Same value, same bytes; the same cards in another order, the same linking and drawing.
    assert render.linking_svg(best_linking(tuple(reversed(hand)), RULES)) == drawing


def test_jokers_in_groups_are_marked_with_what_they_stand_for() -> None:
    root = parse(render.linking_svg(best_linking(cards("AH 2H 3H 5C 5D 5S KS KD 9C JK"), RULES)))
    (joker,) = [g for g in card_elements(root) if g.get("data-card") == "JK"]
    assert "joker" in (joker.get("class") or "") and joker.get("data-stands-for") == "K"
    assert "joker as K" in (root[1].text or "")
    run = parse(render.close_svg(best_close(cards("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C"), RULES)))
    (joker,) = [g for g in card_elements(run) if g.get("data-card") == "JK"]
    assert joker.get("data-stands-for") == "7H" and "7♥" in [t.text for t in joker.iter(f"{SVG}text")]
    only = parse(render.linking_svg(best_linking(cards("JK JK JK"), RULES)))
    assert "any" in texts(only)


def test_text_is_escaped_and_never_breaks_the_xml() -> None:
    hostile = 'Ana <b>&amp;</b> "x" \x01'
    root = parse(render.linking_svg(best_linking(cards("AH 2H 3H"), RULES), title=hostile))
    assert root[0].text == 'Ana <b>&amp;</b> "x" \ufffd'


# Closes --------------------------------------------------------------------------------------


def test_a_valid_close_shows_the_kind_the_multiplier_and_the_face_down_discard() -> None:
    close = best_close(cards("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD"), RULES)
    root = parse(render.close_svg(close))
    assert len(faces(root)) == 10
    (back,) = [g for g in card_elements(root) if "back" in (g.get("class") or "")]
    assert back.get("data-card") == "KD"
    assert "REMIGIO ×10" in texts(root) and "down: K♦" in texts(root)


def test_a_false_close_shows_its_reason() -> None:
    close = check_close(cards("AH 2H 3H 5C 5D 5S KS KD 9C 4D"), Card.parse("2C"), RULES)
    assert not close.valid
    root = parse(render.close_svg(close))
    assert "no valid close" in texts(root)
    words = " ".join(texts(root).split())
    assert "neither linked nor of one suit" in words and "no valid close" in (root[1].text or "")
    assert sorted(faces(root)) == sorted(card.code() for card in close.shown)


# Deals ---------------------------------------------------------------------------------------


def _deal() -> Deal:
    return Deal(
        players=(
            PlayerHand("Ana", cards("2C 3C 4C 6D 6H 6S 8S 8D 8C 8H"), 250),
            PlayerHand("Beto & <Co>", cards("AH 2H 3H 5C 5D 5S KS KD 9C 4D"), 180),
            PlayerHand("Carla", cards("QS KS AS 2S 3S 4S 7H 7D 7C 9D"), 15),
        ),
        closer=0,
        discard=Card.parse("KC"),
    )


def test_a_scored_deal_has_a_row_per_player_with_points_change_score_and_out() -> None:
    result = score_deal(_deal(), RULES)
    drawing = render.deal_svg(result)
    root = parse(drawing)
    rows = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "player"]
    assert len(rows) == 3
    assert len(card_elements(root)) == 31  # 10 each and the closer's face-down discard
    words = texts(root)
    for player in result.players:
        assert f"{player.score_change:+d}" in words and str(player.score) in words
    assert "★ closer" in words and "OUT" in words and "Beto & <Co>" in words
    assert "&lt;Co&gt;" in drawing
    assert "LINKED CLEAN ×2" in words
    assert render.deal_svg(score_deal(_deal(), RULES)) == drawing


def test_a_false_close_in_a_deal_scores_nothing_and_says_why() -> None:
    deal = replace(_deal(), closer=1, discard=Card.parse("KC"))
    root = parse(render.deal_svg(score_deal(deal, RULES)))
    assert "no valid close: nothing scores" in texts(root)
    assert "neither linked nor of one suit" in " ".join(texts(root).split())


# Replays -------------------------------------------------------------------------------------


def _record() -> Record:
    deck = list(NATURALS) * 2 + [Card.parse("JK")] * 4
    # Seat 0 throws back the card it draws (the 22nd); seat 1 throws a joker it does not hold.
    turns = (Turn(DrawSource.STOCK, deck[21]), Turn(DrawSource.STOCK, Card.parse("JK")))
    return Record(seats=(Seat("ana"), Seat("beto")), dealer=1, deck=tuple(deck), turns=turns, rules=RULES)


def test_a_replayed_deal_highlights_the_first_violation_and_the_seat_at_fault() -> None:
    played = replay(_record())
    assert played.violation is not None and played.violation.code is ViolationCode.CARD_NOT_IN_HAND
    root = parse(render.replay_svg(played))
    fault = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "seat fault"]
    assert len(fault) == 1 and fault[0].get("stroke") == render.BAD
    words = " ".join(texts(root).split())
    assert "CARD_NOT_IN_HAND" in words and "at fault" in words and played.violation.message[:40] in words
    assert len(faces(root)) == 10 * 2 + 1  # the hands and the pile's face-up top
    assert f"stock {len(played.stock)}" in words


def test_a_legal_replay_marks_the_seat_to_play() -> None:
    played = replay(replace(_record(), turns=_record().turns[:1]))
    assert played.legal
    root = parse(render.replay_svg(played))
    assert not [r for r in root.iter(f"{SVG}rect") if r.get("class") == "seat fault"]
    assert "to play" in texts(root) and "legal so far" in texts(root)


def test_the_card_symbols_are_the_drawings_own_cards_each_once() -> None:
    symbols = ET.fromstring(render.card_symbols())
    found = {symbol.get("id"): symbol for symbol in symbols.iter(f"{SVG}symbol")}
    assert list(found) == [f"card-{card.code()}" for card in (*NATURALS, Card.parse("JK"))] + ["card-back"]
    for card in (*NATURALS, Card.parse("JK")):
        (drawn,) = card_elements(parse(render.card_svg(card)))
        (face,) = list(found[f"card-{card.code()}"])
        # The same element as in a drawing, but where the drawing puts it.
        del drawn.attrib["transform"]
        assert ET.tostring(face) == ET.tostring(drawn), card
        assert found[f"card-{card.code()}"].get("viewBox") == f"0 0 {render.CARD_WIDTH} {render.CARD_HEIGHT}"
    (back,) = list(found["card-back"])
    assert "back" in (back.get("class") or "") and "data-card" not in back.attrib
    assert symbols.get("width") == "0" and symbols.get("aria-hidden") == "true"  # it shows nothing itself


# The worked examples of RULES §8, against golden files ----------------------------------------

LINKINGS = {
    "linking-33": "AH 2H 3H 5C 5D 5S KS KD 9C 4D",
    "linking-9-joker": "AH 2H 3H 5C 5D 5S KS KD 9C JK",
    "linking-9-ace-high": "QS KS AS 2S 3S 4S 7H 7D 7C 9D",
    "linking-43": "2C 2C 9D 9D 4S 7H KH KH QC JK",
    "linking-40": "JK JK 5H 9C KD QS 2D 6S 8H 3C",
    "linking-0": "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JH",
}
CLOSES = {
    "close-straight-flush": ("3H 4H 5H 6H JK 8H 9H 10H JH QH 2C", RULES),
    "close-remigio": ("7H 7H 7S 7S 7D 7D 7C 7C JK JK KD", RULES),
    "close-color-clean": ("AH 2H 3H 5H 7H 8H 9H JH QH KH 4C", RULES),
    "close-straight-flush-clean": ("AH 2H 3H 4H 5H 6H 7H 8H 9H 10H KC", RULES),
    "close-joker-discard-forbidden": (
        "AH 2H 3H 4H 5H 6H 7H 8H 9H 10H JK",
        RULES.with_options(joker_discard=JokerDiscard.FORBIDDEN),
    ),
}


@cache
def golden_drawings() -> dict[str, str]:
    """Every worked example drawn, by its golden file's name."""
    drawings = {name: render.linking_svg(best_linking(cards(hand), RULES)) for name, hand in LINKINGS.items()}
    drawings.update({name: render.close_svg(best_close(cards(hand), rules)) for name, (hand, rules) in CLOSES.items()})
    drawings["deal-pool"] = render.deal_svg(score_deal(_deal(), RULES))
    return drawings


@pytest.mark.parametrize("name", sorted([*LINKINGS, *CLOSES, "deal-pool"]))
def test_the_worked_examples_draw_as_their_golden_files(name: str) -> None:
    drawing = golden_drawings()[name]
    parse(drawing)
    path = GOLDEN / f"{name}.svg"
    assert path.exists(), (
        f"no golden file {path.name}: write them with `PYTHONPATH=tests .venv/bin/python tests/play/test_render.py`"
    )
    assert drawing == path.read_text(encoding="utf-8"), (
        f"{name} is drawn differently from {path.name}: look at both, and if the new one is right, "
        "write the golden files again with `PYTHONPATH=tests .venv/bin/python tests/play/test_render.py`"
    )


# The command line ----------------------------------------------------------------------------


def test_solve_close_and_score_write_the_drawing_with_svg(tmp_path: Path) -> None:
    linking, close, deal = tmp_path / "linking.svg", tmp_path / "close.svg", tmp_path / "deal.svg"
    solved = cli("solve", "--engine", "search", "--svg", str(linking), *"AH 2H 3H 5C 5D 5S KS KD 9C JK".split())
    assert solved.returncode == 0 and "points: 9" in solved.stdout
    assert sorted(faces(parse(linking.read_text(encoding="utf-8")))) == sorted("AH 2H 3H 5C 5D 5S KS KD 9C JK".split())
    closed = cli(
        "close", "--engine", "search", "--json", "--svg", str(close), *"3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split()
    )
    assert (
        closed.returncode == 0
        and '"STRAIGHT_FLUSH"' not in closed.stdout
        and "CLOSE_KIND_STRAIGHT_FLUSH" in closed.stdout
    )
    assert "STRAIGHT FLUSH ×5" in texts(parse(close.read_text(encoding="utf-8")))
    scored = cli("score", "--engine", "search", "--svg", str(deal), str(ROOT / "examples" / "deal.json"))
    assert scored.returncode == 0 and "Ana: closer" in scored.stdout
    root = parse(deal.read_text(encoding="utf-8"))
    assert len([r for r in root.iter(f"{SVG}rect") if r.get("class") == "player"]) == 3


def test_svg_to_a_file_that_cannot_be_written_is_bad_usage(tmp_path: Path) -> None:
    run = cli("solve", "--svg", str(tmp_path / "no" / "such.svg"), "AH", "2H", "3H")
    assert run.returncode == 2 and "cannot write" in run.stderr and run.stdout == ""
    many = cli("solve", "--svg", str(tmp_path / "hands.svg"), stdin="AH 2H 3H\n")
    assert many.returncode == 2 and "--svg draws one hand" in many.stderr


def test_drawings_are_the_same_bytes_run_after_run(tmp_path: Path) -> None:
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for path in (first, second):
        assert (
            cli("score", "--engine", "search", "--svg", str(path), str(ROOT / "examples" / "deal.json")).returncode == 0
        )
    assert first.read_bytes() == second.read_bytes()


if __name__ == "__main__":
    # Write the golden files again (after a change to the drawings that is meant).
    GOLDEN.mkdir(exist_ok=True)
    for name, drawing in golden_drawings().items():
        (GOLDEN / f"{name}.svg").write_text(drawing, encoding="utf-8")
    print(f"wrote {len(golden_drawings())} golden files to {GOLDEN}", file=sys.stderr)
