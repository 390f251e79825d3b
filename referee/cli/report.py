"""The dispute report: one self-contained HTML page of a batch's verdicts (``batch --report``).

The page needs nothing outside itself: no script, stylesheet, font or image is fetched, so it
opens from disk anywhere. It holds a summary (the cases of each outcome, as a chart and a table)
and, for each case that is not CONFIRMED, the claims beside the referee's answers, drawn with
``referee.render``, with the reasons.

Whatever the batch's size the page stays small enough to open quickly: the first
``DRAWN_CASES`` cases that are not confirmed are drawn (fewer when their drawings reach
``DRAWN_BYTES``), the next ``LISTED_CASES`` are listed by id, outcome and reason, and the rest are
only counted; the page says how many of each. Only what is drawn or listed is kept in memory.

The verdicts and cases are read as their messages with ``referee.api.jsonmsg`` (the batch
files' one shape, read the one way the rest of the referee reads it), and the domain values the
drawings take are read from the messages by ``referee.api.convert`` and ``referee.api.records``.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from google.protobuf import json_format

from referee import render
from referee._gen.remigio.referee.v1 import referee_pb2 as pb
from referee.api import jsonmsg
from referee.api.drawings import draw_answer, verdict_drawings
from referee.api.records import shuffle_proof_from_proto, violation_code_name
from referee.game.errors import RefereeError

OUTCOMES = ("CONFIRMED", "WRONG", "INVALID", "ILLEGAL", "NO_CLAIM", "MALFORMED")
DRAWN_CASES = 500
DRAWN_BYTES = 4_000_000
LISTED_CASES = 2_000
# Legal records among the drawn cases whose review is drawn too: a review costs tens of
# milliseconds of the batch's time a record, the page megabytes at most.
REVIEWED_CASES = 20
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


# Reading the lines ---------------------------------------------------------------------------


def verdict_of(line: str) -> pb.CheckDisputesResponse | None:
    """A verdict line as its message, or None when it is not one."""
    return _message(line, pb.CheckDisputesResponse())


def case_of(line: str | None) -> pb.CheckDisputesRequest | None:
    """A case line as its message, or None when it is none (too long to keep, or unreadable)."""
    if line is None or len(line) > KEPT_CASE_CHARS:
        return None
    return _message(line, pb.CheckDisputesRequest())


_M = TypeVar("_M", pb.CheckDisputesResponse, pb.CheckDisputesRequest)


def _message(line: str, message: _M) -> _M | None:
    try:
        jsonmsg.parse(line, message)
    except (json_format.ParseError, ValueError, TypeError, RecursionError):
        return None
    return message


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
        reviewed_cases: int = REVIEWED_CASES,
    ) -> None:
        self.title = title
        self.reviewed_cases = reviewed_cases
        self.reviewed = 0
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
            review = self.reviewed < self.reviewed_cases
            section = _case_section(len(self._sections) + 1, verdict, case, review)
            self.reviewed += review and 'class="review"' in section
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
    message = verdict_of(verdict)
    case_id, why = ("", "the verdict line is not a verdict") if message is None else (message.id, _why(message))
    why = why if len(why) <= _REASON_CHARS else why[: _REASON_CHARS - 1] + "…"
    return f'<tr class="listed"><td>{_h(case_id)}</td><td><span class="outcome {outcome}">{outcome}</span></td><td>{_h(why)}</td></tr>\n'


def _why(message: pb.CheckDisputesResponse) -> str:
    """The first reason a verdict gives: its error, or its first claim not confirmed."""
    if message.HasField("error"):
        return f"{message.error.field}: {message.error.message}".strip(": ")
    if message.HasField("record") and message.record.HasField("violation"):
        return message.record.violation.message
    for claim in message.claims:
        verdict = _verdict_name(claim)
        if verdict not in ("CONFIRMED", "BEST"):
            reason = claim.reason or f"claimed {claim.claimed}, the referee says {claim.expected}"
            return f"{claim.field} {verdict}: {reason}"
    return "" if message.claims else "no claim"


def _verdict_name(claim: pb.ClaimVerdict) -> str:
    return pb.Verdict.Name(claim.verdict).removeprefix("VERDICT_") if claim.verdict in pb.Verdict.values() else ""


def _case_section(number: int, verdict: str, case: str | None, review: bool = False) -> str:
    """One case drawn: its id and outcome, the claims against the referee's values, and the
    claimed linking or close beside the referee's answer."""
    message = verdict_of(verdict)
    if message is None:
        return (
            f'<section class="case" data-outcome="UNREADABLE"><h3>verdict {number} '
            '<span class="outcome UNREADABLE">UNREADABLE</span></h3><p class="error">not a verdict</p></section>\n'
        )
    return _drawn_section(message, outcome_of(verdict) or "UNREADABLE", case, review)


def _drawn_section(message: pb.CheckDisputesResponse, outcome: str, case: str | None, review: bool = False) -> str:
    out = [
        f'<section class="case" data-outcome="{outcome}"><h3>{_h(message.id)} '
        f'<span class="outcome {outcome}">{outcome}</span></h3>\n'
    ]
    if message.HasField("error"):
        error = message.error
        out.append(f'<p class="error">{_h(error.field)} {_h(repr(error.value))}: {_h(error.message)}</p>\n')
    if message.HasField("record"):
        out.append(f'<p class="proof">{_h(_shuffle_proof(message.record))}</p>\n')
    if message.claims:
        out.append(_claims_table(message.claims))
    # A case that could not be read has no answer to draw, and its claims may be of any size.
    claimed, answer = ([], []) if outcome == "MALFORMED" else verdict_drawings(message, case_of(case))
    if sum(map(len, claimed + answer)) > SECTION_CHARS:
        claimed, answer = [], []
        out.append("<p>Too large to draw here: the verdicts file holds it.</p>\n")
    if claimed or answer:
        out.append('<div class="pair">')
        for caption, drawings in (("Claimed", claimed), ("The referee", answer)):
            if drawings:
                out.append(f"<figure><figcaption>{caption}</figcaption>{''.join(drawings)}</figure>")
        out.append("</div>\n")
    if review and message.HasField("record") and message.record.legal:
        out.append(_review(case_of(case)))
    out.append("</section>\n")
    return "".join(out)


def _review(case: pb.CheckDisputesRequest | None) -> str:
    """A legal record's review drawn (docs/review.md), or "" when the case cannot be read again."""
    if case is None or not case.HasField("record"):
        return ""
    record = case.record
    question = pb.ReviewDealRequest(record=record.record, rules=record.rules, notation=record.notation)
    try:
        (picture,) = draw_answer(pb.DrawAnswerRequest(review_deal=question)).drawings
    except (RefereeError, ValueError):
        return ""
    return f'<figure class="review"><figcaption>{_h(picture.caption)}</figcaption>{picture.svg}</figure>\n'


def _shuffle_proof(record: pb.ReplayDealResponse) -> str:
    """What a record verdict's deal proves about its deck order, in words."""
    mismatch = record.HasField("violation") and violation_code_name(record.violation.code) == "SEED_MISMATCH"
    return shuffle_proof_from_proto(record.shuffle_proof).sentence(mismatch)


def _claims_table(claims: Sequence[pb.ClaimVerdict]) -> str:
    rows = [
        f"<tr><td>{_h(claim.field)}</td><td>{_h(_verdict_name(claim))}</td><td>{_h(claim.claimed)}</td>"
        f"<td>{_h(claim.expected)}</td><td>{_h(claim.reason)}</td></tr>"
        for claim in claims
    ]
    return (
        "<table><tr><th>claim</th><th>verdict</th><th>claimed</th><th>the referee</th><th>why</th></tr>"
        + "".join(rows)
        + "</table>\n"
    )


__all__ = [
    "DRAWN_BYTES",
    "DRAWN_CASES",
    "LISTED_CASES",
    "OUTCOMES",
    "Report",
    "case_of",
    "outcome_of",
    "verdict_of",
    "write_report",
]
