"""SVG drawings of cards, linkings, closes, scored, replayed and reviewed deals, as ``chess.svg`` draws boards.

Every function returns one SVG document as a string: the same value gives the same bytes. The
drawings need nothing outside themselves (no font, image, stylesheet or script is fetched: the
text uses the system's sans-serif fonts), carry a ``<title>`` and a ``<desc>`` for screen readers,
and escape every text they show, player names included. Each card is one ``<g class="card">``
element whose ``data-card`` is its code, so a page or a test can find the cards of a drawing.
``card_symbols`` gives those card elements as SVG symbols, for a page that draws many cards.

Colours: hearts and diamonds red, clubs and spades black, jokers purple with what they stand for
written on them; a card laid face down is blue.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from referee.game.cards import CARD_BY_INDEX, JOKER_CODE, Card, Suit, rank_code
from referee.game.closing import Close
from referee.game.deal import PlayerHand
from referee.game.groups import Group, GroupKind
from referee.game.linking import Linking
from referee.game.scoring import DealResult
from referee.play.record import Record
from referee.play.replay import Replay, replay
from referee.play.review import DealReview, DecisionKind, Mark, TurnReview

RED = "#c62828"
BLACK = "#212121"
JOKER_COLOUR = "#6a1b9a"
BACK = "#1f4e8c"
INK = "#212121"
MUTED = "#555555"
GOOD = "#2e7d32"
BAD = "#c62828"
FONTS = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', Arial, sans-serif"

CARD_WIDTH, CARD_HEIGHT = 36, 50
_CARD_GAP = 4  # between the cards of a group
_GROUP_GAP = 12  # between groups
_PAD = 6  # inside a group's box
_LABEL = 14  # the line under a group's cards that names its kind
_BOX_HEIGHT = CARD_HEIGHT + 2 * _PAD + _LABEL
_MARGIN = 12
_LINE = 16  # a line of text
_CHAR = 0.6  # the width of a character, in font sizes (to size boxes around text)

_SUIT_COLOURS = {Suit.HEARTS: RED, Suit.DIAMONDS: RED, Suit.CLUBS: BLACK, Suit.SPADES: BLACK}
_KIND_LABELS = {GroupKind.RUN: "run", GroupKind.SAME_RANK: "same rank", GroupKind.JOKERS_ONLY: "jokers"}
# Characters XML 1.0 does not allow, even escaped: a name from a client may hold them.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_NAME = 18  # characters of a player's name shown


def escape(text: str) -> str:
    """``text`` safe inside an XML element or a double-quoted attribute."""
    text = _NOT_XML.sub("\ufffd", text)
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def card_colour(card: Card) -> str:
    """The colour a card's rank and suit are drawn in."""
    return JOKER_COLOUR if card.suit is None else _SUIT_COLOURS[card.suit]


def stand_in(code: str) -> str:
    """What a joker stands for, for people: ``6H`` is ``6♥``, a rank stays a rank, nothing is ``any``."""
    if not code:
        return "any"
    try:
        card = Card.parse(code)
    except ValueError:
        return code
    return card.pretty()


# The pieces ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Canvas:
    """The elements of a drawing and how far they reach."""

    parts: list[str]
    width: float = 0
    height: float = 0

    def add(self, part: str, right: float, bottom: float) -> None:
        self.parts.append(part)
        self.width = max(self.width, right)
        self.height = max(self.height, bottom)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: int = 13,
        fill: str = INK,
        bold: bool = False,
        anchor: str = "start",
    ) -> None:
        weight = ' font-weight="700"' if bold else ""
        align = f' text-anchor="{anchor}"' if anchor != "start" else ""
        width = len(text) * size * _CHAR
        right = x + width if anchor == "start" else x + width / 2 if anchor == "middle" else x
        self.add(
            f'<text x="{_n(x)}" y="{_n(y)}" font-size="{size}" fill="{fill}"{weight}{align}>{escape(text)}</text>',
            right,
            y + size * 0.3,
        )

    def document(self, title: str, desc: str, kind: str) -> str:
        """The SVG document; ``kind`` (``linking``, ``close``, ``deal``...) names the drawing for a
        page or a test (``svg.drawing[data-drawing=deal]``)."""
        width, height = _n(self.width + _MARGIN), _n(self.height + _MARGIN)
        head = (
            f'<svg xmlns="http://www.w3.org/2000/svg" class="drawing" data-drawing="{kind}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}" '
            f'font-family="{FONTS}">'
            f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>"
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>'
        )
        return head + "".join(self.parts) + "</svg>\n"


def _n(value: float) -> str:
    """A coordinate: an integer when it is one, else one decimal (stable text for equal input)."""
    rounded = round(value, 1)
    return str(int(rounded)) if rounded == int(rounded) else f"{rounded:.1f}"


def _card(x: float, y: float, card: Card, stands_for: str | None = None, mark: str = "") -> str:
    """One card face up at (x, y); a joker in a group (``stands_for`` given: "" in a group of jokers
    only) shows what it stands for; ``mark`` outlines the card in that colour."""
    head, body = _card_parts(card, stands_for, mark)
    return f'{head} transform="translate({_n(x)},{_n(y)})"{body}'


@lru_cache(maxsize=1024)
def _card_parts(card: Card, stands_for: str | None, mark: str) -> tuple[str, str]:
    """A card's element but its position: the same few cards are drawn again and again."""
    frame = (
        f'<rect x="-2" y="-2" width="{CARD_WIDTH + 4}" height="{CARD_HEIGHT + 4}" rx="6" fill="none" '
        f'stroke="{mark}" stroke-width="3"/>'
        if mark
        else ""
    )
    if card.is_joker:
        label = "" if stands_for is None else stand_in(stands_for)
        inner = (
            f'<rect width="{CARD_WIDTH}" height="{CARD_HEIGHT}" rx="4" fill="#f7f0fb" stroke="{JOKER_COLOUR}"/>'
            f'<text x="4" y="14" font-size="12" font-weight="700">{JOKER_CODE}</text>'
            f'<text x="18" y="32" font-size="17" text-anchor="middle">★</text>'
        )
        stands = "" if stands_for is None else f' data-stands-for="{escape(stands_for)}"'
        if label:
            inner += f'<text x="18" y="46" font-size="11" font-weight="700" text-anchor="middle">{escape(label)}</text>'
        return f'<g class="card joker" data-card="{JOKER_CODE}"{stands}', f' fill="{JOKER_COLOUR}">{frame}{inner}</g>'
    assert card.rank is not None and card.suit is not None
    return (
        f'<g class="card" data-card="{card.code()}"',
        f' fill="{card_colour(card)}">{frame}'
        f'<rect width="{CARD_WIDTH}" height="{CARD_HEIGHT}" rx="4" fill="#ffffff" stroke="#757575"/>'
        f'<text x="4" y="16" font-size="15" font-weight="700">{rank_code(card.rank)}</text>'
        f'<text x="18" y="43" font-size="22" text-anchor="middle">{card.suit.symbol}</text></g>',
    )


def _face_down(x: float, y: float, card: Card | None) -> str:
    """A card laid face down (the close discard): its back, its code kept in ``data-card``."""
    code = card.code() if card is not None else ""
    return (
        f'<g class="card back" data-card="{code}" transform="translate({_n(x)},{_n(y)})">'
        f'<rect width="{CARD_WIDTH}" height="{CARD_HEIGHT}" rx="4" fill="{BACK}" stroke="#0d2a4f"/>'
        f'<rect x="4" y="4" width="{CARD_WIDTH - 8}" height="{CARD_HEIGHT - 8}" rx="2" fill="none" '
        f'stroke="#9fb7d9" stroke-dasharray="3 2"/></g>'
    )


def _cards_width(count: int) -> float:
    return count * CARD_WIDTH + max(0, count - 1) * _CARD_GAP


# The boxes cards sit in: (fill, stroke, dashed).
_GROUP_BOX = ("#eef6f0", "#5b8f6a", False)  # a group the referee found
_LOOSE_BOX = ("#fff4e5", "#d08a2c", True)  # cards in no group
_CLAIMED_BOX = ("#eef3fb", "#5b7fb0", False)  # a group as a client claimed it, not judged


def _box(
    canvas: _Canvas, x: float, y: float, cards: Sequence[str], count: int, label: str, style: tuple[str, str, bool]
) -> float:
    """A box holding ``count`` card drawings with ``label`` under them; the x where the next starts."""
    fill, stroke, dashed = style
    width = max(_cards_width(count), len(label) * 11 * _CHAR) + 2 * _PAD
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    # One <g class="box"> a box, its label in data-label: a page or a test reads a group's cards.
    canvas.add(
        f'<g class="box" data-label="{escape(label)}"><rect x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" '
        f'height="{_BOX_HEIGHT}" rx="6" fill="{fill}" stroke="{stroke}"{dash}/>'
        + "".join(cards)
        + f'<text x="{_n(x + width / 2)}" y="{_n(y + _PAD + CARD_HEIGHT + 12)}" font-size="11" fill="{MUTED}" '
        f'text-anchor="middle">{escape(label)}</text></g>',
        x + width,
        y + _BOX_HEIGHT,
    )
    return x + width + _GROUP_GAP


def _group(canvas: _Canvas, x: float, y: float, group: Group) -> float:
    """A group in its box: its cards in group order, each joker with what it stands for."""
    cards = [
        _card(x + _PAD + i * (CARD_WIDTH + _CARD_GAP), y + _PAD, card, stands if card.is_joker else None)
        for i, (card, stands) in enumerate(zip(group.cards, group.stands_for))
    ]
    return _box(canvas, x, y, cards, len(group.cards), _KIND_LABELS[group.kind], _GROUP_BOX)


def _loose(
    canvas: _Canvas, x: float, y: float, cards: Sequence[Card], label: str, style: tuple[str, str, bool] = _LOOSE_BOX
) -> float:
    """Cards as they are in a box (by default dashed: the cards set apart, in no group)."""
    drawn = [_card(x + _PAD + i * (CARD_WIDTH + _CARD_GAP), y + _PAD, card) for i, card in enumerate(cards)]
    return _box(canvas, x, y, drawn, len(cards), label, style)


def _linking(canvas: _Canvas, x: float, y: float, linking: Linking, points: bool = True) -> float:
    """Each group in its box, then the unlinked cards set apart; the x after the last box."""
    for group in linking.groups:
        x = _group(canvas, x, y, group)
    if linking.unlinked:
        label = f"unlinked: {linking.points} points" if points else "unlinked"
        x = _loose(canvas, x + _GROUP_GAP, y, linking.unlinked, label)
    elif not linking.groups:
        canvas.text(x, y + _BOX_HEIGHT / 2, "no cards", fill=MUTED)
        x += 80
    return x


def _badge(canvas: _Canvas, x: float, y: float, text: str, colour: str) -> float:
    """White text on a coloured pill; the x after it."""
    width = len(text) * 14 * 0.7 + 20  # bold capitals are wider than the usual character
    canvas.add(
        f'<g class="badge"><rect x="{_n(x)}" y="{_n(y)}" width="{_n(width)}" height="24" rx="12" fill="{colour}"/>'
        f'<text x="{_n(x + width / 2)}" y="{_n(y + 17)}" font-size="14" font-weight="700" fill="#ffffff" '
        f'text-anchor="middle">{escape(text)}</text></g>',
        x + width,
        y + 24,
    )
    return x + width


def _paragraph(canvas: _Canvas, x: float, y: float, text: str, fill: str = INK, width: int = 90) -> float:
    """``text`` wrapped into lines of ``width`` characters at most (8 lines); the y after it."""
    lines = textwrap.wrap(text, width) or [""]
    if len(lines) > 8:
        lines = lines[:7] + [lines[7][: width - 1] + "…"]
    for line in lines:
        y += _LINE
        canvas.text(x, y, line, fill=fill)
    return y + 4


def _kind_text(close: Close) -> str:
    assert close.kind is not None
    return f"{close.kind.value.replace('_', ' ')} ×{close.multiplier}"


def _pretty(cards: Iterable[Card]) -> str:
    return " ".join(card.pretty() for card in cards)


def _describe_linking(linking: Linking, points: bool = True) -> str:
    """The linking in words, for ``<desc>``."""
    parts = []
    for group in linking.groups:
        jokers = [stand_in(s) for c, s in zip(group.cards, group.stands_for) if c.is_joker]
        note = f", joker as {', '.join(jokers)}" if jokers else ""
        parts.append(f"{_pretty(group.cards)} ({_KIND_LABELS[group.kind]}{note})")
    text = "; ".join(parts) if parts else "no group"
    if linking.unlinked:
        text += f"; unlinked {_pretty(linking.unlinked)}"
    if points:
        text += f"; {linking.points} points"
    return text


def _name(name: str) -> str:
    return name if len(name) <= _NAME else name[: _NAME - 1] + "…"


# The drawings ----------------------------------------------------------------------------------


def card_symbols() -> str:
    """Every card face (52 naturals and the joker) and the back as SVG ``<symbol>`` elements, in an
    ``<svg>`` that shows nothing: a page that draws many cards (the desk) holds each once and
    places it with ``<use href="#card-CODE">`` (``#card-back`` for a card face down).

    Each symbol is the very element the drawings place for that card, so a card looks the same
    on the desk as in an SVG file; a joker's symbol shows no stand-in (the page writes it)."""
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0" aria-hidden="true" '
             f'font-family="{FONTS}"><defs>']  # fmt: skip
    view = f'viewBox="0 0 {CARD_WIDTH} {CARD_HEIGHT}"'
    for card in CARD_BY_INDEX:
        head, body = _card_parts(card, None, "")
        parts.append(f'<symbol id="card-{card.code()}" {view}>{head}{body}</symbol>')
    back = _face_down(0, 0, None).replace(' data-card=""', "").replace(' transform="translate(0,0)"', "")
    parts.append(f'<symbol id="card-back" {view}>{back}</symbol>')
    parts.append("</defs></svg>")
    return "".join(parts)


def card_svg(card: Card, stands_for: str = "") -> str:
    """One card; a joker shows what it stands for when ``stands_for`` is given."""
    canvas = _Canvas([])
    canvas.add(_card(_MARGIN, _MARGIN, card, stands_for or None), _MARGIN + CARD_WIDTH, _MARGIN + CARD_HEIGHT)
    what = card.pretty()
    if card.is_joker:
        what = f"joker standing for {stand_in(stands_for)}" if stands_for else "joker"
    return canvas.document(f"Card {card.pretty()}", what, "card")


def cards_svg(cards: Sequence[Card], title: str = "Cards", note: str = "", discard: Card | None = None) -> str:
    """Cards in a row, as given, with ``note`` under them and ``discard`` face down at the end."""
    canvas = _Canvas([])
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    y: float = _MARGIN + 22
    x: float = _MARGIN
    for card in cards:
        canvas.add(_card(x, y, card), x + CARD_WIDTH, y + CARD_HEIGHT)
        x += CARD_WIDTH + _CARD_GAP
    if discard is not None:
        x += _GROUP_GAP
        canvas.add(_face_down(x, y, discard), x + CARD_WIDTH, y + CARD_HEIGHT)
        canvas.text(
            x + CARD_WIDTH / 2, y + CARD_HEIGHT + 14, f"down: {discard.pretty()}", size=11, fill=MUTED, anchor="middle"
        )
    if note:
        _paragraph(canvas, _MARGIN, y + CARD_HEIGHT + 14, note)
    desc = _pretty(cards) or "no cards"
    if discard is not None:
        desc += f"; {discard.pretty()} laid face down"
    return canvas.document(title, desc + (f"; {note}" if note else ""), "cards")


def claimed_svg(groups: Sequence[Sequence[Card]], unlinked: Sequence[Card] = (), title: str = "Claimed linking") -> str:
    """A claimed linking as a client sent it: each claimed group boxed as given (not judged), then
    the cards left out of every group."""
    canvas = _Canvas([])
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    x, y = float(_MARGIN), float(_MARGIN + 22)
    for i, group in enumerate(groups):
        x = _loose(canvas, x, y, group, f"claimed group {i}", _CLAIMED_BOX)
    if unlinked:
        x = _loose(canvas, x + _GROUP_GAP, y, unlinked, "left out")
    if not groups and not unlinked:
        canvas.text(x, y + _LINE, "no group claimed", fill=MUTED)
    parts = [f"group {i}: {_pretty(group)}" for i, group in enumerate(groups)]
    if unlinked:
        parts.append(f"left out: {_pretty(unlinked)}")
    return canvas.document(title, "; ".join(parts) or "no group claimed", "claimed")


def linking_svg(linking: Linking, title: str = "") -> str:
    """A hand's linking: each group together (jokers with what they stand for), the unlinked cards
    set apart, and the points."""
    canvas = _Canvas([])
    title = title or f"Best linking: {linking.points} points"
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    _linking(canvas, _MARGIN, _MARGIN + 22, linking)
    return canvas.document(title, _describe_linking(linking), "linking")


def _close_parts(canvas: _Canvas, x: float, y: float, close: Close) -> float:
    """The badge, the shown cards in their groups and the face-down discard, the reason; the y after."""
    if close.valid and close.kind is not None:
        _badge(canvas, x, y, _kind_text(close), GOOD)
    else:
        _badge(canvas, x, y, "no valid close", BAD)
    y += 32
    after = _linking(canvas, x, y, close.linking, points=False)
    if close.discard is not None:
        canvas.add(
            _face_down(after + _GROUP_GAP, y + _PAD, close.discard), after + _GROUP_GAP + CARD_WIDTH, y + _BOX_HEIGHT
        )
        canvas.text(
            after + _GROUP_GAP + CARD_WIDTH / 2,
            y + _PAD + CARD_HEIGHT + 12,
            f"down: {close.discard.pretty()}",
            size=11,
            fill=MUTED,
            anchor="middle",
        )
    y += _BOX_HEIGHT
    if not close.valid and close.reason:
        y = _paragraph(canvas, x, y, close.reason, fill=BAD)
    return y


def _describe_close(close: Close) -> str:
    head = f"valid close, {_kind_text(close)}" if close.valid and close.kind is not None else "no valid close"
    discard = f"; {close.discard.pretty()} laid face down" if close.discard is not None else ""
    reason = f"; {close.reason}" if close.reason else ""
    return f"{head}: {_describe_linking(close.linking, points=False)}{discard}{reason}"


def close_svg(close: Close, title: str = "") -> str:
    """A close verdict: the kind and multiplier as a badge (or that it is no close), the 10 shown
    cards in their groups, the face-down discard, and the reason when it is false."""
    canvas = _Canvas([])
    title = title or "Close verdict"
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    _close_parts(canvas, _MARGIN, _MARGIN + 22, close)
    return canvas.document(title, _describe_close(close), "close")


def _player_row(canvas: _Canvas, y: float, name: str, tags: Sequence[tuple[str, str]]) -> None:
    """A player's name and tags in the left column of a row."""
    canvas.text(_MARGIN + 6, y + 22, _name(name), size=14, bold=True)
    for i, (tag, colour) in enumerate(tags):
        canvas.text(_MARGIN + 6, y + 40 + i * 15, tag, size=12, fill=colour, bold=True)


_NAME_COLUMN = 150


def deal_svg(result: DealResult, title: str = "Scored deal") -> str:
    """A scored deal: the close, then a row per player (cards in groups, points, score change, new
    score, out or not), the closer marked."""
    canvas = _Canvas([])
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    y = _close_header(canvas, _MARGIN + 22, result.close)
    rows: list[tuple[float, float]] = []  # (y, x after the cards) of each row
    top = y + 22
    y = top
    for player in result.players:
        x: float = _MARGIN + _NAME_COLUMN
        if player.closer:
            x = _linking(canvas, x, y + 4, result.close.linking, points=False)
            if result.close.discard is not None:
                canvas.add(_face_down(x, y + 4 + _PAD, result.close.discard), x + CARD_WIDTH, y + 4 + _BOX_HEIGHT)
                down = f"down: {result.close.discard.pretty()}"
                canvas.text(
                    x + CARD_WIDTH / 2, y + 4 + _PAD + CARD_HEIGHT + 12, down, size=11, fill=MUTED, anchor="middle"
                )
                x += CARD_WIDTH + _GROUP_GAP
        else:
            x = _linking(canvas, x, y + 4, player.linking)
        rows.append((y, x))
        y += _BOX_HEIGHT + 8
    numbers = max([x for _, x in rows], default=_MARGIN + _NAME_COLUMN) + 8
    columns = (("points", 0), ("change", 70), ("score", 140))
    for label, offset in columns:
        canvas.text(numbers + offset + 56, top - 6, label, size=12, fill=MUTED, anchor="end")
    right = numbers + 210
    backgrounds = []
    for (row_y, _), player in zip(rows, result.players):
        fill = "#fff8e1" if player.closer else "#fafafa"
        stroke = "#f9a825" if player.closer else "#e0e0e0"
        backgrounds.append(
            f'<rect class="player" data-name="{escape(player.name)}" data-points="{player.points}" '
            f'data-change="{player.score_change}" data-score="{player.score}" x="{_MARGIN}" y="{_n(row_y)}" '
            f'width="{_n(right - _MARGIN)}" height="{_BOX_HEIGHT + 8}" fill="{fill}" stroke="{stroke}"/>'
        )
        tags = []
        if player.closer:
            tags.append(("★ closer", "#a66f00"))
        if player.eliminated:
            tags.append(("OUT", BAD))
        _player_row(canvas, row_y, player.name, tags)
        middle = row_y + _BOX_HEIGHT / 2 + 8
        change = f"{player.score_change:+d}" if player.score_change else "0"
        colour = GOOD if player.score_change > 0 else BAD if player.score_change < 0 else INK
        canvas.text(numbers + 56, middle, str(player.points), size=14, anchor="end")
        canvas.text(numbers + 126, middle, change, size=14, fill=colour, bold=True, anchor="end")
        canvas.text(numbers + 196, middle, str(player.score), size=14, bold=True, anchor="end")
    # The row backgrounds go under everything else.
    canvas.parts[0:0] = backgrounds
    canvas.width = max(canvas.width, right)
    canvas.height = max(canvas.height, y)
    y = (rows[-1][0] + _BOX_HEIGHT + 8) if rows else y
    if result.match_over and result.winner:
        canvas.text(_MARGIN, y + 20, f"Match over: {result.winner} wins", size=14, bold=True, fill=GOOD)
    return canvas.document(title, _describe_deal(result), "deal")


def _close_header(canvas: _Canvas, y: float, close: Close) -> float:
    """The close's badge and, when false, its reason; the y after them."""
    if close.valid and close.kind is not None:
        _badge(canvas, _MARGIN, y, f"close: {_kind_text(close)}", GOOD)
        return y + 28
    _badge(canvas, _MARGIN, y, "no valid close: nothing scores", BAD)
    return _paragraph(canvas, _MARGIN, y + 24, close.reason, fill=BAD) if close.reason else y + 28


def _describe_deal(result: DealResult) -> str:
    parts = [_describe_close(result.close)]
    for player in result.players:
        role = "closer, " if player.closer else ""
        out = ", out" if player.eliminated else ""
        parts.append(
            f"{player.name}: {role}{player.points} points, change {player.score_change:+d}, score {player.score}{out}"
        )
    if result.match_over and result.winner:
        parts.append(f"match over: {result.winner} wins")
    return ". ".join(parts)


def replay_svg(replay: Replay, title: str = "") -> str:
    """A replayed deal after its legal turns: every hand, the discard pile's top and the stock,
    the seat to play; the first violation and the seat at fault highlighted."""
    canvas = _Canvas([])
    violation = replay.violation
    title = title or f"Deal after turn {replay.turns_played}"
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    y: float = _MARGIN + 22
    if violation is not None:
        _badge(canvas, _MARGIN, y, f"turn {violation.turn}: {violation.code.value}", BAD)
        # The message names the turn and the player already.
        y = _paragraph(canvas, _MARGIN, y + 24, violation.message, fill=BAD)
    elif replay.complete and replay.close is not None and replay.close.kind is not None:
        _badge(canvas, _MARGIN, y, f"closed: {_kind_text(replay.close)}", GOOD)
        y += 32
    else:
        _badge(canvas, _MARGIN, y, "legal so far", GOOD)
        y += 32
    # What the record proves about its deck order (docs/records.md, "What a record proves").
    mismatch = violation is not None and violation.code.value == "SEED_MISMATCH"
    y = _paragraph(canvas, _MARGIN, y - 8, replay.shuffle_proof.sentence(mismatch), fill=MUTED) + 6
    x: float = _MARGIN
    pile = replay.discard_pile
    top_mark = BAD if violation is not None and violation.code.value in ("DRAWN_MISMATCH", "DISCARD_TAKEN") else ""
    if pile:
        canvas.add(_card(x, y, pile[-1], mark=top_mark), x + CARD_WIDTH, y + CARD_HEIGHT)
    canvas.text(x + CARD_WIDTH / 2, y + CARD_HEIGHT + 14, f"pile {len(pile)}", size=11, fill=MUTED, anchor="middle")
    x += CARD_WIDTH + 24
    if replay.stock:
        canvas.add(_face_down(x, y, None), x + CARD_WIDTH, y + CARD_HEIGHT)
    canvas.text(
        x + CARD_WIDTH / 2, y + CARD_HEIGHT + 14, f"stock {len(replay.stock)}", size=11, fill=MUTED, anchor="middle"
    )
    if replay.discard is not None:
        x += CARD_WIDTH + 24
        canvas.add(_face_down(x, y, replay.discard), x + CARD_WIDTH, y + CARD_HEIGHT)
        canvas.text(
            x + CARD_WIDTH / 2,
            y + CARD_HEIGHT + 14,
            f"down: {replay.discard.pretty()}",
            size=11,
            fill=MUTED,
            anchor="middle",
        )
    y += CARD_HEIGHT + 28
    backgrounds = []
    rows_right: float = 0
    row_tops = []
    for seat, hand in enumerate(replay.hands):
        x = _MARGIN + _NAME_COLUMN
        first = len(canvas.parts)
        if seat == replay.closer and replay.close is not None:
            x = _linking(canvas, x, y + 4, replay.close.linking, points=False)
        else:
            for card in hand.cards:
                canvas.add(_card(x + _PAD, y + 4 + _PAD, card), x + _PAD + CARD_WIDTH, y + 4 + _PAD + CARD_HEIGHT)
                x += CARD_WIDTH + _CARD_GAP
            x += _PAD
        # The seat's cards as one <g class="hand">: a page or a test reads each hand.
        canvas.parts[first:] = [f'<g class="hand" data-seat="{seat}">' + "".join(canvas.parts[first:]) + "</g>"]
        rows_right = max(rows_right, x)
        row_tops.append(y)
        tags = []
        if violation is not None and seat == violation.seat:
            tags.append(("at fault", BAD))
        if seat == replay.to_play:
            tags.append(("to play", GOOD))
        if seat == replay.closer:
            tags.append(("★ closer", "#a66f00"))
        _player_row(canvas, y, hand.name, tags)
        y += _BOX_HEIGHT + 8
    for seat, row_y in enumerate(row_tops):
        fault = violation is not None and seat == violation.seat
        fill, stroke, wide = ("#fdecea", BAD, 3) if fault else ("#fafafa", "#e0e0e0", 1)
        backgrounds.append(
            f'<rect class="{"seat fault" if fault else "seat"}" data-seat="{seat}" x="{_MARGIN}" y="{_n(row_y)}" '
            f'width="{_n(rows_right + 8 - _MARGIN)}" height="{_BOX_HEIGHT + 8}" fill="{fill}" stroke="{stroke}" '
            f'stroke-width="{wide}"/>'
        )
    canvas.parts[0:0] = backgrounds
    canvas.width = max(canvas.width, rows_right + 8)
    canvas.height = max(canvas.height, y)
    return canvas.document(title, _describe_replay(replay), "replay")


def _seat_name(replay: Replay, seat: int) -> str:
    if 0 <= seat < len(replay.hands):
        return f"{replay.hands[seat].name} (seat {seat})"
    return f"seat {seat}"


def _describe_replay(replay: Replay) -> str:
    parts = []
    violation = replay.violation
    if violation is not None:
        parts.append(
            f"first violation, {violation.code.value}, by {_seat_name(replay, violation.seat)}: {violation.message}"
        )
    elif replay.complete and replay.close is not None:
        parts.append(f"closed legally: {_describe_close(replay.close)}")
    else:
        parts.append("legal so far")
    if replay.discard_pile:
        parts.append(f"discard pile top {replay.discard_pile[-1].pretty()} of {len(replay.discard_pile)}")
    parts.append(f"stock {len(replay.stock)} cards")
    hands: Sequence[PlayerHand] = replay.hands
    for seat, hand in enumerate(hands):
        parts.append(f"{hand.name} (seat {seat}): {_pretty(hand.cards)}")
    return ". ".join(parts)


# A review drawn: the turns with a mark, at most this many (the page stays quick to open).
REVIEWED_TURNS = 12
_ANNOTATION = {Mark.INACCURACY: "?!", Mark.MISTAKE: "?", Mark.BLUNDER: "??"}


def review_svg(record: Record, review: DealReview, title: str = "Review", turns: Sequence[int] | None = None) -> str:
    """A reviewed deal: each seat's accuracy and marks, then the ``turns`` (numbers; by default the
    first ``REVIEWED_TURNS`` with a mark), each as the seat's 11 cards after its draw, the card it
    threw outlined red when the throw lost, the better throws outlined green, and in words the
    draw and the throw as an annotator writes them."""
    canvas = _Canvas([])
    canvas.text(_MARGIN, _MARGIN + 12, title, size=14, bold=True)
    y: float = _MARGIN + 36
    columns = (("accuracy", 110), ("?!", 170), ("?", 200), ("??", 230), ("passed", 280), ("fed", 320))
    canvas.text(_MARGIN + 6, y, "player", size=12, fill=MUTED)
    for label, offset in columns:
        canvas.text(_MARGIN + _NAME_COLUMN + offset, y, label, size=12, fill=MUTED, anchor="end")
    for seat in review.seats:
        y += 20
        accuracy = "-" if seat.accuracy is None else f"{seat.accuracy:.1f}%"
        values = (accuracy, seat.inaccuracies, seat.mistakes, seat.blunders, seat.passed_closes, seat.fed)
        canvas.text(_MARGIN + 6, y, _name(seat.name), size=13, bold=True)
        for (_, offset), value in zip(columns, values):
            canvas.text(_MARGIN + _NAME_COLUMN + offset, y, str(value), size=13, anchor="end")
    if not review.legal:
        y = _paragraph(canvas, _MARGIN, y + 8, "Only the turns before the first violation are reviewed.", fill=BAD)
    chosen = _turns_to_draw(review, turns)
    if not chosen:
        canvas.text(_MARGIN, y + 30, "No turn is marked.", fill=GOOD)
        y += 30
    names = [seat.name for seat in record.seats]
    for turn in chosen:
        y = _reviewed_turn(canvas, y + 28, record, turn, names)
    return canvas.document(title, _describe_review(review, chosen, names), "review")


def _turns_to_draw(review: DealReview, numbers: Sequence[int] | None) -> list[TurnReview]:
    if numbers is not None:
        wanted = set(numbers)
        return [turn for turn in review.turns if turn.number in wanted][:REVIEWED_TURNS]
    return [turn for turn in review.turns if any(decision.marks for decision in turn.decisions)][:REVIEWED_TURNS]


def _annotated(turn: TurnReview, kind: DecisionKind) -> str:
    """A decision as an annotator writes it: the choice, its symbol, the better choice and the loss."""
    for decision in turn.decisions:
        if decision.kind is not kind:
            continue
        symbol = "".join(_ANNOTATION.get(mark, "") for mark in decision.marks)
        choice = _choice_text(decision.choice, kind)
        if not symbol and Mark.PASSED_CLOSE not in decision.marks:
            return f"{choice}"
        better = " or ".join(_choice_text(best, kind) for best in decision.judged.best)
        return f"{choice}{symbol} (better {better}, loss {decision.judged.loss:.2f})"
    return ""


def _choice_text(choice: str, kind: DecisionKind) -> str:
    if kind is DecisionKind.THROW:
        return Card.parse(choice).pretty()
    return {"STOCK": "the stock", "DISCARD": "the pile", "CLOSE": "close", "PLAY_ON": "play on"}.get(choice, choice)


def _reviewed_turn(canvas: _Canvas, y: float, record: Record, turn: TurnReview, names: Sequence[str]) -> float:
    """One turn: its words, then the 11 cards held after the draw, the throw and the better
    throws outlined; the y after it."""
    name = names[turn.seat] if 0 <= turn.seat < len(names) else f"seat {turn.seat}"
    draw = _annotated(turn, DecisionKind.DRAW)
    words = f"Turn {turn.number}, {name}: drew from {draw}, {turn.drawn.pretty()}"
    canvas.text(_MARGIN, y, words, size=13, bold=True)
    close = _annotated(turn, DecisionKind.CLOSE)
    throw = _annotated(turn, DecisionKind.THROW)
    if turn.closed:
        line = f"closed, laying {turn.thrown.pretty()} face down"
    else:
        line = f"threw {throw}" + (f"; {close}" if close and close != "play on" else "")
    notes = [mark for decision in turn.decisions for mark in decision.marks if mark in (Mark.PASSED_CLOSE, Mark.FED)]
    if Mark.PASSED_CLOSE in notes:
        line += "; passed a valid close"
    if Mark.FED in notes:
        line += "; fed the next seat"
    canvas.text(_MARGIN, y + 18, line, size=12, fill=INK)
    # The hand after the draw: the state before the turn, and the card drawn.
    before = replay(_cut(record, turn.number - 1))
    held = sorted(
        [*before.hands[turn.seat].cards, turn.drawn] if turn.seat < len(before.hands) else [turn.drawn],
        key=lambda card: card.index,
    )
    throw_decision = next((d for d in turn.decisions if d.kind is DecisionKind.THROW), None)
    # Outlined red and green only where the words say so: a throw marked for its loss.
    lost = throw_decision is not None and any(mark in _ANNOTATION for mark in throw_decision.marks)
    better = set(throw_decision.judged.best) if throw_decision is not None and lost else set()
    x: float = _MARGIN
    thrown_marked = False
    top = y + 28
    for card in held:
        mark = ""
        if card == turn.thrown and not thrown_marked:
            mark, thrown_marked = (BAD if lost else BACK), True
        elif card.code() in better:
            mark = GOOD
        canvas.add(_card(x, top, card, mark=mark), x + CARD_WIDTH, top + CARD_HEIGHT)
        x += CARD_WIDTH + _CARD_GAP
    return top + CARD_HEIGHT + 4


def _cut(record: Record, turns: int) -> Record:
    return replace(record, turns=record.turns[:turns])


def _describe_review(review: DealReview, turns: Sequence[TurnReview], names: Sequence[str]) -> str:
    parts = []
    for seat in review.seats:
        accuracy = "no decision" if seat.accuracy is None else f"accuracy {seat.accuracy:.1f}%"
        parts.append(
            f"{seat.name}: {accuracy}, {seat.inaccuracies} inaccuracies, {seat.mistakes} mistakes, "
            f"{seat.blunders} blunders"
        )
    for turn in turns:
        name = names[turn.seat] if 0 <= turn.seat < len(names) else f"seat {turn.seat}"
        parts.append(
            f"turn {turn.number}, {name}: drew from {_annotated(turn, DecisionKind.DRAW)}, threw {_annotated(turn, DecisionKind.THROW) or turn.thrown.pretty()}"
        )
    return ". ".join(parts)


__all__ = [
    "REVIEWED_TURNS",
    "card_svg",
    "card_symbols",
    "cards_svg",
    "claimed_svg",
    "close_svg",
    "deal_svg",
    "escape",
    "linking_svg",
    "replay_svg",
    "review_svg",
]
