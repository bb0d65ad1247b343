"""JSON decoding of untrusted input (trace headers, manifests, package metadata, chromium events).

:func:`loads` is :func:`json.loads` with every way hostile text can make it fail turned into :class:`ValueError`,
and with a result that is safe to hand to code that recurses or encodes:

* nesting deeper than :data:`MAX_DEPTH` (50,000 ``[`` would otherwise raise ``RecursionError`` here, or later in
  any code that walks, prints or serialises the value) is refused;
* integers longer than Python's digit limit (``ValueError`` already) are refused like any other bad JSON;
* lone UTF-16 surrogates (``"\\ud800"``), which JSON allows but UTF-8 cannot encode (Polars, file writes and
  reports would raise ``UnicodeEncodeError``), become U+FFFD.
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64  # real TORCH_TRACE / manifest / package JSON nests 2-6 levels deep
_SURROGATE = re.compile("[\ud800-\udfff]")  # a character class: linear
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """Decode ``text``; raises :class:`ValueError` (never ``RecursionError``) for anything that is not sane JSON."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested too deeply (over {max_depth} levels)") from None
    return _checked(value, text, max_depth)


def raw_decode(text: str, *, max_depth: int = MAX_DEPTH) -> tuple[Any, int]:
    """:meth:`json.JSONDecoder.raw_decode` with the guarantees of :func:`loads`."""
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except RecursionError:
        raise ValueError(f"JSON nested too deeply (over {max_depth} levels)") from None
    return _checked(value, text, max_depth), end


def _checked(value: Any, text: str | bytes, max_depth: int) -> Any:
    # a value nests no deeper than the number of '[' and '{' in its text: the walk is needed only above that
    if isinstance(value, (dict, list)) and _openers(text) > max_depth and depth(value, max_depth) > max_depth:
        raise ValueError(f"JSON nested too deeply (over {max_depth} levels)")
    raw = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
    if _ESCAPED_SURROGATE.search(raw):
        value = _fix_surrogates(value)
    return value


def _openers(text: str | bytes) -> int:
    """The number of ``[`` and ``{`` in ``text``: a bound on the nesting depth of the JSON value it holds."""
    if isinstance(text, str):
        return text.count("[") + text.count("{")
    return text.count(b"[") + text.count(b"{")


def depth(value: Any, stop: int = MAX_DEPTH) -> int:
    """Nesting depth of lists/dicts (iterative; stops counting past ``stop``)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, d = todo.pop()
        if d > deepest:
            deepest = d
            if deepest > stop:
                return deepest
        children = item.values() if isinstance(item, dict) else item
        todo.extend((c, d + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (a no-op for text that came from valid UTF-8)."""
    return _SURROGATE.sub("\ufffd", text)


def _fix_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_fix_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(k): _fix_surrogates(v) for k, v in value.items()}
    return value
