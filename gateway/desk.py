"""The referee desk: one self-contained HTML page the gateway serves at ``/desk``.

``page()`` fills ``desk.html.in`` with its stylesheet (``desk.css``), its script (``desk.js``)
and the card faces as SVG symbols from ``referee.render``, so the desk draws the very cards the
command line's ``--svg`` and the dispute report draw. Nothing is fetched from elsewhere: the page
calls the referee only, on its own origin, through the gateway's JSON routes. Its Content
Security Policy allows exactly its own script and stylesheet (by their SHA-256) and calls to its
own origin.
"""

from __future__ import annotations

import base64
import hashlib
import html
from pathlib import Path

from referee import __version__, render
from referee.game.rules import CloseKind

HERE = Path(__file__).resolve().parent
TEMPLATE = HERE / "desk.html.in"
STYLE = HERE / "desk.css"
SCRIPT = HERE / "desk.js"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _close_kinds() -> str:
    """The close kinds a claim may name, as the select's options (the proto's enum names)."""
    return "".join(
        f'<option value="CLOSE_KIND_{kind.name}">{html.escape(kind.value.replace("_", " ").lower())}</option>'
        for kind in CloseKind
    )


def page() -> str:
    """The desk as one HTML document."""
    style = STYLE.read_text(encoding="utf-8")
    script = SCRIPT.read_text(encoding="utf-8")
    # Nothing but the page's own script and stylesheet runs, and it talks to its own origin only.
    csp = (
        f"default-src 'none'; script-src {_sha256(script)}; style-src {_sha256(style)}; "
        "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'"
    )
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, value in (
        ("csp", csp),
        ("version", html.escape(__version__)),
        ("close_kinds", _close_kinds()),
        ("symbols", render.card_symbols()),
        ("style", style),
        ("script", script),
    ):
        text = text.replace("{{" + name + "}}", value)
    return text


def write(path: Path) -> Path:
    """Write the desk to ``path``; the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page(), encoding="utf-8")
    return path
