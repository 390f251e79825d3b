"""Remigio referee: best linkings, closes and deal scoring for the card game Remigio."""

__version__ = "0.1.0"
