"""Which torch message is this? Look a failure's message up in the message catalogue (``rules/catalogue``).

The catalogue lists the error messages torch raises on the AOTI path, each with the file that raises it and a family
(see ``rules/catalogue/README.md``). A log often holds only the final ``Type: message`` line: no frame says where it
was raised. :func:`lookup` finds the catalogued template the message was made from, so that failure detection can
name the raising file, its phase and its family.

Matching needs no regex: a template is its literal pieces between the ``{}`` fields; it matches when the first piece
starts the message and every piece follows in order (``str.find``, linear in the message). The most specific match
wins (the most literal text). Templates with less than ``MIN_LITERAL`` characters of text (``{}: {}``) and carrier
templates (``Error: {}``, wrappers whose family is the one of the message they carry) never match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

MIN_LITERAL = 16
MAX_MESSAGE = 4096


@dataclass(frozen=True)
class KnownMessage:
    template: str
    exc_type: str
    family: str
    file: str  # path:line of the raising statement in the newest release that has it
    first_version: str
    last_version: str


def _collapse(text: str) -> str:
    return " ".join(text.split())


@lru_cache(maxsize=1)
def _templates() -> tuple[tuple[tuple[str, ...], int, KnownMessage], ...]:
    from aoti_trace.library.loader import default_rules_dir

    path: Path = default_rules_dir() / "catalogue" / "messages.jsonl"
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ()
    for line in text.splitlines():
        try:
            m = json.loads(line)
        except ValueError:
            continue
        if not isinstance(m, dict) or m.get("carrier") or not m.get("template"):
            continue
        pieces = tuple(p for p in _collapse(str(m["template"])).split("{}"))
        literal = sum(len(p.strip()) for p in pieces)
        if literal < MIN_LITERAL:
            continue
        files = m.get("files") or ["?"]
        out.append((pieces, literal, KnownMessage(str(m["template"]), str(m.get("exc_type") or ""),
                                                   str(m.get("family") or ""), str(files[0]),
                                                   str(m.get("first_version") or ""),
                                                   str(m.get("last_version") or ""))))
    return tuple(out)


def _matches(pieces: tuple[str, ...], message: str) -> bool:
    first = pieces[0]
    if first and not message.startswith(first.lstrip()):
        return False
    at = len(first.lstrip())
    for piece in pieces[1:]:
        piece = piece.strip()
        if not piece:
            continue
        i = message.find(piece, at)
        if i < 0:
            return False
        at = i + len(piece)
    return True


@lru_cache(maxsize=1)
def _by_prefix() -> dict[int, dict[str, list[int]]]:
    """The templates (their index in :func:`_templates`) by the text a message must start with (the first piece,
    stripped on the left): length -> that text -> indexes. The empty text (a template that starts with a field)
    is under length 0."""
    out: dict[int, dict[str, list[int]]] = {}
    for i, (pieces, _literal, _known) in enumerate(_templates()):
        first = pieces[0].lstrip()
        out.setdefault(len(first), {}).setdefault(first, []).append(i)
    return out


def lookup(message: str | None) -> KnownMessage | None:
    """The catalogued torch message that ``message`` (an exception's message, without its type) was made from."""
    if not message:
        return None
    msg = _collapse(message[:MAX_MESSAGE])
    # only the templates whose first piece starts the message can match (:func:`_matches`), in catalogue order
    candidates = sorted(i for n, table in _by_prefix().items() if n <= len(msg) for i in table.get(msg[:n], ()))
    templates = _templates()
    best: tuple[int, KnownMessage] | None = None
    for i in candidates:
        pieces, literal, known = templates[i]
        if (best is None or literal > best[0]) and _matches(pieces, msg):
            best = (literal, known)
    return best[1] if best else None
