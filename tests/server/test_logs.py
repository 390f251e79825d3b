"""The server's log handler: call lines held through the event loop's turn, and the log's order kept."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from referee.server import console, logs

LOGGER = logging.getLogger("referee.service")


class CountedWrites(io.StringIO):
    """A stream that counts its writes, line-buffered like stderr."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    @property
    def line_buffering(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


@pytest.fixture
def set_up(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], CountedWrites]]:
    """The server's logging set up on a counted stderr, and put back as it was afterwards. Called
    in the test's body: pytest puts its own stderr and its own handler on the root logger after the
    fixtures (the server's handler must be the only one for lines to be held)."""
    saved = logging.root.handlers[:], logging.root.level, logs._direct

    def start() -> CountedWrites:
        written = CountedWrites()
        monkeypatch.setattr(sys, "stderr", written)
        logs.configure_logging("text")
        return written

    try:
        yield start
    finally:
        logging.root.handlers[:], _, logs._direct = saved
        logging.root.setLevel(saved[1])


def _messages(written: CountedWrites) -> list[str]:
    return [line.rsplit(": ", 1)[1] for line in written.getvalue().splitlines()]


def test_the_loops_lines_are_held_a_moment_and_written_together(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()
    seen: list[str] = []

    async def calls() -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        for n in range(5):
            assert logs.write_direct(LOGGER, f"call {n}")
            await asyncio.sleep(0)  # a call a turn, as under load
        seen.append(stream.getvalue())  # nothing written yet
        while not stream.getvalue():
            await asyncio.sleep(0.001)
        seen.append(f"{loop.time() - started:.3f}")
        assert logs.write_direct(LOGGER, "call 5")
        await asyncio.sleep(logs.HOLD_SECONDS * 2)

    asyncio.run(calls())
    assert seen[0] == ""
    assert logs.HOLD_SECONDS <= float(seen[1]) < 1.0
    assert _messages(stream) == [f"call {n}" for n in range(6)]
    assert stream.writes == 2


def test_at_most_hold_lines_are_held(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()

    async def calls() -> None:
        for n in range(logs.HOLD_LINES + 1):
            logs.write_direct(LOGGER, f"call {n}")
        assert stream.writes == 1  # the first HOLD_LINES, at once
        assert len(_messages(stream)) == logs.HOLD_LINES

    asyncio.run(calls())


def test_a_record_or_a_status_line_comes_after_the_lines_held_before_it(
    set_up: Callable[[], CountedWrites], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = set_up()
    # A status line is written to stderr's descriptor directly; here it goes to the same stream.
    monkeypatch.setattr(stream, "fileno", lambda: 2, raising=False)
    monkeypatch.setattr(os, "write", lambda _fd, data: stream.write(data.decode()))

    async def turn() -> None:
        logs.write_direct(LOGGER, "held 1")
        LOGGER.warning("a record")
        logs.write_direct(LOGGER, "held 2")
        console.say("remigio-referee: stopped")
        logs.write_direct(LOGGER, "held 3")
        await asyncio.sleep(logs.HOLD_SECONDS * 2)

    asyncio.run(turn())
    lines = stream.getvalue().splitlines()
    assert [line.rsplit(": ", 1)[-1] for line in lines] == ["held 1", "a record", "held 2", "stopped", "held 3"]


def test_a_line_written_off_the_loop_is_written_at_once_after_those_held(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()

    async def turn() -> None:
        logs.write_direct(LOGGER, "held")
        # A compute thread's line, while the loop's is still held.
        await asyncio.to_thread(logs.write_direct, LOGGER, "from a thread")
        assert _messages(stream) == ["held", "from a thread"]

    asyncio.run(turn())
    assert _messages(stream) == ["held", "from a thread"]


def test_held_lines_are_written_when_logging_shuts_down(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()
    handler = logs._direct
    assert handler is not None

    async def turn() -> None:
        # The process exits within the turn (``sys.exit`` in a callback): logging's flush at exit
        # writes what was held.
        logs.write_direct(LOGGER, "the last call")
        assert handler.held
        logging.shutdown([lambda: handler])  # type: ignore[list-item]
        assert _messages(stream) == ["the last call"]

    asyncio.run(turn())
    assert _messages(stream) == ["the last call"]


async def _write(message: str) -> None:
    logs.write_direct(LOGGER, message)
    await asyncio.sleep(logs.HOLD_SECONDS * 2)  # the held line's time is up


def test_a_failing_stream_loses_its_lines_without_an_error(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()

    def broken(_text: str) -> int:
        raise BrokenPipeError

    stream.write = broken  # type: ignore[method-assign]
    asyncio.run(_write("nowhere to go"))
    handler = logs._direct
    assert handler is not None and not handler.held


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork")
def test_a_forked_child_does_not_write_the_lines_its_parent_held(set_up: Callable[[], CountedWrites]) -> None:
    stream = set_up()
    handler = logs._direct
    assert handler is not None
    handler.held.append((time.time(), LOGGER.name, "the parent's line", (), None, None))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: what it would write at its exit
        os.write(write, str(len(handler.held)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        held_in_child = pipe.read()
    os.waitpid(pid, 0)
    assert held_in_child == "0"
    handler.write_held()
    assert _messages(stream) == ["the parent's line"]


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_held_line_keeps_the_time_it_was_written_and_its_arguments(
    log_format: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datetime
    import json

    written = CountedWrites()
    saved = logging.root.handlers[:], logging.root.level, logs._direct
    monkeypatch.setattr(sys, "stderr", written)
    monkeypatch.setattr(logs, "HOLD_SECONDS", 0.3)
    wrote: list[float] = []
    try:
        logs.configure_logging(log_format)

        async def call() -> None:
            wrote.append(time.time())
            logs.write_direct(LOGGER, "SolveHand %s %.2fms", ("OK", 1.234), lambda n: {"cases": n}, 7)
            await asyncio.sleep(0.5)

        asyncio.run(call())
    finally:
        logging.root.handlers[:], _, logs._direct = saved
        logging.root.setLevel(saved[1])
    (line,) = written.getvalue().splitlines()
    if log_format == "json":
        logged = json.loads(line)
        assert logged["message"] == "SolveHand OK 1.23ms" and logged["cases"] == 7
        stamp = datetime.datetime.strptime(logged["time"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC)
    else:
        assert line.endswith("referee.service: SolveHand OK 1.23ms")
        stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
        stamp = stamp.replace(tzinfo=datetime.datetime.now().astimezone().tzinfo)
    # Made 0.3 s later, it still says when it was written.
    assert abs(stamp.timestamp() - wrote[0]) < 0.1
