"""Errors of the referee: each one names the field and the value at fault."""

from __future__ import annotations


class RefereeError(ValueError):
    """A request the referee cannot judge; it names the field and the value at fault."""

    def __init__(self, field: str, value: object, message: str) -> None:
        self.field = field
        self.value = value
        self.message = message
        super().__init__(f"{field}: {message} ({value!r})" if field else f"{message} ({value!r})")

    def at(self, prefix: str) -> RefereeError:
        """The same error with its field path placed under ``prefix``."""
        field = f"{prefix}.{self.field}" if self.field and not self.field.startswith("[") else f"{prefix}{self.field}"
        return type(self)(field, self.value, self.message)


class InvalidCardError(RefereeError):
    """A card code that is not in the notation of the rule book."""


class InvalidOptionError(RefereeError):
    """A rule option out of its range."""


class InvalidDealError(RefereeError):
    """An end-of-deal state that breaks the deal's counts or the deck."""


class SolverError(RuntimeError):
    """The solver gave no proven answer (time cap reached or model invalid)."""


class EngineDisagreementError(RuntimeError):
    """Two engines in audit mode gave different answers for one hand."""
