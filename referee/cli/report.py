"""The dispute report: one self-contained HTML page of a batch's verdicts (``batch --report``).

The page needs nothing outside itself: no script, stylesheet, font or image is fetched, so it
opens from disk anywhere. It holds a summary (the cases of each outcome, as a chart and a table)
and, for each case that is not CONFIRMED, the claims beside the referee's answers, drawn with
``referee.render``, with the reasons.

Whatever the batch's size the page stays small enough to open quickly: the first
``DRAWN_CASES`` cases that are not confirmed are drawn (fewer when their drawings reach
``DRAWN_BYTES``), the next ``LISTED_CASES`` are listed by id, outcome and reason, and the rest are
only counted; the page says how many of each. Only what is drawn or listed is kept in memory.

The verdicts and cases are read as protobuf JSON (the batch files' one shape) with the ``json``
module: the domain values the drawings take are rebuilt from them here.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from referee import render
from referee.game.cards import Card, parse_cards, sort_cards
from referee.game.closing import Close
from referee.game.deal import PlayerHand
from referee.game.groups import Group, GroupKind
from referee.game.linking import Linking
from referee.game.rules import CloseKind, ScoringRules
from referee.game.scoring import DealResult, PlayerResult
from referee.play.replay import Replay, Violation, ViolationCode
from referee.play.shuffle import ShuffleProof

OUTCOMES = ("CONFIRMED", "WRONG", "INVALID", "ILLEGAL", "NO_CLAIM", "MALFORMED")
DRAWN_CASES = 500
DRAWN_BYTES = 4_000_000
LISTED_CASES = 2_000
KEPT_CASE_CHARS = 200_000
SECTION_CHARS = 200_000  # the drawings of one case at most (16 players' hands take about 60,000)  # a longer case is not kept to draw its claims (its verdict still is)
_REASON_CHARS = 200

_COLOURS = {
    "CONFIRMED": "#2e7d32",
    "WRONG": "#ef6c00",
    "INVALID": "#c62828",
    "ILLEGAL": "#ad1457",
    "NO_CLAIM": "#757575",
    "MALFORMED": "#6a1b9a",
}
_OUTCOME = re.compile(r'"outcome"\s*:\s*"DISPUTE_OUTCOME_([A-Z_]+)"')


# Reading the referee's answers back ----------------------------------------------------------


def _field(message: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A field of a protobuf JSON object by its proto name or its JSON (lowerCamel) name."""
    if name in message:
        return message[name]
    head, *rest = name.split("_")
    return message.get(head + "".join(word.title() for word in rest), default)


def _cards(codes: Iterable[str]) -> tuple[Card, ...]:
    return parse_cards(list(codes))


def group_from_json(message: Mapping[str, Any]) -> Group:
    """A Group message (protobuf JSON) as the domain's group."""
    kind = GroupKind[str(_field(message, "kind", "")).removeprefix("GROUP_KIND_")]
    return Group(kind, _cards(_field(message, "cards", [])), tuple(_field(message, "stands_for", [])))


def linking_from_json(message: Mapping[str, Any]) -> Linking:
    """A Linking message (protobuf JSON) as the domain's linking."""
    return Linking(
        tuple(group_from_json(group) for group in _field(message, "groups", [])),
        _cards(_field(message, "unlinked", [])),
        int(_field(message, "points", 0)),
    )


def close_kind_from_json(name: str | None) -> CloseKind | None:
    """A CloseKind enum name as the domain's close kind; CLOSE_KIND_UNSPECIFIED (or none) is None."""
    text = str(name or "").removeprefix("CLOSE_KIND_")
    return None if text in ("", "UNSPECIFIED") else CloseKind[text]


def close_from_json(message: Mapping[str, Any]) -> Close:
    """A Close message (protobuf JSON) as the domain's close verdict.

    The message does not carry the points of the shown cards' linking: the linking rebuilt here
    has none (the drawing of a close shows no points)."""
    groups = tuple(group_from_json(group) for group in _field(message, "groups", []))
    unlinked = _cards(_field(message, "unlinked", []))
    discard = _field(message, "discard", "")
    return Close(
        valid=bool(_field(message, "valid", False)),
        kind=close_kind_from_json(_field(message, "kind")),
        multiplier=int(_field(message, "multiplier", 0)),
        discard=Card.parse(discard, "discard") if discard else None,
        shown=sort_cards([card for group in groups for card in group.cards] + list(unlinked)),
        linking=Linking(groups, unlinked, 0),
        reason=str(_field(message, "reason", "")),
    )


def deal_from_json(message: Mapping[str, Any]) -> DealResult:
    """A ScoreDealResponse message (protobuf JSON) as the domain's scored deal (its scoring rules,
    which the message does not carry, left unresolved)."""
    players = tuple(
        PlayerResult(
            name=str(_field(player, "name", "")),
            closer=bool(_field(player, "closer", False)),
            linking=linking_from_json(_field(player, "linking", {})),
            points=int(_field(player, "points", 0)),
            score_change=int(_field(player, "score_change", 0)),
            score=int(_field(player, "score", 0)),
            eliminated=bool(_field(player, "eliminated", False)),
        )
        for player in _field(message, "players", [])
    )
    return DealResult(
        close=close_from_json(_field(message, "close", {})),
        players=players,
        scoring=ScoringRules(),
        match_over=bool(_field(message, "match_over", False)),
        winner=_field(message, "winner") or None,
    )


def replay_from_json(message: Mapping[str, Any]) -> Replay:
    """A ReplayDealResponse message (protobuf JSON) as the domain's replay, as far as a drawing
    needs it: the violation, the hands, the piles, the seats to play and that closed, the close."""
    found = _field(message, "violation")
    violation = None
    if isinstance(found, dict) and found:
        violation = Violation(
            turn=int(_field(found, "turn", 0)),
            seat=int(_field(found, "seat", 0)),
            code=ViolationCode[str(_field(found, "code", "")).removeprefix("VIOLATION_CODE_")],
            message=str(_field(found, "message", "")),
        )
    result = _field(message, "result")
    discard = _field(message, "discard", "")
    to_play, closer = _field(message, "to_play"), _field(message, "closer")
    return Replay(
        violation=violation,
        turns_played=int(_field(message, "turns_played", 0)),
        complete=bool(_field(message, "complete", False)),
        hands=tuple(
            PlayerHand(str(_field(hand, "name", "")), _cards(_field(hand, "cards", [])))
            for hand in _field(message, "hands", [])
        ),
        discard_pile=_cards(_field(_field(message, "discard_pile", {}), "cards", [])),
        stock=_cards(_field(_field(message, "stock", {}), "cards", [])),
        to_play=None if to_play is None else int(to_play),
        closer=None if closer is None else int(closer),
        discard=Card.parse(discard, "discard") if discard else None,
        close=close_from_json(_field(result, "close", {})) if isinstance(result, dict) and result else None,
    )


# The report ----------------------------------------------------------------------------------


class _HasText(Protocol):
    @property
    def text(self) -> str: ...


_L = TypeVar("_L", bound=_HasText)


def outcome_of(verdict: str) -> str:
    """The outcome of a verdict line (``WRONG``), or "" when the line has none."""
    found = _OUTCOME.search(verdict)
    return found.group(1) if found else ""


class Report:
    """A dispute report being gathered: one verdict line at a time, then ``html()``."""

    def __init__(
        self,
        title: str = "Dispute report",
        drawn_cases: int = DRAWN_CASES,
        drawn_bytes: int = DRAWN_BYTES,
        listed_cases: int = LISTED_CASES,
    ) -> None:
        self.title = title
        self.drawn_cases = drawn_cases
        self.drawn_bytes = drawn_bytes
        self.listed_cases = listed_cases
        self.counts: Counter[str] = Counter()
        self.skipped = 0  # cases of an earlier run (``--resume``), not in this report
        self._sections: list[str] = []
        self._section_bytes = 0
        self._listed: list[str] = []
        self._unlisted: Counter[str] = Counter()
        self._undrawn: Counter[str] = Counter()
        self._cases: deque[str] = deque()
        self._watching = False
        self._full = drawn_cases <= 0

    def watch(self, lines: Iterable[_L]) -> Iterator[_L]:
        """Pass the batch's case lines through, remembering each case until ``add`` takes its
        verdict (the verdicts come in the order of the cases, one each)."""
        self._watching = True
        for line in lines:
            self._cases.append(line.text)
            yield line

    def add(self, verdict: str, case: str | None = None) -> None:
        """Count one verdict line, and draw or list it when it is not CONFIRMED and room is left;
        ``case`` is its case line (by default, the oldest one ``watch`` saw)."""
        if self._watching and self._cases:
            oldest = self._cases.popleft()
            case = oldest if case is None else case
        outcome = outcome_of(verdict) or "UNREADABLE"
        self.counts[outcome] += 1
        if outcome == "CONFIRMED":
            return
        if not self._full:
            section = _case_section(len(self._sections) + 1, verdict, case)
            if self._section_bytes + len(section) <= self.drawn_bytes:
                self._sections.append(section)
                self._section_bytes += len(section)
                self._full = len(self._sections) >= self.drawn_cases
                return
            # The drawings are full: every later case is listed or counted, never drawn, so the
            # page keeps the order of the file and no more time goes into drawing.
            self._full = True
        self._undrawn[outcome] += 1
        if len(self._listed) < self.listed_cases:
            self._listed.append(_listed_row(verdict, outcome))
        else:
            self._unlisted[outcome] += 1

    @property
    def total(self) -> int:
        """The verdicts added."""
        return sum(self.counts.values())

    def html(self) -> str:
        """The report as one self-contained HTML page."""
        total = self.total
        not_confirmed = total - self.counts["CONFIRMED"]
        out = [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_h(self.title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n",
            f"<h1>{_h(self.title)}</h1>\n",
            f'<section id="summary">\n<h2>Summary: {total:,} case{_s(total)}</h2>\n',
            _chart(self.counts),
            _counts_table(self.counts),
        ]
        if self.skipped:
            out.append(
                f"<p>{self.skipped:,} case{_s(self.skipped)} judged in an earlier run (resumed) are not here.</p>\n"
            )
        drawn, listed, counted = len(self._sections), len(self._listed), sum(self._unlisted.values())
        out.append(f'<p class="tally">{not_confirmed:,} case{_s(not_confirmed)} not confirmed: {drawn:,} drawn below')
        if listed or counted:
            out.append(f", {listed:,} listed without a drawing")
        if counted:
            out.append(f", {counted:,} left out (only counted: {_by_outcome(self._unlisted)})")
        out.append(".</p>\n</section>\n")
        if self._sections:
            out.append(f'<section id="cases">\n<h2>Cases not confirmed, drawn ({drawn})</h2>\n')
            out.extend(self._sections)
            out.append("</section>\n")
        if self._listed:
            out.append(
                f'<section id="listed">\n<h2>Not drawn ({sum(self._undrawn.values()):,}: '
                f"{_by_outcome(self._undrawn)})</h2>\n<p>The drawings are capped at {self.drawn_cases:,} cases "
                f"and {self.drawn_bytes // 1_000_000} MB so that the page opens quickly; the verdicts file holds "
                "every case.</p>\n<table>\n<tr><th>case</th><th>outcome</th><th>why</th></tr>\n"
            )
            out.extend(self._listed)
            out.append("</table>\n")
            if counted:
                out.append(f"<p>{counted:,} more case{_s(counted)} not listed: {_by_outcome(self._unlisted)}.</p>\n")
            out.append("</section>\n")
        out.append("</body>\n</html>\n")
        return "".join(out)


def write_report(report: Report, path: str) -> None:
    """Write ``report`` to ``path`` as UTF-8."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(report.html())


# The page's parts ----------------------------------------------------------------------------

_STYLE = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',Arial,sans-serif;"
    "margin:1.5rem;color:#212121;background:#fff;max-width:110rem}"
    "h1{font-size:1.6rem}h2{font-size:1.3rem;margin-top:2rem}h3{font-size:1.05rem;margin:0 0 .5rem}"
    "table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;"
    "text-align:left;vertical-align:top}th{background:#f5f5f5}td.n{text-align:right}"
    ".case{border:1px solid #ddd;border-radius:8px;padding:1rem;margin:1rem 0}"
    ".pair{display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start}"
    "figure{margin:0;max-width:100%}figcaption{font-weight:700;margin-bottom:.25rem}"
    "svg{max-width:100%;height:auto}"
    ".outcome{color:#fff;border-radius:1rem;padding:.1rem .6rem;font-size:.85rem}"
    ".WRONG{background:#ef6c00}.INVALID{background:#c62828}.ILLEGAL{background:#ad1457}.NO_CLAIM{background:#757575}"
    ".MALFORMED{background:#6a1b9a}.CONFIRMED{background:#2e7d32}.UNREADABLE{background:#000}"
    ".error{color:#c62828}"
)


def _h(text: object) -> str:
    """Text escaped for HTML (the same rules as the drawings' XML)."""
    return render.escape(str(text))


def _s(count: int) -> str:
    return "" if count == 1 else "s"


def _by_outcome(counts: Counter[str]) -> str:
    return ", ".join(f"{name} {counts[name]:,}" for name in (*OUTCOMES, "UNREADABLE") if counts[name])


def _chart(counts: Counter[str]) -> str:
    """The cases of each outcome as a bar chart (inline SVG)."""
    names = [*OUTCOMES, *(["UNREADABLE"] if counts["UNREADABLE"] else [])]
    total = max(1, sum(counts.values()))
    most = max([counts[name] for name in names] + [1])
    bar, left, row = 360, 110, 26
    height = row * len(names) + 10
    width = left + bar + 140
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="cases by outcome" font-family="{render.FONTS}">'
        "<title>Cases by outcome</title>"
        f"<desc>{_h('; '.join(f'{name} {counts[name]}' for name in names))}</desc>"
    ]
    for i, name in enumerate(names):
        y = 5 + i * row
        length = round(bar * counts[name] / most, 1)
        share = 100 * counts[name] / total
        parts.append(
            f'<g class="bar" data-outcome="{name}" data-count="{counts[name]}">'
            f'<text x="{left - 8}" y="{y + 17}" font-size="13" text-anchor="end" fill="#212121">{name}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{length}" height="18" rx="3" fill="{_COLOURS.get(name, "#000")}"/>'
            f'<text x="{left + length + 6}" y="{y + 17}" font-size="13" fill="#212121">{counts[name]} '
            f"({share:.1f}%)</text></g>"
        )
    parts.append("</svg>\n")
    return "".join(parts)


def _counts_table(counts: Counter[str]) -> str:
    rows = "".join(
        f'<tr><td>{name}</td><td class="n" data-outcome="{name}">{counts[name]}</td></tr>'
        for name in (*OUTCOMES, *(["UNREADABLE"] if counts["UNREADABLE"] else []))
    )
    return (
        f'<table class="counts">\n<tr><th>outcome</th><th>cases</th></tr>{rows}'
        f'<tr><th>total</th><th class="n">{sum(counts.values())}</th></tr>\n</table>\n'
    )


def _listed_row(verdict: str, outcome: str) -> str:
    try:
        message = json.loads(verdict)
        case_id = str(message.get("id", ""))
        why = _why(message)
    except (ValueError, AttributeError):
        case_id, why = "", "the verdict line is not JSON"
    why = why if len(why) <= _REASON_CHARS else why[: _REASON_CHARS - 1] + "…"
    return f'<tr class="listed"><td>{_h(case_id)}</td><td><span class="outcome {outcome}">{outcome}</span></td><td>{_h(why)}</td></tr>\n'


def _why(message: Mapping[str, Any]) -> str:
    """The first reason a verdict gives: its error, or its first claim not confirmed."""
    error = message.get("error")
    if isinstance(error, dict) and error:
        return f"{error.get('field', '')}: {error.get('message', '')}".strip(": ")
    record = message.get("record")
    if isinstance(record, dict) and isinstance(record.get("violation"), dict):
        return str(record["violation"].get("message", ""))
    for claim in message.get("claims") or []:
        verdict = str(claim.get("verdict", "")).removeprefix("VERDICT_")
        if verdict not in ("CONFIRMED", "BEST"):
            reason = (
                claim.get("reason")
                or f"claimed {claim.get('claimed', '')}, the referee says {claim.get('expected', '')}"
            )
            return f"{claim.get('field', '')} {verdict}: {reason}"
    return "no claim" if not message.get("claims") else ""


def _case_section(number: int, verdict: str, case: str | None) -> str:
    """One case drawn: its id and outcome, the claims against the referee's values, and the
    claimed linking or close beside the referee's answer."""
    unreadable = (
        f'<section class="case" data-outcome="UNREADABLE"><h3>verdict {number} '
        '<span class="outcome UNREADABLE">UNREADABLE</span></h3><p class="error">not a verdict</p></section>\n'
    )
    try:
        message = json.loads(verdict)
    except (ValueError, RecursionError):
        return unreadable
    if not isinstance(message, dict):
        return unreadable
    try:
        return _drawn_section(message, outcome_of(verdict) or "UNREADABLE", case)
    except (ValueError, KeyError, TypeError, AttributeError):
        return unreadable


def _drawn_section(message: Mapping[str, Any], outcome: str, case: str | None) -> str:
    case_id = str(message.get("id", ""))
    out = [
        f'<section class="case" data-outcome="{outcome}"><h3>{_h(case_id)} '
        f'<span class="outcome {outcome}">{outcome}</span></h3>\n'
    ]
    error = message.get("error")
    if isinstance(error, dict) and any(error.values()):
        out.append(
            f'<p class="error">{_h(error.get("field", ""))} {_h(repr(error.get("value", "")))}: '
            f"{_h(error.get('message', ''))}</p>\n"
        )
    proof = _shuffle_proof(message.get("record"))
    if proof:
        out.append(f'<p class="proof">{_h(proof)}</p>\n')
    claims = message.get("claims") or []
    if claims:
        out.append(_claims_table(claims))
    # A case that could not be read has no answer to draw, and its claims may be of any size.
    claimed, answer = ([], []) if outcome == "MALFORMED" else _drawings(message, _case_of(case))
    if sum(map(len, claimed + answer)) > SECTION_CHARS:
        claimed, answer = [], []
        out.append("<p>Too large to draw here: the verdicts file holds it.</p>\n")
    if claimed or answer:
        out.append('<div class="pair">')
        for caption, drawings in (("Claimed", claimed), ("The referee", answer)):
            if drawings:
                out.append(f"<figure><figcaption>{caption}</figcaption>{''.join(drawings)}</figure>")
        out.append("</div>\n")
    out.append("</section>\n")
    return "".join(out)


def _shuffle_proof(record: object) -> str:
    """What a record verdict's deal proves about its deck order, in words ("" for no record)."""
    if not isinstance(record, dict):
        return ""
    name = str(record.get("shuffle_proof", "")).removeprefix("SHUFFLE_PROOF_")
    if name not in ShuffleProof.__members__:
        return ""
    violation = record.get("violation")
    mismatch = isinstance(violation, dict) and violation.get("code") == "VIOLATION_CODE_SEED_MISMATCH"
    return ShuffleProof[name].sentence(mismatch)


def _claims_table(claims: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for claim in claims:
        verdict = str(claim.get("verdict", "")).removeprefix("VERDICT_")
        rows.append(
            f"<tr><td>{_h(claim.get('field', ''))}</td><td>{_h(verdict)}</td><td>{_h(claim.get('claimed', ''))}</td>"
            f"<td>{_h(claim.get('expected', ''))}</td><td>{_h(claim.get('reason', ''))}</td></tr>"
        )
    return (
        "<table><tr><th>claim</th><th>verdict</th><th>claimed</th><th>the referee</th><th>why</th></tr>"
        + "".join(rows)
        + "</table>\n"
    )


def _case_of(case: str | None) -> Mapping[str, Any]:
    if case is None or len(case) > KEPT_CASE_CHARS:
        return {}
    try:
        value = json.loads(case)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _drawings(verdict: Mapping[str, Any], case: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The drawings of the claim (from the case) and of the referee's answer (from the verdict).

    A part that cannot be drawn (a case too malformed to read) is left out: the claims table
    and the error still say what happened."""
    claimed: list[str] = []
    answer: list[str] = []
    try:
        if isinstance(verdict.get("hand"), dict):
            answer.append(render.linking_svg(linking_from_json(verdict["hand"]), "The best linking"))
        elif isinstance(verdict.get("close"), dict):
            answer.append(render.close_svg(close_from_json(verdict["close"]), "The close"))
        elif isinstance(verdict.get("deal"), dict):
            answer.append(render.deal_svg(deal_from_json(verdict["deal"]), "The deal scored"))
        elif isinstance(verdict.get("record"), dict):
            replayed = replay_from_json(verdict["record"])
            answer.append(render.replay_svg(replayed))
            result = verdict["record"].get("result")
            if replayed.complete and replayed.legal and isinstance(result, dict) and result:
                answer.append(render.deal_svg(deal_from_json(result), "The deal scored"))
    except (ValueError, KeyError, TypeError, AttributeError):
        answer = []
    try:
        claimed = _claimed_drawings(case)
    except (ValueError, KeyError, TypeError, AttributeError):
        claimed = []
    return claimed, answer


def _claimed_drawings(case: Mapping[str, Any]) -> list[str]:
    hand = case.get("hand")
    if isinstance(hand, dict):
        cards = _cards(_field(hand, "cards", []))
        groups = [_cards(_field(group, "cards", [])) for group in _field(hand, "claimed_groups", []) or []]
        if groups:
            return [render.claimed_svg(groups, _left_out(cards, groups), "The claimed linking")]
        points = _field(hand, "claimed_points")
        if points is not None:
            return [render.cards_svg(sort_cards(cards), "The hand", f"claimed: {points} points")]
        return []
    close = case.get("close")
    if isinstance(close, dict):
        cards = _cards(_field(close, "cards", []))
        discard = _field(close, "discard", "")
        kind = _field(close, "claimed_kind")
        multiplier = _field(close, "claimed_multiplier")
        said = []
        if kind is not None:
            named = close_kind_from_json(kind)
            said.append("no valid close" if named is None else named.value)
        if multiplier is not None:
            said.append(f"×{multiplier}")
        note = f"claimed: {' '.join(said)}" if said else ""
        shown = sort_cards(cards)
        return [render.cards_svg(shown, "The close as sent", note, Card.parse(discard) if discard else None)]
    deal = case.get("deal")
    if isinstance(deal, dict):
        players = _field(_field(deal, "deal", {}), "players", [])
        drawings = []
        for claim in _field(_field(deal, "claims", {}), "players", []) or []:
            groups = [_cards(_field(group, "cards", [])) for group in _field(claim, "groups", []) or []]
            seat = int(_field(claim, "player", 0))
            if not groups or not 0 <= seat < len(players):
                continue
            name = _field(players[seat], "name", "") or f"player{seat + 1}"
            cards = _cards(_field(players[seat], "cards", []))
            drawings.append(render.claimed_svg(groups, _left_out(cards, groups), f"{name}: the claimed linking"))
        return drawings
    return []


def _left_out(cards: Sequence[Card], groups: Sequence[Sequence[Card]]) -> tuple[Card, ...]:
    """The cards of the hand in no claimed group (none when the groups use cards it lacks)."""
    left = Counter(cards)
    for group in groups:
        left.subtract(group)
    if any(count < 0 for count in left.values()):
        return ()
    return sort_cards(left.elements())


__all__ = [
    "DRAWN_BYTES",
    "DRAWN_CASES",
    "LISTED_CASES",
    "OUTCOMES",
    "Report",
    "close_from_json",
    "close_kind_from_json",
    "deal_from_json",
    "group_from_json",
    "linking_from_json",
    "outcome_of",
    "replay_from_json",
    "write_report",
]
