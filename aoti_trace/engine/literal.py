"""The literal text that every match of a rule regex contains: a cheap test that a regex cannot match a frame's
column, before Polars compiles and runs it (start-up, issue 12). Computed once per rule when rules are loaded (the
rule-set cache keeps it)."""

from __future__ import annotations

import functools
import re
from typing import Any

MIN_LITERAL = 4  # a required literal shorter than this is not worth the pre-check


@functools.lru_cache(maxsize=4096)
def required_literal(pattern: str) -> str | None:
    """The longest run of literal characters that every match of ``pattern`` contains (case-sensitive patterns
    only), or None. Read from Python's parse of the pattern; a pattern Python reads differently or not at all,
    one with a case-insensitive flag, or one whose longest run is shorter than :data:`MIN_LITERAL` gives None."""
    try:
        import re._parser as sre  # type: ignore[import-not-found]  # (mypy checks as Python 3.10)
    except ImportError:  # Python < 3.11
        import sre_parse as sre
    try:
        parsed = sre.parse(pattern)
    except Exception:  # noqa: BLE001 (Rust-only syntax, or anything Python rejects: no pre-check)
        return None
    if parsed.state.flags & (re.IGNORECASE | re.VERBOSE) or "(?i" in pattern or "(?x" in pattern:
        return None
    runs: list[str] = []

    def walk(items: Any) -> None:  # a parsed (sub)pattern: a sequence of (opcode, argument) pairs
        run: list[str] = []
        for op, arg in items:
            if op is sre.LITERAL:
                run.append(chr(arg))
                continue
            runs.append("".join(run))
            run = []
            if op is sre.SUBPATTERN and not arg[1] and not arg[2]:  # a plain group: its content is required
                walk(arg[3])
            elif op in (sre.MAX_REPEAT, sre.MIN_REPEAT) and arg[0] >= 1:  # at least once: its content is required
                walk(arg[2])
        runs.append("".join(run))

    walk(parsed)
    best = max(runs, key=len, default="")
    return best if len(best) >= MIN_LITERAL else None
