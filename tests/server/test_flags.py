"""The one helper of flags with environment twins (referee.server.flags), as serve and the
gateway's commands use it."""

from __future__ import annotations

import argparse

import pytest

from referee.server.flags import check_env, env_name, with_env


def _parser(environ: dict[str, str], mark: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="test")
    add = with_env(parser, "REMIGIO_", environ, mark=mark)
    add("--port", type=int, default=50051, help="port")
    add("--origin", action="append", default=[], help="origins")
    add("--strict", action="store_true", help="a switch")
    return parser


def test_a_variable_is_the_default_and_the_flag_wins() -> None:
    assert env_name("REMIGIO_GATEWAY_", "--max-body-bytes") == "REMIGIO_GATEWAY_MAX_BODY_BYTES"
    environ = {"REMIGIO_PORT": "6000", "REMIGIO_ORIGIN": "https://a.example, https://b.example", "REMIGIO_STRICT": "1"}
    args = _parser(environ).parse_args([])
    assert (args.port, args.origin, args.strict, args.env_errors) == (
        6000,
        ["https://a.example", "https://b.example"],
        True,
        [],
    )
    assert _parser(environ).parse_args(["--port", "7000"]).port == 7000


@pytest.mark.parametrize("off", ["", "0", "false", "no", "off", "OFF"])
def test_a_switch_is_off_in_every_spelling_of_off(off: str) -> None:
    assert _parser({"REMIGIO_STRICT": off}).parse_args([]).strict is False


def test_a_variable_that_does_not_convert_is_named_when_the_command_runs(capsys: pytest.CaptureFixture[str]) -> None:
    parser = _parser({"REMIGIO_PORT": "abc"})
    args = parser.parse_args([])  # building and parsing go on: another command may be running
    assert args.env_errors == ["REMIGIO_PORT: invalid literal for int() with base 10: 'abc'"]
    with pytest.raises(SystemExit) as stopped:
        check_env(parser, args)
    assert stopped.value.code == 2
    assert "REMIGIO_PORT: invalid literal" in capsys.readouterr().err


def test_the_help_names_each_twin_or_leaves_that_to_the_caller() -> None:
    assert "[REMIGIO_PORT set]" in _parser({"REMIGIO_PORT": "1"}).format_help()
    assert "[REMIGIO_PORT]" in _parser({}).format_help()
    assert "REMIGIO_PORT" not in _parser({}, mark=False).format_help()
