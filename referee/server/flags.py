"""Flags with environment twins, for the referee's ``serve`` (``REMIGIO_*``) and the gateway's
commands (``REMIGIO_GATEWAY_*``): one helper for both.

``PREFIX`` + the flag's name in capitals (``--max-connections``: ``REMIGIO_MAX_CONNECTIONS``)
gives the flag's default, converted by the flag's type; the flag itself wins. A variable whose
value the type refuses does not stop the parser being built (another command may be the one
running): it is kept in the parsed namespace's ``env_errors``, and the command that owns the flag
reports it, naming the variable, before it does anything.

The standard library alone: the gateway's image runs it without the rest of the referee.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

# The spellings of "off" a switch's variable may take.
_OFF = ("", "0", "false", "no", "off")


def env_name(prefix: str, flag: str) -> str:
    """The environment twin of ``flag``: ``REMIGIO_`` and ``--max-connections`` give
    ``REMIGIO_MAX_CONNECTIONS``."""
    return prefix + flag.lstrip("-").replace("-", "_").upper()


def with_env(
    parser: argparse.ArgumentParser, prefix: str, environ: Mapping[str, str] | None, *, mark: bool = True
) -> Callable[..., argparse.Action]:
    """``parser.add_argument``, with each flag's default taken from its twin in ``environ`` when
    set there (None: no environment). ``mark`` adds ``[NAME]`` (``[NAME set]`` when set) to the
    help; without it the caller's help says the variable itself."""
    errors: list[str] = parser.get_default("env_errors") or []
    parser.set_defaults(env_errors=errors)

    def add(flag: str, **options: Any) -> argparse.Action:
        name = env_name(prefix, flag)
        text = "" if environ is None else environ.get(name, "")
        if text != "":
            action = options.get("action")
            if action == "append":
                options["default"] = [item.strip() for item in text.split(",") if item.strip()]
            elif action == "store_true":
                options["default"] = text.strip().lower() not in _OFF
            else:
                try:
                    options["default"] = options.get("type", str)(text)
                except (ValueError, argparse.ArgumentTypeError) as error:
                    errors.append(f"{name}: {error}")
        if mark and environ is not None:
            options["help"] = options.get("help", "") + (f" [{name} set]" if text else f" [{name}]")
        return parser.add_argument(flag, **options)

    return add


def check_env(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Stop with ``parser``'s usage error (status 2) when a variable of the running command did not
    convert: its name, its value's fault."""
    errors = getattr(args, "env_errors", None)
    if errors:
        parser.error(errors[0])


__all__ = ["check_env", "env_name", "with_env"]
