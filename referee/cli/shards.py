"""Shards of a batch for a plain Kubernetes Indexed Job, and the command that merges their outputs.

``remigio-referee batch --shard I/N`` judges exactly the cases whose shard is ``I``: the shard of
a case is a stable hash of its id (the first eight bytes of the SHA-256 of the id's UTF-8, read
as a big-endian number, modulo ``N``), the same on every machine, Python and run. A case without
an id (or whose line cannot be read) is known by ``line:N``, as in its verdict, so it too is in
exactly one shard. Each of the ``N`` pods of an Indexed Job reads the whole input, keeps its own
cases and writes their verdicts in the input's order.

``remigio-referee batch-merge`` (``referee.cli.merge``) puts the shards' outputs back together.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard of ``count``: its ``index`` from 0."""

    index: int
    count: int

    def holds(self, case_id: str) -> bool:
        """Whether the case of this id is in this shard."""
        return shard_of(case_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def shard_of(case_id: str, count: int) -> int:
    """The shard (0 to ``count`` - 1) of a case id: documented above, so other tools can agree."""
    digest = hashlib.sha256(case_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % count


def parse_shard(text: str) -> Shard:
    """``I/N`` with 0 <= I < N (argparse names the option in its error)."""
    index, slash, count = text.partition("/")
    if not slash or not index.strip().isdigit() or not count.strip().isdigit():
        raise argparse.ArgumentTypeError(f"want I/N (such as 0/4, or $JOB_COMPLETION_INDEX/4), not {text!r}")
    shard = Shard(int(index), int(count))
    if shard.count < 1 or shard.index >= shard.count:
        raise argparse.ArgumentTypeError(f"the index must be from 0 to N-1 and N at least 1, not {text!r}")
    return shard


def select(source: TextIO, shard: Shard, case_id: Callable[[int, str], str]) -> TextIO:
    """``source`` with the lines of other shards' cases made blank, rewound, in a temporary file.

    Blank, not dropped: a line keeps its number, so a case without an id is ``line:N`` in every
    shard's run as in a run over the whole input, and its verdict names the same line.
    ``case_id(number, text)`` is the id of a line (``batch.line_id``)."""
    spool = tempfile.TemporaryFile()
    out = io.TextIOWrapper(spool, encoding="utf-8", newline="")
    with source:
        for number, text in enumerate(source, start=1):
            keep = text.strip() and shard.holds(case_id(number, text))
            out.write(text if keep else "\n")
    out.flush()
    out.seek(0)
    return out
